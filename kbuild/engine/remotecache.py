"""A remote call cache: the local cache's records in an S3-compatible store, under the same keys.

`KBUILD_CACHE_URL=s3://bucket/prefix` makes the call cache read through and write through it: a
local miss asks the remote, an answer from the remote is written to the local cache, and a
computed answer is written to both. A team or a fleet of CI runners then pays for each call once.

Endpoint, region and credentials come from the usual AWS variables (AWS_ENDPOINT_URL,
AWS_REGION, AWS_ACCESS_KEY_ID, ...), so MinIO, R2, Ceph or any other S3-compatible store serves.

The client is obstore (the Rust `object_store` crate behind Python bindings): one wheel with no
Python dependencies (boto3 brings botocore and twice the size; s3fs brings aiobotocore and
aiohttp), an asyncio API that fits the engine's event loop, real connect and request timeouts,
and conditional puts (If-None-Match), which is what makes many writers safe. It is actively
maintained by Development Seed on top of the crate Apache Arrow keeps.

Many writers: a put is one PutObject of the whole record (S3 stores an object whole or not at
all), made with mode "create", so the first writer of a key wins and the others find it there;
an entry is never replaced under a reader (except by `--refresh`, which means to replace it).
A record read back is checked against its key (the hash of its request), so a damaged or
foreign object is a miss, never a wrong answer.

A remote that is down, slow or refuses is not the build's problem: the first failure turns the
remote off for the rest of the build with one warning, and the local cache and the model answer.
"""
from __future__ import annotations

import asyncio
import datetime
import json
import os
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

CONNECT_TIMEOUT_S = 3
REQUEST_TIMEOUT_S = 20
RETRY_TIMEOUT_S = 10
MAX_RETRIES = 2
MAX_IN_FLIGHT = 32  # requests to the remote at once: a cold build asks for every key together
ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT")


class RemoteUnavailable(Exception):
    """The remote cannot be used for this build (down, refusing, misconfigured)."""


def parse_url(url: str) -> tuple[str, str]:
    """(bucket, prefix) of `s3://bucket/prefix`; ValueError for anything else."""
    parts = urlsplit(url)
    if parts.scheme not in ("s3", "s3a") or not parts.netloc:
        raise ValueError(f"KBUILD_CACHE_URL must look like s3://bucket/prefix, not {url!r}")
    return parts.netloc, parts.path.strip("/")


class RemoteCache:
    """Records under `prefix/ab/cdef....json` in one bucket, as the local folder lays them out."""

    def __init__(self, url: str) -> None:
        self.url = url
        try:
            self.bucket, self.prefix = parse_url(url)
            self._wrong: str | None = None
        except ValueError as exc:  # said by the first lookup, as a warning: the build goes on
            self.bucket, self.prefix, self._wrong = "", "", str(exc)
        self._store: Any = None
        self._limit: asyncio.Semaphore | None = None

    @staticmethod
    def _path(key: str) -> str:
        return f"{key[:2]}/{key[2:]}.json"  # under the prefix: the store is opened with it

    def _open(self) -> Any:
        if self._wrong is not None:
            raise RemoteUnavailable(self._wrong)
        if self._store is None:
            try:
                from obstore.store import S3Store
            except ImportError:  # an extra: the build goes on with the local cache, as for a remote that is down
                raise RemoteUnavailable("it needs obstore: pip install 'kbuild[s3]'") from None
            endpoint = next((os.environ[v] for v in ENDPOINT_VARIABLES if os.environ.get(v)), "")
            options = {
                "connect_timeout": datetime.timedelta(seconds=CONNECT_TIMEOUT_S),
                "timeout": datetime.timedelta(seconds=REQUEST_TIMEOUT_S),
                # an endpoint named with http:// (MinIO on a laptop, a test server) was chosen so
                "allow_http": endpoint.startswith("http://"),
            }
            retry = {"max_retries": MAX_RETRIES, "retry_timeout": datetime.timedelta(seconds=RETRY_TIMEOUT_S)}
            try:
                self._store = S3Store(self.bucket, prefix=self.prefix or None, client_options=options,
                                      retry_config=retry)
            except Exception as exc:  # bad configuration: say it once, as for a store that is down
                raise RemoteUnavailable(str(exc).splitlines()[0]) from None
        return self._store

    async def _guarded(self, step: Callable[[], Any]) -> Any:
        if self._limit is None:
            self._limit = asyncio.Semaphore(MAX_IN_FLIGHT)
        async with self._limit:
            try:
                # obstore's own timeouts bound each request; this bounds the whole step, retries included
                return await asyncio.wait_for(step(), RETRY_TIMEOUT_S + REQUEST_TIMEOUT_S)
            except RemoteUnavailable:
                raise
            except asyncio.TimeoutError:
                raise RemoteUnavailable("no answer in time") from None
            except Exception as exc:
                raise RemoteUnavailable(_first_line(exc)) from None

    async def get(self, key: str) -> bytes | None:
        """The record stored under `key`, or None when there is none. RemoteUnavailable when the
        remote cannot say."""
        store = self._open()
        import obstore

        async def fetch() -> bytes | None:
            try:
                result = await obstore.get_async(store, self._path(key))
                return bytes(await result.bytes_async())
            except FileNotFoundError:  # obstore's NotFound: no such entry (a put says if the bucket is missing)
                return None

        return await self._guarded(fetch)

    async def put(self, key: str, record: bytes, replace: bool = False) -> None:
        """Store the whole record in one object write. An object already there is kept (another
        writer stored the same key first) unless `replace`."""
        store = self._open()
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        async def write() -> None:
            try:
                await obstore.put_async(store, self._path(key), record, mode="overwrite" if replace else "create")
            except (AlreadyExistsError, PreconditionError):
                pass  # the first writer won; its record answers the same request

        await self._guarded(write)


def record_for(key: str, data: bytes, key_of: Callable[[Any], str]) -> Any | None:
    """The response in a record read from the remote, or None when it is not a record of `key`
    (damaged, truncated, or written for another request)."""
    try:
        record = json.loads(data)
        request, response = record["request"], record["response"]
    except (ValueError, KeyError, TypeError):
        return None
    if response is None or key_of(request) != key:
        return None
    return response


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]
