"""Verifying traces: does each read a memo recorded still hold?

A memo is reused when its rule is the one that built it, its outputs are the files it wrote, and
every read it recorded still has the hash it recorded. This module is the one place that answers
that question and says why not, as a `Reason` its callers look at by kind and subject (a build's
report, a dry run, `kbuild status`, `kbuild check`, `kbuild explain`), never by parsing its words.
"""
from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

from .rule import Rule
from .sourcetexts import SourceTexts
from .hashing import ABSENT, FAILED
from .lockmerge import STALE_FINGERPRINT
from .state import FileRead, Memo, PartHash


class Change(enum.Enum):
    """Why a query cannot be reused as recorded."""

    NEVER_BUILT = "never built"
    RULE_GONE = "rule gone"
    RULE_CHANGED = "rule changed"
    MERGED = "changed on both sides of a merge"  # the lock merge marked it to run again (engine.lockmerge)
    OUTPUT_EDITED = "output edited"
    INPUT_CHANGED = "input changed"
    DEPENDENCY_CHANGED = "dependency changed"
    DEPENDENCY_OUT_OF_DATE = "dependency out of date"  # a dry run: it would run, with a result not known yet
    CYCLE = "cycle"  # the recorded reads go round
    BUILT_ON_STALE = "built on a stale query"  # `kbuild status`: not itself changed, but above a change
    VALUE_NOT_STORED = "value not stored"  # settled from the lock, but its value is needed here


# Who reads the sentence: a build's report, a dry run (`--dry-run`, `explain`), or `status`/`check`,
# whose reader sees no build log and so is told what was read.
Voice = Literal["build", "dry run", "status"]

_SENTENCES: dict[Change, str] = {
    Change.NEVER_BUILT: "new",
    Change.RULE_GONE: "rule {} is not defined any more",
    Change.RULE_CHANGED: "rule {} changed",
    Change.MERGED: "both branches of a merge changed it",
    Change.OUTPUT_EDITED: "output {} is missing or was edited",
    Change.INPUT_CHANGED: "{} changed",
    Change.DEPENDENCY_CHANGED: "{} changed",
    Change.DEPENDENCY_OUT_OF_DATE: "{} is out of date",
    Change.CYCLE: "{} is part of a cycle",
    Change.BUILT_ON_STALE: "it is built on {}, which is out of date",
    Change.VALUE_NOT_STORED: "its value is not stored locally",
}
_VOICED: dict[tuple[Voice, Change], str] = {
    ("dry run", Change.INPUT_CHANGED): "input {} changed",
    ("status", Change.INPUT_CHANGED): "its input {} changed",
    ("status", Change.DEPENDENCY_CHANGED): "it read {}, which has changed since",
}


@dataclass(frozen=True)
class Reason:
    """Why a query must run: what kind of change, what changed (a path, a query id, a rule), and
    the sentence a person is shown."""

    kind: Change
    subject: str
    sentence: str

    @classmethod
    def of(cls, kind: Change, subject: str = "", voice: Voice = "build") -> Reason:
        template = _VOICED.get((voice, kind)) or _SENTENCES[kind]
        return cls(kind, subject, template.format(subject))

    def __str__(self) -> str:
        return self.sentence


def outside_reads(memo: Memo | None, rules: Mapping[str, Rule], sources: SourceTexts,
                  file_hash: Callable[[str], str]) -> Reason | None:
    """What settles a memo before any of its reads: there is none, its rule changed or went, or
    an output it wrote is missing or edited. `sources` gives the rule's code for its fingerprint."""
    if memo is None:
        return Reason.of(Change.NEVER_BUILT)
    r = rules.get(memo.rule)
    if r is None:
        return Reason.of(Change.RULE_GONE, memo.rule)
    if memo.fingerprint == STALE_FINGERPRINT:
        return Reason.of(Change.MERGED, memo.rule)
    if r.fingerprint_with(sources) != memo.fingerprint:
        return Reason.of(Change.RULE_CHANGED, memo.rule)
    for path, digest in memo.outputs.items():
        if file_hash(path) != digest:
            return Reason.of(Change.OUTPUT_EDITED, path)
    return None


PartsOf = Callable[[str], Mapping[str, str] | None]  # the part hashes of a query's current value


def read_changed(dep: str, recorded: str, now: str | None, voice: Voice = "build",
                 parts: Mapping[str, str] | None = None) -> Reason | None:
    """Whether one recorded read still holds: `now` is the hash it has now (None: none at all).
    A read of one part of a query's value (a PartHash) holds while that part's hash does,
    whatever became of the rest: `parts` are the query's part hashes now."""
    if now == recorded:
        return None
    digest, mark, part = ("", "", "") if isinstance(dep, FileRead) else recorded.partition(PartHash.MARK)
    if mark and parts is not None and now is not None and now != FAILED and parts.get(part, ABSENT) == digest:
        return None  # the part's hash as recorded: compared without spelling a PartHash per read
    if isinstance(dep, FileRead):
        return Reason.of(Change.INPUT_CHANGED, dep.path, voice)
    return Reason.of(Change.DEPENDENCY_CHANGED, dep, voice)


UNSETTLED = "unsettled"  # a query read's hash is not known yet: the walk stops at it, to go on once it is


# NamedTuples, not dataclasses: a dataclass costs half a millisecond to make, at an import a no-op pays
class ValuesNow(NamedTuple):
    """What a recorded read's hash is now: the one thing the walk's callers differ in. A build
    brings each query read up to date first (demand); the settle pass and a dry run settle it
    without running anything (scan); `status` and `check` take the hash its memo records
    (staleness); a pulled lock's entries are held against the incoming ones (snapshot)."""

    file_hash: Callable[[str], str] | None  # None: file reads are not this walk's, they are checked apart
    # A query read's hash now; None when it has none; UNSETTLED when it is not known yet; a
    # Reason when it cannot be compared (out of date in a dry run, a cycle).
    query_hash: Callable[[str], str | Reason | None]
    parts_of: PartsOf | None = None  # for a read of one part, the query's part hashes now
    voice: Voice = "build"


Place = tuple[int, int]  # (group, read) in a memo's reads


class Walked(NamedTuple):
    """The walk's verdict on a query's recorded reads: the first that no longer holds (None: each
    read walked holds), and the query read it stopped at because its hash is not known yet."""

    changed: Reason | None = None
    waits_for: str | None = None
    at: Place = (0, 0)  # where `waits_for` is read: the walk goes on from there once it is settled


HOLDS = Walked()


def walk_reads(groups: Sequence[Sequence[tuple[str, str]]], now: ValuesNow, start: Place = (0, 0), *,
               to_the_end: bool = False, changed: Reason | None = None) -> Walked:
    """The verifier's walk (salsa's maybe_changed_after, over hashes): the recorded reads from
    `start`, in the order they were made, each held against its hash `now`, up to the first that
    no longer holds. `to_the_end` goes on past it and stops only at a query read not settled yet,
    so that the settle pass settles every read of a query that must run (a stat here, a task each
    later); `changed` is what the walk found before `start`."""
    file_hash, query_hash, parts_of, voice = now
    first_group, first_read = start
    for g in range(first_group, len(groups)):
        group = groups[g]
        # indexed, not iterated: a walk the settle pass resumes at a read of a group of thousands
        for i in range(first_read if g == first_group else 0, len(group)):
            dep, recorded = group[i]
            if isinstance(dep, FileRead):
                if file_hash is None or changed is not None:
                    continue  # past a change, a file read settles nothing
                current = file_hash(dep.path)
                if current == recorded:
                    continue
                changed = read_changed(dep, recorded, current, voice)
            else:
                current = query_hash(dep)
                if current == recorded:  # a whole read that holds, most reads: no part to look for
                    continue
                if current == UNSETTLED:
                    return Walked(changed, dep, (g, i))
                if changed is not None:
                    continue
                if isinstance(current, Reason):
                    changed = current
                else:
                    parts = parts_of(dep) if parts_of is not None and PartHash.MARK in recorded else None
                    changed = read_changed(dep, recorded, current, voice, parts)
                    if changed is None:
                        continue
            if not to_the_end:
                return Walked(changed)
    return HOLDS if changed is None else Walked(changed)
