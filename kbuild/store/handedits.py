"""Hand edits are protected, as git protects local changes: a build refuses to overwrite a page
a person edited unless forced, and a forced build keeps the text it overwrites in
.kbuild/overwritten/<path>.<time>, to be recovered.

A generated page git left with conflict markers is no person's edit: it is written again (its
text kept all the same). Nor, as far as anyone can tell, is an output that differs from its memo
after a build that was killed (it may have written it without recording it): written again,
its text kept. So is a page a merge wrote whose lock entry the merge marked to run
again (the engine leaves those out of `edited_outputs`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from .localstate import LocalState
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..engine import Engine, Query
    from ..engine.snapshot import StatPass

_MARKERS = (b"<<<<<<< ", b">>>>>>> ")


@dataclass(frozen=True)
class Edits:
    by_hand: list[str]  # edited by a person: a build refuses unless forced
    conflicted: list[str]  # left with git's conflict markers: written again
    unrecorded: list[str]  # after a build that was killed: maybe its own writes, written again
    stat_pass: StatPass | None = None  # what the look found unchanged: for the build that follows at once


def has_conflict_markers(data: bytes) -> bool:
    lines = data.splitlines()
    return all(any(line.startswith(m) for line in lines) for m in _MARKERS)


def find(engine: Engine, targets: list[Query]) -> Edits:
    by_hand: list[str] = []
    conflicted: list[str] = []
    edited, stat_pass = engine.edited_outputs(targets)
    if edited and engine.last_build_unfinished():  # a killed build's writes are not told from edits
        return Edits([], [], list(edited), stat_pass)
    for path in edited:
        try:
            data = (engine.root / path).read_bytes()
        except OSError:
            continue  # gone since: nothing to lose
        (conflicted if has_conflict_markers(data) else by_hand).append(path)
    return Edits(by_hand, conflicted, [], stat_pass)


def keep(engine: Engine, paths: list[str]) -> dict[str, Path]:
    """Copy each file into .kbuild/overwritten/<path>.<time> before a build overwrites it."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    kept: dict[str, Path] = {}
    for path in paths:
        source = engine.root / path
        folder = LocalState(engine.state_dir).overwritten
        target = folder / f"{path}.{stamp}"
        n = 1
        while target.exists():
            target = folder / f"{path}.{stamp}-{n}"
            n += 1
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read_bytes())
        kept[path] = target
    return kept


def refusal(paths: list[str], command: str) -> str:
    n = len(paths)
    return (f"refused: {n} page{'s' if n > 1 else ''} edited by hand would be overwritten; edit the sources "
            f"instead, restore or remove the page{'s' if n > 1 else ''}, or run `{command} --force` "
            "(the text is kept in .kbuild/overwritten/)")
