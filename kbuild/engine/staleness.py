"""Staleness for `kbuild status` and `kbuild check`: every recorded query that a build would
have to check again, from one reading of the lock and the files."""
from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

from .buildstate import BuildState
from .graphload import GraphLoading, long_lived
from .state import FileRead, Memo
from .verify import Change, Reason, ValuesNow, outside_reads, walk_reads


@dataclass
class Inspection:
    memos: dict[str, Memo]
    stale: dict[str, tuple[Reason, str]]  # query id -> (why, the query whose own change it comes from)
    refused: dict[str, str] = field(default_factory=dict)  # lock entries not taken in, and why
    contents: dict[str, tuple[bytes, str]] = field(default_factory=dict)  # outputs read whole, and their hashes
    lock_misplaced: bool = False  # entries lie in lock files the engine's layout does not put them in


def inspect(graph: GraphLoading, read_outputs: Callable[[str], bool] | None = None) -> Inspection:
    """Each query whose own inputs, rule or outputs changed, with why, and each query built on
    one of them, directly or not, with the nearest such query it reads. Unlike a dry run, it does
    not stop at a query's first changed read: this is the set a reviewer is shown, every output
    that depends on a change. Its maps over every query live for the command, as the graph does."""
    graph.load_graph()
    with long_lived():
        return _inspect(graph.db, read_outputs)


def _inspect(build: BuildState, read_outputs: Callable[[str], bool] | None) -> Inspection:
    memos, file_hash = build.memos, build.hasher.hash
    contents: dict[str, tuple[bytes, str]] = {}
    if read_outputs is not None:
        read = build.hasher.read
        for path in sorted({p for memo in memos.values() for p in memo.outputs if read_outputs(p)}):
            with contextlib.suppress(OSError):  # missing, a directory, a pipe: hashed as ever below
                contents[path] = read(path)
    causes: dict[str, Reason] = {}
    # Each query read is looked up in a plain map (none: a build that failed part way), by its
    # bound `get`: no Python frame per read, of the 137k a store of 4,000 facts records.
    recorded_hash = {qid: memo.hash for qid, memo in memos.items()}.get
    rules, sources = build.engine.rules, build.sources

    def parts_of(dep: str) -> dict[str, str] | None:
        memo = memos.get(dep)
        return None if memo is None else memo.parts

    now = ValuesNow(file_hash, recorded_hash, parts_of, "status")  # each query read as its memo records it
    for qid, memo in memos.items():
        reason = outside_reads(memo, rules, sources, file_hash) or walk_reads(memo.deps, now).changed
        if reason:
            causes[qid] = reason
    stale = {qid: (reason, qid) for qid, reason in causes.items()}
    # Who reads whom, only when something changed: a check that passes (most) skips the 137,774
    # query reads the lock of 4,132 facts records.
    readers: dict[str, list[str]] = {}
    for qid, memo in memos.items() if causes else ():
        for group in memo.deps:
            for dep, _ in group:
                if not isinstance(dep, FileRead):
                    readers.setdefault(dep, []).append(qid)
    frontier = sorted(causes)
    while frontier:  # breadth first, so each query names the nearest stale query it reads
        nxt = []
        for qid in frontier:
            for reader in readers.get(qid, ()):
                if reader not in stale:
                    stale[reader] = (Reason.of(Change.BUILT_ON_STALE, qid), stale[qid][1])
                    nxt.append(reader)
        frontier = sorted(nxt)
    return Inspection(dict(memos), stale, dict(build.refused), contents, build.lock_misplaced)
