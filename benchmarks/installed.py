"""Which kbuild the benchmarks measure: the installed one, as a user runs it.

`python -m benchmarks` from a checkout puts the checkout first on the path, and a script puts
its folder there; a kbuild imported from the checkout's kbuild/ lacks kbuild.rules (an install
maps rules/ there), so the figures that build a store failed from a normal install. The
checkout is taken off the path while kbuild is installed; without an install it is the
checkout's kbuild (its engine: enough for the engine-only figures). It runs from compiled
bytecode, as pip installs it: a shell that turns bytecode caching off (the test command does)
would time every kbuild process compiling its imports again, more so for a file just changed.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def use_installed_kbuild() -> None:
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # for this process and the kbuilds it starts
    def at_repo(entry: str) -> bool:
        try:
            return Path(entry or os.curdir).resolve() == REPO
        except OSError:
            return False

    outside = [entry for entry in sys.path if not at_repo(entry)]
    if len(outside) != len(sys.path):
        sys.path[:] = outside
        importlib.invalidate_caches()
    if importlib.util.find_spec("kbuild") is None:
        sys.path.append(str(REPO))  # no kbuild installed: the checkout's own
