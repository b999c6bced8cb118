"""What the tests share: running kbuild as a user types it.

Test modules import `kbuild` from here (`from conftest import kbuild`): pytest puts tests/ on
sys.path, as it does for the other helper modules beside the tests (documents.py...). A plain
function rather than a fixture, so helpers and hypothesis tests can call it too.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from kbuild.cli import main


def kbuild(root: Path, *args: str) -> Result:
    """`kbuild -C ROOT ARGS...` in this process; the result holds the exit code and the output
    (stdout and stderr together, as a terminal shows them). It does not check the exit code:
    tests of failures read it."""
    return CliRunner().invoke(main, ["-C", str(root), *args])


MODEL_ENVIRONMENT = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "KBUILD_MODEL")


def pytest_configure(config: pytest.Config) -> None:
    """The suite starts with no model named, whatever the shell running it holds (a developer's
    key or KBUILD_MODEL would send offline tests, and the stores of module fixtures, to a
    model); a test that wants one sets it with monkeypatch. Processes the tests start inherit
    the same environment."""
    for name in MODEL_ENVIRONMENT:
        os.environ.pop(name, None)
    # `kbuild init` turns ranking by meaning on where its model is installed, which the test
    # command installs: the stores of this process's tests rank by words alone unless a test
    # says otherwise (its Kbuildfile, or monkeypatch on this function), so that what a test of
    # words asserts does not depend on the machine. tests/test_semantic.py covers the default.
    from kbuild.services import scaffold

    scaffold.local_model_installed = lambda: False


@pytest.fixture
def graph_loads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry each time a build loads the whole recorded graph (or reads the whole lock)."""
    from kbuild.engine.graphload import GraphLoading

    loads: list[int] = []
    real = GraphLoading.load_graph

    def counting(self: GraphLoading) -> None:
        loads.append(1)
        real(self)

    monkeypatch.setattr(GraphLoading, "load_graph", counting)
    return loads


def write(root: Path, path: str, text: str) -> None:
    """As git writes a file: a new file put in place of the old."""
    full = root / path
    full.parent.mkdir(parents=True, exist_ok=True)
    tmp = full.with_name(full.name + ".new")
    tmp.write_text(text)
    os.replace(tmp, full)
