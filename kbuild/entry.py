"""The `kbuild` command's entry: `kbuild` with nothing to do, `kbuild check` that kbuild.checked
answers, and `--version`, answered before click, the engine or the Kbuildfile is imported;
everything else goes to `kbuild.cli`.

Python's start is most of a small store's no-op, and importing click and the command line
doubled it (0.1 s against `git status`'s 11 ms at 113 facts). What is answered here is only
what `kbuild.cli` would answer the same way, to the byte: tests/test_entry.py holds them equal.
"""
from __future__ import annotations

import os
import sys

from . import __version__

# Spelled here rather than imported: `kbuild.buildfile` and `kbuild.engine.layout` import the
# engine. tests/test_entry.py holds them equal to the names those modules own.
KBUILDFILE = "Kbuildfile.py"
STATE_FOLDER = ".kbuild"
QUIET = ("-q", "--quiet")


def main() -> None:
    if not answered(sys.argv[1:]):
        from .cli import main as cli

        cli()


def answered(args: list[str]) -> bool:
    """Answer the command here if it is one this module knows and nothing changed; else False."""
    if args == ["--version"]:
        print(f"kbuild {__version__}")
        return True
    if args[:1] == ["check"] and args[1:] in ([], ["--strict"]):
        from .records import checked  # each path imports only its own module: uptodate's json is 6 ms

        folder, strict = kbuildfile_folder(os.getcwd()), len(args) > 1
        if folder is None:
            return False
        if not checked.holds(folder, __version__, strict):
            checked.refused = (folder, strict)  # the whole check follows, which need not look again
            return False
        print(checked.PASSED)
        return True
    if [a for a in args if a not in QUIET] not in ([], ["build"]):
        return False
    from .records import uptodate

    folder = kbuildfile_folder(os.getcwd())
    settled = None if folder is None else uptodate.settled_queries(folder, os.path.join(folder, STATE_FOLDER))
    if settled is None:
        return False
    if not any(a in QUIET for a in args):
        remote = ", 0 from the remote" if os.environ.get("KBUILD_CACHE_URL", "").strip() else ""
        print(f"0 ran, {settled} reused, 0 cut off, 0 failed, 0 calls (0 cached{remote}), 0.00s")
    return True


def kbuildfile_folder(start: str) -> str | None:
    """The folder of the Kbuildfile.py in `start` or the nearest folder above it, as git finds
    .git (and as `kbuild.cli` does: a linked Kbuildfile's folder is its target's)."""
    folder = start
    while True:
        candidate = os.path.join(folder, KBUILDFILE)
        if os.path.isfile(candidate):
            return os.path.dirname(os.path.realpath(candidate))
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent
