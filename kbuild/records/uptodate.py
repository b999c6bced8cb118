"""`kbuild` with nothing to do, decided before the Kbuildfile runs: a stat per file, as git does.

Running the Kbuildfile imports the rules, the model layer and pydantic: most of a no-op's time
on a small store. A build that leaves every query settled therefore writes `.kbuild/uptodate.json`:
the stat of every file the graph read and wrote (each as the engine recorded it with its hash),
of the lock, of the Kbuildfile and every Python file and prompt that it and its rules were loaded
from (taken before any rule ran), the OPENAI_* and KBUILD_* variables, and the listing the
targets were computed from (the store's `*/sources.yml`). The next `kbuild` compares them and,
when all hold, says so without running the Kbuildfile. Any difference, a missing record or a
build that starts (which removes it first) means the ordinary build, which decides for itself.

What it does not see: a Kbuildfile whose targets or settings depend on anything else (another
environment variable, the clock, a folder it globs). Only a Kbuildfile with a knowledge base
gets a record, since the knowledge base says what its targets are computed from.

This module is the whole of such a `kbuild` (with `kbuild.entry`): it imports nothing beyond
what Python starts with, json and xxhash. Measured with -X importtime in a normal install:
dataclasses and pathlib were a third of a no-op's imports, typing 9 ms, hashlib's OpenSSL 5 ms.
"""
from __future__ import annotations

import json
import os
import time

import xxhash

from .inputs import inside, loaded_modules, loaded_packages

TYPE_CHECKING = False  # typing's own, without importing typing (type checkers take this spelling)
if TYPE_CHECKING:
    from pathlib import Path

RECORD = "uptodate.json"
ENVIRONMENT = ("OPENAI_", "KBUILD_")  # what the default backend's settings read
RACY_NS = 2_000_000_000  # a file changed this recently may change again within its mtime's tick
Stat = list[int]  # size, mtime_ns, inode


class Record:
    """What a build that left every query settled saw. A plain class: see the module's note."""

    __slots__ = ("kbuild", "environment", "code", "files", "listings", "queries")

    def __init__(self, kbuild: str, environment: str, code: dict[str, Stat], files: dict[str, Stat],
                 listings: dict[str, list[str]], queries: int) -> None:
        self.kbuild = kbuild  # this module's own stat: another kbuild installed is another kbuild
        self.environment = environment
        self.code = code  # absolute paths
        self.files = files  # relative to the root: inputs, outputs, the lock
        self.listings = listings  # a glob relative to the root -> what it matched
        self.queries = queries

    def as_json(self) -> str:
        return json.dumps({name: getattr(self, name) for name in self.__slots__})


def stat_of(path: str | os.PathLike[str]) -> Stat | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def environment_digest() -> str:
    chosen = sorted((k, v) for k, v in os.environ.items() if k.startswith(ENVIRONMENT))
    return xxhash.xxh3_128_hexdigest(json.dumps(chosen).encode())


def code_stats(root: Path, extra: list[Path]) -> dict[str, Stat] | None:
    """The stat of every module loaded from under `root` or from kbuild's packages, and of `extra`
    (the rules' prompt files), taken now: before a rule reads them, so an edit made during the
    build shows as a change next time. None when one changed too recently to trust its stat."""
    # kbuild's packages wherever installed: an editable install puts kbuild.rules in the
    # checkout's rules/, apart from kbuild/
    folders = [os.path.realpath(root), *loaded_packages().values()]
    chosen = sorted(p for p in loaded_modules() if any(inside(p, folder) for folder in folders))
    chosen += sorted(os.path.realpath(p) for p in extra)
    stats = {p: s for p in chosen if (s := stat_of(p)) is not None}
    now = time.time_ns()
    if any(now - s[1] < RACY_NS for s in stats.values()):
        return None
    return stats


def listing(root: str | Path, pattern: str) -> list[str]:
    """The paths under `root` that match a glob, relative to it. glob.glob, not Path.glob: it
    imports less, and the record and its check must list the same way."""
    import glob

    return sorted(glob.glob(pattern, root_dir=root, include_hidden=True))


def record(state_dir: Path, entry: Record) -> None:
    tmp = state_dir / f"{RECORD}.tmp"
    tmp.write_text(entry.as_json())
    os.replace(tmp, state_dir / RECORD)


def forget(state_dir: Path) -> None:
    try:
        os.unlink(state_dir / RECORD)
    except FileNotFoundError:
        pass


def settled_queries(root: str | Path, state_dir: str | Path) -> int | None:
    """The number of queries when nothing changed since the record; else None (build as usual)."""
    try:
        with open(os.path.join(state_dir, RECORD), "rb") as file:
            entry = Record(**json.loads(file.read()))
    except (OSError, ValueError, TypeError):
        return None
    if entry.kbuild != _self_stamp() or entry.environment != environment_digest():
        return None
    if any(stat_of(path) != stat for path, stat in entry.code.items()):
        return None
    if any(stat_of(os.path.join(root, path)) != stat for path, stat in entry.files.items()):
        return None
    if any(listing(root, pattern) != found for pattern, found in entry.listings.items()):
        return None
    return entry.queries


def _self_stamp() -> str:
    return json.dumps(stat_of(__file__))


def new_record(code: dict[str, Stat], files: dict[str, Stat], listings: dict[str, list[str]], queries: int) -> Record:
    return Record(_self_stamp(), environment_digest(), code, files, listings, queries)
