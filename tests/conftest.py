"""What the tests share: running kbuild as a user types it.

Test modules import `kbuild` from here (`from conftest import kbuild`): pytest puts tests/ on
sys.path, as it does for the other helper modules beside the tests (documents.py...). A plain
function rather than a fixture, so helpers and hypothesis tests can call it too.
"""
from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from kbuild.cli import main


def kbuild(root: Path, *args: str) -> Result:
    """`kbuild -C ROOT ARGS...` in this process; the result holds the exit code and the output
    (stdout and stderr together, as a terminal shows them). It does not check the exit code:
    tests of failures read it."""
    return CliRunner().invoke(main, ["-C", str(root), *args])
