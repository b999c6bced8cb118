"""A three-way merge of two locks, entry by entry: what `kbuild merge-lock` (git's merge driver
for the lock) does.

A lock entry is the memo of one query. Each side of a merge rebuilt some queries; the merged lock
is the union of what each side rebuilt: an entry one side changed (or added, or removed) and the
other left as the common ancestor had it is taken from the side that changed it. An entry both
sides changed, differently, is taken from either side (ours) with its fingerprint replaced by one
no rule ever has, so the next build runs that query whatever its reads say; an entry one side
removed and the other changed is kept, marked the same way (the next build forgets it if nothing
reads it any more, and removes its files). The entries are compared as bytes: this code renders
the same memo to the same bytes.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .lockfile import FOOTER, HEADER, JOIN, lock_entries

# A fingerprint is a hex digest; this one matches no rule, so the query runs again.
STALE_FINGERPRINT = "stale: both branches of a merge changed this entry"
_FINGERPRINT_LINE = re.compile(rb'\n   "fingerprint": "(?:[^"\\]|\\.)*",\n')


class NotALock(ValueError):
    """One of the three files is not a lock this code wrote (a conflicted or hand-edited lock)."""


@dataclass
class MergedLock:
    data: bytes
    from_ours: list[str] = field(default_factory=list)  # changed on our side only
    from_theirs: list[str] = field(default_factory=list)  # changed on their side only
    stale: list[str] = field(default_factory=list)  # changed on both sides: marked to run again


def mark_stale(entry: bytes) -> bytes:
    """The entry with a fingerprint no rule has."""
    marked, count = _FINGERPRINT_LINE.subn(b'\n   "fingerprint": "' + STALE_FINGERPRINT.encode() + b'",\n', entry,
                                           count=1)
    if count != 1:
        raise NotALock("an entry has no fingerprint line")
    return marked


def _entries(data: bytes, which: str, missing_ok: bool = False) -> dict[str, bytes]:
    if missing_ok and not data.strip():
        return {}  # git gives an empty ancestor when both sides added the lock
    found = lock_entries(data)
    if found is None:
        raise NotALock(f"{which} is not a kbuild lock this version wrote (conflict markers, or edited by hand?)")
    return found


def merge_locks(base: bytes, ours: bytes, theirs: bytes) -> MergedLock:
    """The three-way merge of the lock's entries; NotALock when a side cannot be read."""
    o = _entries(base, "the common ancestor's lock", missing_ok=True)
    a = _entries(ours, "our lock")
    b = _entries(theirs, "their lock")
    merged: dict[str, bytes] = {}
    result = MergedLock(b"")
    for qid in sorted(o.keys() | a.keys() | b.keys()):
        was, mine, other = o.get(qid), a.get(qid), b.get(qid)
        if mine == other:
            chosen = mine  # the same on both sides (or removed on both)
        elif mine == was:
            chosen = other  # only they changed it
            result.from_theirs.append(qid)
        elif other == was:
            chosen = mine  # only we changed it
            result.from_ours.append(qid)
        else:  # both changed it, or one removed what the other changed: either side, run again
            side = mine if mine is not None else other
            assert side is not None
            chosen = mark_stale(side)
            result.stale.append(qid)
        if chosen is not None:
            merged[qid] = chosen
    result.data = _render(merged)
    return result


def _render(entries: dict[str, bytes]) -> bytes:
    return HEADER.encode() + JOIN.encode().join(entries[q] for q in sorted(entries)) + FOOTER.encode()
