"""The committed lock: the dependency graph without values, so a fresh clone can see staleness.

Deterministic and diff-friendly: queries sorted by id, one dependency per line, so a rebuilt
page shows in `git diff` as the lines of the hashes that changed.
"""
from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii  # type: ignore[attr-defined]
from collections.abc import Mapping
from typing import Any
from pathlib import Path

from .state import Memo, typed_reads

LOCK_VERSION = 1


class LockError(ValueError):
    pass


HEADER = f'{{\n "version": {LOCK_VERSION},\n "queries": {{\n'
FOOTER = "\n }\n}\n"
# An entry starts with a query id at two spaces of indent; every other line of an entry is
# indented further and JSON escapes newlines inside strings, so JOIN + ENTRY occurs only between
# entries.
ENTRY = '  "'
JOIN = ",\n"
ID_END = '": {\n'
_SORTED = json.JSONEncoder(sort_keys=True)  # json.dumps(x, sort_keys=True), without a new encoder each call


def render_entry(qid: str, m: Memo) -> str:
    # Strings go straight to json's C escaper, as json.dumps would send them (the same bytes):
    # a json.dumps call per read was most of writing a whole lock: 0.63-0.82 s for 35,000
    # entries, 0.33-0.42 s now (python benchmarks/lock_render.py --against an older install).
    dumps, string, mapping = json.dumps, encode_basestring_ascii, _SORTED.encode
    groups = []
    for group in m.deps:
        items = ", ".join(f"[{string(d)}, {string(h)}]" for d, h in group)
        groups.append(f"    [{items}]")
    deps = "[\n" + ",\n".join(groups) + "\n   ]" if groups else "[]"
    outputs = mapping(m.outputs) if m.outputs else "{}"
    return (
        f"  {string(qid)}: {{\n"
        f'   "rule": {string(m.rule)},\n'
        f'   "key": {dumps(m.key)},\n'
        f'   "fingerprint": {string(m.fingerprint)},\n'
        f'   "hash": {string(m.hash)},\n'
        f'   "outputs": {outputs},\n'
        + (f'   "notes": {mapping(m.notes)},\n' if m.notes else "")
        + (f'   "parts": {mapping(m.parts)},\n' if m.parts else "")
        + f'   "deps": {deps}\n'
        "  }"
    )


def render_lock(memos: Mapping[str, Memo]) -> bytes:
    return (HEADER + JOIN.join(render_entry(qid, memos[qid]) for qid in sorted(memos)) + FOOTER).encode()


def patch_lock(old: bytes, memos: Mapping[str, Memo], changed: set[str]) -> bytes | None:
    """The lock of `memos`, made from the `old` lock (which this code wrote, so it is sorted) by
    rendering only the `changed` queries again. Each is found by a binary search over the bytes,
    and the entries between are copied as they are: a build that ran a few queries of a large
    graph neither parses nor renders the rest. None when `old` is not a lock this code wrote."""
    header, footer = HEADER.encode(), FOOTER.encode()
    if not (old.startswith(header) and old.endswith(footer)):
        return None
    body = old[len(header):-len(footer)]
    if body and not body.startswith(ENTRY.encode()):
        return None
    try:
        entries = _Entries(body)
        parts: list[bytes | memoryview] = []
        kept_from = 0  # where the old entries not yet copied start
        for qid in sorted(changed):
            at = entries.lower_bound(qid, kept_from)
            parts.append(entries.span(kept_from, at))
            if qid in memos:
                parts.append(render_entry(qid, memos[qid]).encode())
            kept_from = entries.next_start(at + 1) if at < len(body) and entries.id_at(at) == qid else at
        parts.append(entries.span(kept_from, len(body)))
    except ValueError:
        return None
    out: list[bytes | memoryview] = [header]
    for n, part in enumerate(p for p in parts if p):
        out += [JOIN.encode(), part] if n else [part]
    out.append(footer)
    return b"".join(out)  # the one copy of the kept bytes


class _Entries:
    """A lock's entries, read where they are needed: an entry starts at 0 or after JOIN + ENTRY."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.separator = (JOIN + ENTRY).encode()
        self.id_end = ID_END.encode()

    def next_start(self, pos: int) -> int:
        """The first entry start at or after `pos`, or the end of the body."""
        if pos <= 0:
            return 0
        found = self.body.find(self.separator, max(0, pos - len(JOIN)))
        return len(self.body) if found < 0 else found + len(JOIN)

    def id_at(self, start: int) -> str:
        # An id ends at the first quote followed by `: {` and a newline: JSON escapes both
        # quotes and newlines inside it.
        end = self.body.index(self.id_end, start)
        return json.loads(self.body[start + len(ENTRY) - 1:end + 1])

    def lower_bound(self, qid: str, lo: int) -> int:
        """The start of the first entry at or after `lo` (an entry start) whose id is not less
        than `qid`, or the end of the body."""
        hi = len(self.body)
        while hi - lo > 4096:  # narrow by bisecting bytes, then walk the few entries left
            mid = self.next_start((lo + hi) // 2)
            if mid >= hi:
                break
            if self.id_at(mid) < qid:
                lo = mid
            else:
                hi = mid
        while lo < hi and self.id_at(lo) < qid:
            lo = self.next_start(lo + 1)
        return lo

    def span(self, start: int, end: int) -> memoryview:
        """The entries from `start` up to `end` (entry starts), without the JOIN that follows."""
        if self.body.endswith(JOIN.encode(), start, end):
            end -= len(JOIN)
        return memoryview(self.body)[start:max(start, end)]


CONFLICT_MARKERS = (b"<<<<<<< ", b"=======", b">>>>>>> ")


def lock_entries(data: bytes) -> dict[str, bytes] | None:
    """The entries of a lock this code wrote, each as its bytes (its id line included), by id;
    None when `data` is not such a lock. Nothing is parsed but the ids: two locks are compared
    entry by entry as bytes, and only the entries that differ need parsing (parse_entry)."""
    header, footer = HEADER.encode(), FOOTER.encode()
    if not (data.startswith(header) and data.endswith(footer)) or len(data) < len(header) + len(footer):
        return None
    body = data[len(header):len(data) - len(footer)]
    if not body:
        return {}
    if not body.startswith(ENTRY.encode()):
        return None
    found: dict[str, bytes] = {}
    id_end = ID_END.encode()
    try:
        for part in body.split((JOIN + ENTRY).encode()):
            entry = part if part.startswith(ENTRY.encode()) else ENTRY.encode() + part
            qid = json.loads(entry[len(ENTRY) - 1:entry.index(id_end) + 1])
            if not isinstance(qid, str) or qid in found:
                return None
            found[qid] = entry
    except ValueError:
        return None
    return found


def parse_entry(entry: bytes) -> Memo:
    """The memo of one entry of lock_entries (ValueError, KeyError or TypeError when it is none)."""
    parsed = json.loads(b"{" + entry + b"}")
    if len(parsed) != 1:
        raise ValueError("not one entry")
    ((qid, e),) = parsed.items()
    typed_reads([e["deps"]])
    return memo_of(qid, e)


def memo_of(qid: str, e: Mapping[str, Any]) -> Memo:
    """The memo of one lock entry, its reads already typed."""
    return Memo(qid, e["rule"], e["key"], e["fingerprint"], e["deps"], e["hash"], e["outputs"], e.get("notes", {}),
                e.get("parts", {}))


def read_lock(path: Path) -> dict[str, Memo]:
    data = path.read_bytes()
    try:
        doc = json.loads(data)
        if doc.get("version") != LOCK_VERSION:
            raise LockError(f"{path} has lock version {doc.get('version')!r}; this kbuild reads {LOCK_VERSION}")
        queries = doc["queries"]
        typed_reads([e["deps"] for e in queries.values()])
        return {
            qid: memo_of(qid, e) for qid, e in queries.items()
        }
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        if isinstance(exc, LockError):
            raise
        conflict = _conflict_line(data)
        if conflict is not None:
            raise LockError(f"{path} has merge conflict markers (line {conflict}); take either side "
                            "(git checkout --ours or --theirs -- kbuild.lock) and run `kbuild` to bring it up to date"
                            ) from None
        raise LockError(
            f"{path} is not a valid kbuild lock ({exc}); if a merge conflict left it broken, "
            "take either side and run `kbuild` to bring it up to date"
        ) from None


def _conflict_line(data: bytes) -> int | None:
    """The number of the first line git's merge left a conflict marker on, if any."""
    for number, line in enumerate(data.splitlines(), start=1):
        if line.startswith(CONFLICT_MARKERS):
            return number
    return None
