"""The `kbuild` command answers a no-op and `--version` before importing click or the engine,
exactly as the full command line would; anything else, or any change, goes the usual way."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import kbuild
from documents import PAYMENTS, small_store

from kbuild import buildfile, entry
from kbuild.records import uptodate
from kbuild.engine import files, layout

# The command as the installed script runs it, and what it imported.
PROBE = ("import sys; sys.argv = ['kbuild', *sys.argv[1:]]; from kbuild.entry import main\n"
         "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
         "print('IMPORTED', 'click' in sys.modules, 'kbuild.engine' in sys.modules)")


def run(root: Path, *args: str) -> tuple[str, bool, bool]:
    done = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=root, capture_output=True, text=True,
                          env={**os.environ, "OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""}, check=True)
    out, _, imported = done.stdout.rpartition("IMPORTED ")
    click_imported, engine_imported = imported.split()
    return out, click_imported == "True", engine_imported == "True"


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(uptodate, "RACY_NS", 0)  # files written a moment ago are trusted (see test_uptodate)
    monkeypatch.setattr(files, "RACY_NS", 0)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):  # the offline backend, here as in run()
        monkeypatch.setenv(name, "")
    small_store(tmp_path, {"payments.md": PAYMENTS})
    assert kbuild(tmp_path).exit_code == 0
    assert kbuild(tmp_path).exit_code == 0  # the no-op that records every stat
    assert (tmp_path / layout.FOLDER / uptodate.RECORD).is_file()
    return tmp_path


def test_the_names_it_spells_are_the_owners():
    assert entry.KBUILDFILE == buildfile.FILENAME and entry.STATE_FOLDER == layout.FOLDER


def test_a_no_op_is_answered_without_click_or_the_engine_and_says_what_the_cli_says(store):
    said, click_imported, engine_imported = run(store)
    assert said == kbuild(store).output and said.startswith("0 ran, ")
    assert not click_imported and not engine_imported
    assert run(store, "-q") == ("", False, False)
    assert run(store, "build", "--quiet") == ("", False, False)
    inside = store / "kb" / "shop"  # found from a folder below, as git finds .git
    assert run(inside)[1:] == (False, False)


def test_a_change_or_another_command_goes_the_usual_way(store):
    assert run(store, "status")[1]  # a command it does not answer
    assert run(store, "-v")[1]  # nor a flag
    (store / "payments.md").write_text(PAYMENTS.replace("every refund", "each refund"))
    said, click_imported, engine_imported = run(store, "-q")
    assert click_imported and engine_imported and said == ""
    assert "each refund" in "".join(p.read_text() for p in (store / "kb/shop/facts").rglob("*.md"))


def test_version_is_the_packages(tmp_path):
    said, click_imported, _ = run(tmp_path, "--version")
    cli = subprocess.run([sys.executable, "-c", "from kbuild.cli import main; main(['--version'])"],
                         capture_output=True, text=True).stdout
    assert said == cli and not click_imported
