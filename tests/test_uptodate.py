"""`kbuild` with nothing to do says so without running the Kbuildfile, and never when something changed."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import kbuild
from documents import PAYMENTS, small_store

from kbuild.records import uptodate
from kbuild.engine import files

MARKER = "\nPath(__file__).with_name('kbuildfile-ran').touch()\n"  # the Kbuildfile says when it runs


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # Stats of files written within the last 2 s are not trusted (git's racy rule); a test writes
    # and builds within one second, so it lets them be trusted at once.
    monkeypatch.setattr(uptodate, "RACY_NS", 0)
    monkeypatch.setattr(files, "RACY_NS", 0)
    small_store(tmp_path, {"payments.md": PAYMENTS})
    kbuildfile = tmp_path / "Kbuildfile.py"
    kbuildfile.write_text(kbuildfile.read_text() + MARKER)
    assert kbuild(tmp_path).exit_code == 0
    assert kbuild(tmp_path).exit_code == 0  # the no-op that finds every stat and records them
    return tmp_path


def ran(root: Path) -> bool:
    marker = root / "kbuildfile-ran"
    was = marker.exists()
    marker.unlink(missing_ok=True)
    return was


def test_nothing_to_do_is_decided_without_running_the_kbuildfile(store):
    assert (store / ".kbuild" / uptodate.RECORD).is_file()
    ran(store)
    result = kbuild(store)
    assert result.exit_code == 0 and result.output.startswith("0 ran, ") and " reused" in result.output
    assert not ran(store)
    assert kbuild(store, "build").exit_code == 0 and not ran(store)
    assert kbuild(store, "build", "--dry-run").exit_code == 0 and ran(store)  # options other than none: the usual way


@pytest.mark.parametrize("change", ["source", "output", "sources.yml", "new project", "environment", "lock",
                                    "kbuildfile"])
def test_any_change_takes_the_usual_build(store, change, monkeypatch):
    fact = next((store / "kb/shop/facts/payments").glob("refund*.md"))
    before = fact.read_text()
    if change == "source":
        (store / "payments.md").write_text(PAYMENTS.replace("every refund", "each refund"))
    elif change == "output":
        fact.write_text("edited by hand\n")
    elif change == "sources.yml":
        sources = store / "kb/shop/sources.yml"
        sources.write_text(sources.read_text() + "# a comment\n")
    elif change == "new project":
        (store / "notes.md").write_text("# Notes\n\nThe shop opens at nine.\n")
        assert kbuild(store, "add", "notes", "notes.md").exit_code == 0
    elif change == "environment":
        monkeypatch.setenv("OPENAI_ORGANIZATION", "another-org")  # the SDK reads it; naming a model needs a key
    elif change == "lock":
        lock = store / "kbuild.lock"
        lock.write_text(lock.read_text() + "\n")
    elif change == "kbuildfile":  # a setting changed: the Kbuildfile is not a module Python keeps
        kbuildfile = store / "Kbuildfile.py"
        kbuildfile.write_text(kbuildfile.read_text() + "max_calls = 2\n")
    ran(store)
    result = kbuild(store, *(["build", "--force"] if change == "output" else []))  # a hand edit: refused unforced
    assert result.exit_code == 0, result.output
    assert ran(store)
    if change == "output":
        assert fact.read_text() == before  # restored
    if change == "new project":
        assert (store / "kb/notes/index.md").is_file()


def test_a_build_under_way_is_never_up_to_date(store, monkeypatch):
    """A build removes the record before it changes anything: a `kbuild` started meanwhile, or
    after a build killed half way, decides the usual way."""
    from kbuild.engine import Engine

    def killed(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(Engine, "build", killed)
    (store / "payments.md").write_text(PAYMENTS.replace("every refund", "each refund"))
    kbuild(store)
    assert not (store / ".kbuild" / uptodate.RECORD).exists()


def test_a_store_with_url_sources_fetches_on_every_build(store):
    sources = store / "kb/shop/sources.yml"
    sources.write_text(sources.read_text() + "  - id: remote\n    url: http://127.0.0.1:9/nothing.md\n")
    kbuild(store)
    kbuild(store)
    assert not (store / ".kbuild" / uptodate.RECORD).exists()


def test_status_with_nothing_to_do_says_so_without_running_the_kbuildfile(store):
    import json

    ran(store)
    for args, expected in ((("status",), "up to date: nothing would run\n"),
                           (("status", "--json"), json.dumps({"causes": {}, "new": []}, indent=2) + "\n")):
        result = kbuild(store, *args)
        assert result.exit_code == 0 and result.output == expected
        assert not ran(store)
    (store / ".kbuild" / uptodate.RECORD).unlink()  # the usual way says the same
    for args, expected in ((("status",), "up to date: nothing would run\n"),
                           (("status", "--json"), json.dumps({"causes": {}, "new": []}, indent=2) + "\n")):
        result = kbuild(store, *args)
        assert result.exit_code == 0 and result.output == expected
        assert ran(store)


@pytest.mark.parametrize("change", ["source", "output"])
def test_status_after_a_change_runs_the_kbuildfile_and_names_it(store, change):
    fact = next((store / "kb/shop/facts/payments").glob("refund*.md"))
    if change == "source":
        (store / "payments.md").write_text(PAYMENTS.replace("every refund", "each refund"))
    else:
        fact.write_text("edited by hand\n")
    ran(store)
    result = kbuild(store, "status")
    assert result.exit_code == 0 and ran(store)
    assert "up to date" not in result.output
    assert ("payments.md" if change == "source" else fact.name) in result.output


def test_files_rewritten_as_they_were_come_back_to_the_fast_path(store):
    """A checkout or a copy rewrites files with the content they had: new stats, same hashes.
    The builds after it record the new stats, so `kbuild` is decided by a stat per file again."""
    import os

    for path in [store / "payments.md", *(p for p in (store / "kb").rglob("*") if p.is_file())]:
        copy = path.with_name(path.name + ".copy")
        copy.write_bytes(path.read_bytes())
        os.replace(copy, path)  # another inode, another mtime
    ran(store)
    assert kbuild(store).exit_code == 0 and ran(store)
    kbuild(store)
    ran(store)
    result = kbuild(store)
    assert result.exit_code == 0 and result.output.startswith("0 ran, ")
    assert not ran(store)


def test_the_code_a_build_ran_is_known_by_its_real_paths(tmp_path, monkeypatch):
    """A rule module under the project, imported through a symlinked folder, is recorded where
    it really is, beside kbuild's own modules; a module from anywhere else is not."""
    import importlib
    import sys

    (tmp_path / "project" / "real").mkdir(parents=True)
    (tmp_path / "project" / "real" / "my_rules.py").write_text("X = 1\n")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "not_ours.py").write_text("Y = 1\n")
    (tmp_path / "linked").symlink_to(tmp_path / "project" / "real")
    monkeypatch.syspath_prepend(str(tmp_path / "linked"))
    monkeypatch.syspath_prepend(str(tmp_path / "elsewhere"))
    monkeypatch.setattr(uptodate, "RACY_NS", 0)
    for name in ("my_rules", "not_ours"):
        monkeypatch.delitem(sys.modules, name, raising=False)
        importlib.import_module(name)
    stats = uptodate.code_stats(tmp_path / "project", [])
    assert stats is not None
    assert str((tmp_path / "project" / "real" / "my_rules.py").resolve()) in stats
    assert not any("not_ours" in p for p in stats)
    assert str(Path(uptodate.__file__).resolve()) in stats


def test_a_kbuild_package_installed_apart_from_kbuild_is_code_too(tmp_path, monkeypatch):
    """An editable install puts kbuild.rules in the checkout's rules/, not beside kbuild/: an
    edit of a rule there must not leave `kbuild` saying "nothing to do"."""
    import sys
    import types

    folder = tmp_path / "checkout" / "rules"
    folder.mkdir(parents=True)
    for name in ("__init__.py", "facts.py"):
        (folder / name).write_text("X = 1\n")
    package = types.ModuleType("kbuild.apart")
    package.__path__, package.__file__ = [str(folder)], str(folder / "__init__.py")
    module = types.ModuleType("kbuild.apart.facts")
    module.__file__ = str(folder / "facts.py")
    monkeypatch.setitem(sys.modules, "kbuild.apart", package)
    monkeypatch.setitem(sys.modules, "kbuild.apart.facts", module)
    monkeypatch.setattr(uptodate, "RACY_NS", 0)
    (tmp_path / "project").mkdir()
    stats = uptodate.code_stats(tmp_path / "project", [])
    assert stats is not None and str((folder / "facts.py").resolve()) in stats
