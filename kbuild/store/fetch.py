"""Fetching url sources into raw/, before a build, as `git pull` comes before `make`.

A url's content can change with nothing local changing, so it cannot be an ordinary input of
a query. Each build downloads every url source again (size cap, timeout, redirects bounded) and
replaces raw/<source>/original.<ext> and meta.yml only when the bytes differ; from there on the
raw file is an input like any other, and an unchanged download costs no query. A failed download
keeps the copy fetched before, and is reported.

Local path sources are not fetched here: a rule copies them, so the lock records their hashes.
"""
from __future__ import annotations

import datetime
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlparse

from ..text.secrets import without_userinfo
from ..convert import refusal
from ..engine.files import atomic_write
from ..engine.hashing import hash_bytes
from .layout import Store
from .sources import Source, SourcesError, parse, resolve_path

MAX_BYTES = 100 * 1024 * 1024  # the same limit the converter applies to any source
TIMEOUT_S = 30.0  # for the whole download, not for each read: a trickling server is cut off too
STALL_S = 10.0  # the longest one read may wait, so the deadline is checked at least this often
BLOCK = 1 << 16
MAX_REDIRECTS = 5


class FetchError(Exception):
    pass


class _Redirects(urllib.request.HTTPRedirectHandler):
    max_redirections = MAX_REDIRECTS
    max_repeats = 2

    def http_error_302(self, req, fp, code, msg, headers):  # type: ignore[no-untyped-def]
        location = headers.get("location") or headers.get("uri")
        target = urljoin(req.full_url, location or "")
        if urlparse(target).scheme not in ("http", "https"):  # urllib itself would follow ftp://
            raise FetchError(f"redirects to {target}; only http and https redirects are followed")
        return super().http_error_302(req, fp, code, msg, headers)

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


def download(url: str, root: Path, max_bytes: int = MAX_BYTES, timeout: float = TIMEOUT_S) -> bytes:
    parts = urlparse(url)
    if parts.scheme == "file":
        try:
            path = resolve_path(root, unquote(parts.path))  # refuses pipes and files over the limit
        except SourcesError as exc:
            raise FetchError(str(exc)) from None
        try:
            if path.stat().st_size > max_bytes:
                raise FetchError(f"is larger than the {max_bytes // 2**20} MiB limit")
            return path.read_bytes()
        except OSError as exc:
            raise FetchError(f"cannot read {path}: {exc.strerror}") from None
    if parts.scheme not in ("http", "https"):
        raise FetchError(f"url scheme {parts.scheme!r} is not supported; use http, https or file")
    opener = urllib.request.build_opener(_Redirects())
    request = urllib.request.Request(url, headers={"User-Agent": "kbuild"})
    deadline = time.monotonic() + timeout
    try:
        with opener.open(request, timeout=min(timeout, STALL_S)) as response:
            announced = _content_length(response.headers.get("Content-Length"))
            if announced is not None and announced > max_bytes:
                raise FetchError(f"is larger than the {max_bytes // 2**20} MiB limit ({announced} bytes announced)")
            data = _read_by(response, deadline, timeout, max_bytes)
    except urllib.error.HTTPError as exc:
        if exc.code in (301, 302, 303, 307, 308):
            raise FetchError(f"redirects more than {MAX_REDIRECTS} times (a redirect loop?)") from None
        raise FetchError(f"the server answered {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise FetchError(f"cannot be reached ({exc.reason})") from None
    except TimeoutError:
        raise FetchError(f"stalled: no data for {min(timeout, STALL_S):.0f} s") from None
    except (OSError, ValueError) as exc:  # ValueError: http.client's InvalidURL, a bad header
        raise FetchError(f"failed: {exc}") from None
    if len(data) > max_bytes:
        raise FetchError(f"is larger than the {max_bytes // 2**20} MiB limit")
    if announced is not None and len(data) < announced:
        raise FetchError(f"was cut short: {len(data)} of the {announced} bytes the server announced; try again")
    return data


def _content_length(value: str | None) -> int | None:
    return int(value) if value is not None and value.strip().isdigit() else None


def _read_by(response: Any, deadline: float, timeout: float, max_bytes: int) -> bytes:
    """The body, a block at a time (read1: one receive each, never waiting to fill a block), until
    the end, the size limit, or the deadline of the whole download."""
    blocks: list[bytes] = []
    size = 0
    # urllib gives one timeout to every read; the socket underneath (http.client's, through its
    # SocketIO) takes a new one before each read, so a silent server holds a read only until the
    # deadline of the whole download, not STALL_S past it
    sock = getattr(getattr(getattr(response, "fp", None), "raw", None), "_sock", None)
    while size <= max_bytes:
        left = deadline - time.monotonic()
        if left <= 0:
            raise FetchError(f"did not finish within {timeout:.0f} s (a server sending too slowly?)")
        if sock is not None:
            sock.settimeout(min(left, STALL_S))
        try:
            block = response.read1(BLOCK)
        except TimeoutError:
            if time.monotonic() >= deadline:
                raise FetchError(f"did not finish within {timeout:.0f} s (a server sending too slowly?)") from None
            raise
        if not block:
            break
        blocks.append(block)
        size += len(block)
    return b"".join(blocks)


def meta_yml(source: Source, digest: str, size: int) -> str:
    """Where raw/ got the source. A url's copy says the day it was downloaded, written only when
    the bytes changed (fetch_urls, outside the graph); a path's copy is made by a rule, whose
    pages are a function of its inputs, so it says no day: the day would change the page each
    time the rule ran again (a fresh clone's first build) with nothing changed."""
    origin = f"path: {source.path}" if source.path else f"url: {source.url}"
    fetched = "" if source.path else f"fetched: {datetime.date.today().isoformat()}\n"
    return (
        "# generated by kbuild: where raw/ got this source\n"
        f"{origin}\n"
        f"{fetched}"
        f"hash: xxh3-128:{digest}\n"
        f"bytes: {size}\n"
    )


def fetch_urls(root: Path, store: Store) -> dict[tuple[str, str], tuple[str, str]]:
    """Download every url source of every project; return (url, what went wrong) by (project, source)."""
    problems: dict[tuple[str, str], tuple[str, str]] = {}
    for sources_file in sorted((root / store.root).glob("*/sources.yml")):
        project = sources_file.parent.name
        try:
            listing = parse(sources_file.read_bytes(), str(sources_file.relative_to(root)))
        except SourcesError:
            continue  # the build reports it, with the rest of the project's problems
        for source in listing.sources:
            if source.url is None:
                continue
            try:
                data = download(source.url, root)
            except FetchError as exc:
                problems[project, source.id] = (without_userinfo(source.url), without_userinfo(str(exc)))
                continue
            original = root / store.original(project, source.id, source.ext)
            refused = refusal(data, original.name)
            if refused is not None:  # no copy of what no page is built from; an earlier one stays
                problems[project, source.id] = (without_userinfo(source.url), refused)
                continue
            digest = hash_bytes(data)
            if original.exists() and hash_bytes(original.read_bytes()) == digest:
                continue
            try:
                atomic_write(original, data)
                atomic_write(root / store.meta(project, source.id), meta_yml(source, digest, len(data)).encode())
            except OSError as exc:  # a full disk: this source keeps its last copy, and says so
                problems[project, source.id] = (without_userinfo(source.url), f"could not be saved ({exc.strerror or exc})")
    return problems
