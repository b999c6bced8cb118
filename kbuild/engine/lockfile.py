"""The committed lock: the dependency graph without values, so a fresh clone can see staleness.

Deterministic and diff-friendly: queries sorted by id, one dependency per line, so a rebuilt
page shows in `git diff` as the lines of the hashes that changed.
"""
from __future__ import annotations

import json
import mmap
from json.encoder import encode_basestring_ascii  # type: ignore[attr-defined]
from collections.abc import Mapping
from typing import Any
from pathlib import Path

from .state import Memo, typed_reads

Buffer = bytes | mmap.mmap  # a lock's bytes: read, or mapped into memory (find and slices, no copy)

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


def patch_lock_pieces(old: Buffer, memos: Mapping[str, Memo], changed: set[str]) -> list[bytes | memoryview] | None:
    """The lock of `memos`, made from the `old` lock (which this code wrote, so it is sorted) by
    rendering only the `changed` queries again; None when `old` is not a lock this code wrote.
    As the pieces to write one after the other: the entries kept are views of `old` (bytes, or
    the old lock mapped into memory), never copied. Each changed query is
    found by a binary search over the bytes, and the entries between are kept as they are: a
    build that ran a few queries of a large graph neither parses nor renders the rest, nor
    copies it (the lock of 5,000 facts is 25 MB)."""
    entries = _entries_in(old)
    if entries is None:
        return None
    try:
        parts: list[bytes | memoryview] = []
        kept_from = entries.start  # where the old entries not yet copied start
        for qid in sorted(changed):
            at = entries.lower_bound(qid, kept_from)
            parts.append(entries.span(kept_from, at))
            if qid in memos:
                parts.append(render_entry(qid, memos[qid]).encode())
            kept_from = entries.next_start(at + 1) if at < entries.end and entries.id_at(at) == qid else at
        parts.append(entries.span(kept_from, entries.end))
    except ValueError:
        return None
    out: list[bytes | memoryview] = [HEADER.encode()]
    for n, part in enumerate(p for p in parts if p):
        out += [JOIN.encode(), part] if n else [part]
    out.append(FOOTER.encode())
    return out


class _Entries:
    """A lock's entries, read where they are needed: `body[start:end]` (all of it by default)
    holds them, and an entry starts at `start` or after JOIN + ENTRY."""

    def __init__(self, body: Buffer, start: int = 0, end: int | None = None) -> None:
        self.body, self.start, self.end = body, start, len(body) if end is None else end
        self.separator = (JOIN + ENTRY).encode()
        self.id_end = ID_END.encode()

    def next_start(self, pos: int) -> int:
        """The first entry start at or after `pos`, or the end of the entries."""
        if pos <= self.start:
            return self.start
        found = self.body.find(self.separator, max(self.start, pos - len(JOIN)), self.end)
        return self.end if found < 0 else found + len(JOIN)

    def id_at(self, start: int) -> str:
        # An id ends at the first quote followed by `: {` and a newline: JSON escapes both
        # quotes and newlines inside it.
        end = self.body.find(self.id_end, start)
        if end < 0:
            raise ValueError("an entry without its id")
        return json.loads(self.body[start + len(ENTRY) - 1:end + 1])

    def lower_bound(self, qid: str, lo: int) -> int:
        """The start of the first entry at or after `lo` (an entry start) whose id is not less
        than `qid`, or the end of the entries."""
        hi = self.end
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
        if end - start >= len(JOIN) and self.body[end - len(JOIN):end] == JOIN.encode():
            end -= len(JOIN)
        return memoryview(self.body)[start:max(start, end)]

    def entry_at(self, start: int) -> tuple[str, int]:
        """The id of the entry at `start` and where the entry after it starts (or the end)."""
        return self.id_at(start), self.next_start(start + 1)


def _entries_in(data: Buffer) -> _Entries | None:
    """The entries of a lock this code wrote, between its header and footer (not copied);
    None for another file. Compared by slices, which bytes and a memory map both have."""
    header, footer, entry = HEADER.encode(), FOOTER.encode(), ENTRY.encode()
    if len(data) < len(header) + len(footer) or data[:len(header)] != header or data[-len(footer):] != footer:
        return None
    start, end = len(header), len(data) - len(footer)
    return _Entries(data, start, end) if start == end or data[start:start + len(entry)] == entry else None


def entries_that_differ(old: bytes, new: bytes) -> tuple[dict[str, bytes], set[str]] | None:
    """What `new` changed of `old`, two locks this code wrote: the entries of `new` that `old`
    does not hold as they are (their bytes, by id), and the ids of `old` that `new` does not
    hold. Both are sorted by id, so they are walked side by side a stretch at a time: a stretch
    of `new` that `old` holds byte for byte where the walk stands in it is passed with one
    comparison, and only where they differ are entries looked at one by one: 7.5 ms for the 20
    that differ in 35,000, against 0.33 s to split both locks into their entries and compare
    them (python benchmarks/lock_difference.py).
    None when either is not such a lock, or `new`'s ids are not in order (`old` is the one this
    state wrote)."""
    was, now = _entries_in(old), _entries_in(new)
    if was is None or now is None:
        return None
    view = memoryview(now.body)
    differ: dict[str, bytes] = {}
    removed: set[str] = set()
    i, j = now.start, was.start  # where the walk stands: an entry start (or the end) of `new`, of `old`
    stretch, last = 1 << 16, ""  # `last`: the greatest id of `new` passed so far
    try:
        while i < now.end:
            if j < was.end:
                end = now.next_start(i + stretch)
                size = end - i
                if end < now.end:  # entries and the JOIN after them: an entry of `old` must follow
                    held_to, goes_on = j + size, was.body.startswith(ENTRY.encode(), j + size)
                else:  # the last entries: `old` ends there too, or goes on after a JOIN
                    held_to = j + size + (len(JOIN) if j + size < was.end else 0)
                    goes_on = j + size == was.end or was.body.startswith(now.separator, j + size)
                if goes_on and was.body.startswith(view[i:end], j):
                    first = now.id_at(i)  # held as it was: in order inside, since `old` is
                    if first <= last:
                        return None
                    inner = now.body.rfind(now.separator, i, end - len(JOIN))
                    last = now.id_at(inner + len(JOIN)) if inner >= 0 else first
                    i, j, stretch = end, held_to, min(stretch * 2, 1 << 22)
                    continue
                if end > now.next_start(i + 1):  # more than one entry: look closer
                    stretch = max(stretch // 8, 1)
                    continue
            qid, after = now.entry_at(i)
            if qid <= last:
                return None
            held, held_after = was.entry_at(j) if j < was.end else (None, j)
            if held is not None and held < qid:  # gone from `new`
                removed.add(held)
                j = held_after
                continue
            entry = bytes(now.span(i, after))
            if held == qid:
                if bytes(was.span(j, held_after)) != entry:
                    differ[qid] = entry
                j = held_after
            else:
                differ[qid] = entry
            i, last, stretch = after, qid, 1 << 16
        while j < was.end:
            held, j = was.entry_at(j)
            removed.add(held)
    except ValueError:
        return None
    return differ, removed


def entries_of_ids(data: bytes, ids: list[str]) -> dict[str, bytes] | None:
    """The entries of those of `ids` that a lock this code wrote holds, each found by a binary
    search over its bytes; None when `data` is not such a lock."""
    entries, found = _entries_in(data), {}
    if entries is None:
        return None
    lo = entries.start
    try:
        for qid in sorted(ids):
            at = entries.lower_bound(qid, lo)
            if at < entries.end and entries.id_at(at) == qid:
                found[qid] = bytes(entries.span(at, entries.next_start(at + 1)))
            lo = at
    except ValueError:
        return None
    return found


CONFLICT_MARKERS = (b"<<<<<<< ", b"=======", b">>>>>>> ")


def lock_entries(data: bytes) -> dict[str, bytes] | None:
    """The entries of a lock this code wrote, each as its bytes (its id line included), by id;
    None when `data` is not such a lock. Nothing is parsed but the ids: only the entries that
    are wanted need parsing (parse_entry). Every entry is copied out: to compare two locks,
    entries_that_differ; to find a few, entries_of_ids."""
    entries = _entries_in(data)
    if entries is None:
        return None
    if entries.start == entries.end:
        return {}
    body = data[entries.start:entries.end]
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
            raise LockError(f"{path} has merge conflict markers (line {conflict}); "
                            f"{conflict_remedy(_shown_lock(path))}") from None
        raise LockError(f"{path} is not a valid kbuild lock ({exc}); if a merge left it so, "
                        f"{conflict_remedy(_shown_lock(path))}") from None


# What to do with a lock a merge left conflicted, in every message that finds one: each way is
# followed as written in tests/test_advice.py. Taking one side leaves the pages the other side
# rebuilt differing from the lock, which only a forced build writes again (a plain one refuses).
def take_a_side(lock: str = "kbuild.lock") -> str:
    return (f"take one side (`git checkout --theirs -- {lock}`, or a commit's) and run `kbuild build --force`, "
            "which writes again the pages of the other side and keeps their text in .kbuild/overwritten/")


def conflict_remedy(lock: str = "kbuild.lock") -> str:
    return (f"run `kbuild merge-lock` (it merges the two sides git kept, entry by entry), then `kbuild`; "
            f"or {take_a_side(lock)}")


def _shown_lock(path: Path) -> str:
    """A lock file as a command in its repository names it: kbuild.lock, or kbuild.lock.d/NAME."""
    return f"{path.parent.name}/{path.name}" if path.parent.name.endswith(".lock.d") else path.name


def _conflict_line(data: bytes) -> int | None:
    """The number of the first line git's merge left a conflict marker on, if any."""
    for number, line in enumerate(data.splitlines(), start=1):
        if line.startswith(CONFLICT_MARKERS):
            return number
    return None
