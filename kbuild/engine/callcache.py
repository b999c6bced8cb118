"""Constructive traces for expensive calls: a result stored under the hash of its request.

A folder of small JSON files (two-level fan-out, like git's objects), written atomically, so it
can be shared by a team or by CI (KBUILD_CACHE_DIR) and copied or pruned with ordinary tools.
With a remote cache (remotecache.py, KBUILD_CACHE_URL) beside it, a local miss asks the remote
and a computed answer is stored in both.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .files import atomic_write
from .hashing import canonical_json, hash_bytes
from .remotecache import RemoteCache, RemoteUnavailable, record_for
from .report import CallDeferred


class CallCache:
    def __init__(self, folder: Path, max_in_flight: int, remote: RemoteCache | None = None) -> None:
        self.folder = folder
        self.limit = asyncio.Semaphore(max_in_flight)
        self.calls = 0
        self.hits = 0  # every answer not computed, the remote's included
        self.deferred = 0  # calls whose compute deferred them to a later build (CallDeferred)
        self.remote = remote
        self.remote_hits = 0
        self.warnings: list[str] = []  # at most one: the remote turned off for this build
        self._in_flight: dict[str, asyncio.Future[Any]] = {}
        self._answered: dict[str, Any] = {}  # this build's answers: no second call for a key
        self._folders: set[str] | None = None  # the fan-out folders there are (see _may_hold)

    @staticmethod
    def key(request: Mapping[str, Any]) -> str:
        return hash_bytes(canonical_json(request).encode())

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key[2:]}.json"

    def _may_hold(self, key: str) -> bool:
        """False when the key's fan-out folder did not exist when this build first looked (one
        listing of the cache folder) and this build has not written there: a miss known without
        a file lookup off the event loop. A cold build with an empty cache then starts its first
        model call at once instead of after every query's lookup has come back. An entry that
        another process adds meanwhile in a folder new to this build is not seen by it: a miss,
        as if it had come a moment later."""
        if self._folders is None:
            try:
                self._folders = {entry.name for entry in os.scandir(self.folder) if len(entry.name) == 2}
            except OSError:
                self._folders = set()
        return key[:2] in self._folders

    def get(self, key: str) -> Any | None:
        path = self._path(key)
        try:
            response = json.loads(path.read_bytes())["response"]
        except (FileNotFoundError, ValueError, KeyError):
            return None  # a missing or damaged entry is a miss, never an error
        with contextlib.suppress(OSError):  # its time of use, for trimming least recently used first
            os.utime(path)
        return response

    def put(self, key: str, request: Mapping[str, Any], response: Any) -> bytes:
        record = canonical_json({"request": request, "response": response}).encode()
        self._write(key, record)
        return record

    def _write(self, key: str, record: bytes) -> None:
        atomic_write(self._path(key), record, durable=False)
        if self._folders is not None:
            self._folders.add(key[:2])

    def _remote_failed(self, exc: RemoteUnavailable) -> None:
        """Turn the remote off for the rest of this build, with one warning."""
        if self.remote is not None:
            self.warnings.append(f"remote call cache {self.remote.url} is not available ({exc}); "
                                 "this build uses the local cache only")
            self.remote = None

    async def _from_remote(self, key: str) -> Any | None:
        remote = self.remote
        if remote is None:
            return None
        try:
            data = await remote.get(key)
        except RemoteUnavailable as exc:
            self._remote_failed(exc)
            return None
        response = None if data is None else record_for(key, data, self.key)
        if response is not None:
            with contextlib.suppress(OSError):  # a local copy is a saving, not a need
                await asyncio.to_thread(self._write, key, data)
        return response

    async def _to_remote(self, key: str, record: bytes, replace: bool) -> None:
        remote = self.remote
        if remote is None:
            return
        try:
            await remote.put(key, record, replace=replace)
        except RemoteUnavailable as exc:
            self._remote_failed(exc)

    async def call(
        self,
        request: Mapping[str, Any],
        compute: Callable[[], Awaitable[Any]],
        refresh: bool = False,
    ) -> Any:
        """The cached response to `request`, computing it at most once even when asked concurrently."""
        key = self.key(request)
        if not refresh and self._may_hold(key):
            # file I/O off the event loop: on slow disks an open costs as much as running a query
            cached = await asyncio.to_thread(self.get, key)
            if cached is not None:
                self.hits += 1
                return cached
        pending = self._in_flight.get(key)
        if pending is not None:
            self.hits += 1
            return await asyncio.shield(pending)
        if key in self._answered and not refresh:  # answered while our cache read was in flight
            self.hits += 1
            return self._answered[key]
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._in_flight[key] = future
        try:
            # inside the in-flight entry: callers asking for the same key wait for this one lookup
            if not refresh and self.remote is not None:
                remote = await self._from_remote(key)
                if remote is not None:
                    self.hits += 1
                    self.remote_hits += 1
                    self._answered[key] = remote
                    future.set_result(remote)
                    return remote
            async with self.limit:
                self.calls += 1
                try:
                    response = await compute()
                except CallDeferred:  # not made: its answer comes to a later build
                    self.calls -= 1
                    self.deferred += 1
                    raise
            # only an answer is stored, never a failure: compute() raising skips both writes
            record = await asyncio.to_thread(self.put, key, request, response)
            await self._to_remote(key, record, replace=refresh)
            self._answered[key] = response
            future.set_result(response)
            return response
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: the caller that computed re-raises it
            raise
        finally:
            del self._in_flight[key]

    async def call_many(
        self,
        requests: Sequence[Mapping[str, Any]],
        compute_many: Callable[[list[Mapping[str, Any]]], Awaitable[list[Any]]],
        refresh: bool = False,
    ) -> list[Any]:
        """The cached response to each of `requests`, the ones no cache holds computed together
        by one `compute_many(missing)` (answers in its order), each stored under its own key.

        For a service that answers many requests in one round trip: a request is never computed
        twice, whichever batch it came in, and a batch is only ever made of requests not yet
        answered. Requests another caller is computing are awaited, not computed again."""
        keys = [self.key(request) for request in requests]
        answers: dict[str, Any] = {}
        waiting: dict[str, asyncio.Future[Any]] = {}
        for key in dict.fromkeys(keys):
            if not refresh and key in self._answered:
                answers[key] = self._answered[key]
            elif key in self._in_flight:
                waiting[key] = self._in_flight[key]
        unknown = [k for k in dict.fromkeys(keys) if k not in answers and k not in waiting]
        mine: dict[str, asyncio.Future[Any]] = {}
        for key in unknown:  # claimed before any await: a concurrent caller waits for these
            mine[key] = self._in_flight[key] = asyncio.get_running_loop().create_future()
        try:
            if not refresh:
                local = await asyncio.to_thread(lambda: {k: self.get(k) for k in mine if self._may_hold(k)})
                for key in list(mine):
                    found = local.get(key)
                    if found is None and self.remote is not None:
                        found = await self._from_remote(key)
                        self.remote_hits += found is not None
                    if found is not None:
                        answers[key] = self._answered[key] = found
                        mine.pop(key).set_result(found)
                        del self._in_flight[key]
            self.hits += len(keys) - len(mine)
            if mine:
                by_key = {k: requests[keys.index(k)] for k in mine}
                async with self.limit:
                    self.calls += 1
                    computed = await compute_many(list(by_key.values()))
                if len(computed) != len(by_key):
                    raise ValueError(f"{len(by_key)} requests were computed into {len(computed)} answers")
                for (key, request), response in zip(by_key.items(), computed):
                    record = await asyncio.to_thread(self.put, key, request, response)
                    await self._to_remote(key, record, replace=refresh)
                    answers[key] = self._answered[key] = response
                    mine[key].set_result(response)
            for key, pending in waiting.items():
                answers[key] = await asyncio.shield(pending)
            return [answers[key] for key in keys]
        except BaseException as exc:
            for future in mine.values():
                if not future.done():
                    future.set_exception(exc)
                    future.exception()  # retrieved: this caller re-raises it
            raise
        finally:
            for key, future in mine.items():
                if self._in_flight.get(key) is future:
                    del self._in_flight[key]


@dataclass(frozen=True)
class Entry:
    path: Path
    size: int
    used: float  # when it was last written or answered a call (its mtime)


def entries(folder: Path) -> list[Entry]:
    """Every entry of a call cache folder, least recently used first."""
    found = []
    for fan in (folder.iterdir() if folder.is_dir() else ()):
        if len(fan.name) != 2 or not fan.is_dir():
            continue
        for file in fan.glob("*.json"):
            with contextlib.suppress(FileNotFoundError):  # another build may be trimming too
                st = file.stat()
                found.append(Entry(file, st.st_size, st.st_mtime))
    return sorted(found, key=lambda e: (e.used, e.path.name))


def trim(folder: Path, max_bytes: int) -> list[Entry]:
    """Remove the least recently used entries until the folder holds at most `max_bytes` of
    them; the removed entries. An entry removed is a call asked again, never a wrong answer."""
    found = entries(folder)
    total = sum(e.size for e in found)
    removed = []
    for entry in found:
        if total <= max_bytes:
            break
        with contextlib.suppress(FileNotFoundError):
            entry.path.unlink()
        total -= entry.size
        removed.append(entry)
    return removed
