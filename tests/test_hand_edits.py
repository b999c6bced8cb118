"""Hand edits are protected, as git protects local changes: `kbuild` refuses to overwrite a page
edited by hand (exit 1, one line per page) unless `--force`, which keeps the overwritten text in
.kbuild/overwritten/; `kbuild status` lists hand edits first."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import kbuild
from kbuild.engine.buildlock import BuildLock

KBUILDFILE = '''
from kbuild.engine import rule

@rule
async def words(ctx, path):
    return len(ctx.read_text(path).split())

@rule
async def page(ctx, path):
    n = await ctx.query(words(path))
    ctx.write(f"out/{path}.md", f"# {path}\\n\\n{n} words\\n")
    return n

def targets():
    return [page("a.txt"), page("b.txt")]
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "Kbuildfile.py").write_text(KBUILDFILE)
    (tmp_path / "a.txt").write_text("one two\n")
    (tmp_path / "b.txt").write_text("three\n")
    assert kbuild(tmp_path).exit_code == 0
    return tmp_path


def kept(root: Path) -> list[Path]:
    folder = root / ".kbuild" / "overwritten"
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def test_a_build_refuses_to_overwrite_a_hand_edit_and_builds_nothing(project):
    page = project / "out/b.txt.md"
    page.write_text("my own notes\n")
    (project / "a.txt").write_text("one two three four\n")
    result = kbuild(project)
    assert result.exit_code == 1
    assert "edited by hand: out/b.txt.md" in result.output and "--force" in result.output
    assert "Traceback" not in result.output
    assert page.read_text() == "my own notes\n"
    assert "2 words" in (project / "out/a.txt.md").read_text()  # nothing built: as git, all or nothing
    assert kept(project) == []
    assert kbuild(project, "build").exit_code == 1  # and again, until resolved


def test_force_overwrites_and_keeps_the_text(project):
    page = project / "out/b.txt.md"
    page.write_text("my own notes\n")
    result = kbuild(project, "build", "--force")
    assert result.exit_code == 0, result.output
    assert page.read_text() == "# b.txt\n\n1 words\n"
    (copy,) = kept(project)
    assert copy.read_text() == "my own notes\n"
    assert copy.relative_to(project / ".kbuild/overwritten").as_posix().startswith("out/b.txt.md.")
    assert f"its text is kept in {copy.relative_to(project).as_posix()}" in result.output
    assert kbuild(project).exit_code == 0  # nothing edited any more


def test_a_removed_page_is_written_again_without_asking(project):
    (project / "out/a.txt.md").unlink()
    result = kbuild(project)
    assert result.exit_code == 0, result.output
    assert (project / "out/a.txt.md").is_file() and kept(project) == []


def test_a_page_left_with_conflict_markers_is_written_again(project):
    page = project / "out/a.txt.md"
    page.write_text("<<<<<<< HEAD\n# a.txt\n=======\n# a.txt!\n>>>>>>> other\n")
    result = kbuild(project)
    assert result.exit_code == 0, result.output
    assert page.read_text() == "# a.txt\n\n2 words\n"
    (copy,) = kept(project)
    assert "<<<<<<< HEAD" in copy.read_text()


def test_status_lists_hand_edits_first(project):
    (project / "a.txt").write_text("one\n")  # a cause that sorts before the page
    (project / "out/b.txt.md").write_text("my own notes\n")
    result = kbuild(project, "status")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("out/b.txt.md: edited by hand")
    assert any("a.txt" in line for line in lines[1:])


def test_a_dry_run_still_says_what_would_run(project):
    (project / "out/b.txt.md").write_text("my own notes\n")
    result = kbuild(project, "build", "--dry-run")
    assert result.exit_code == 0 and "out/b.txt.md" in result.output


def test_another_build_holding_the_store_is_said_in_one_line(project):
    (project / "a.txt").write_text("one two three\n")
    with BuildLock(project / ".kbuild"):
        result = kbuild(project)
    assert result.exit_code == 3 and "another kbuild" in result.output and "Traceback" not in result.output


def git(root: Path, *args: str) -> None:
    import subprocess

    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
                   capture_output=True)


def test_pages_a_pull_brings_are_no_hand_edits_and_edits_after_it_are(project, tmp_path):
    git(project, "init", "-q")
    (project / ".gitignore").write_text(".kbuild/\n")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "store")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(project), str(clone))
    assert kbuild(clone).exit_code == 0  # a local state, settled
    (project / "a.txt").write_text("one two three four five\n")
    assert kbuild(project).exit_code == 0
    git(project, "commit", "-qam", "a.txt edited")
    git(clone, "pull", "-q")
    (clone / "out/b.txt.md").write_text("my own notes\n")
    result = kbuild(clone)
    assert result.exit_code == 1 and result.output.count("edited by hand:") == 1, result.output
    assert "out/b.txt.md" in result.output  # not out/a.txt.md, which the pull brought
    (clone / "out/b.txt.md").unlink()
    result = kbuild(clone)
    assert result.exit_code == 0, result.output
    assert "5 words" in (clone / "out/a.txt.md").read_text()


def test_after_a_killed_build_a_differing_page_is_written_again_and_kept(project):
    """A build killed between writing a page and recording it leaves a page unlike its memo:
    not told from an edit, so it is written again without asking, its text kept."""
    from kbuild.engine.build import UNFINISHED
    from kbuild.engine.state import State

    state = State(project / ".kbuild" / "state.db")
    state.set_meta(UNFINISHED, "1")
    state.commit()
    state.db.close()
    (project / "out/b.txt.md").write_text("# b.txt\n\nwritten, not recorded\n")
    result = kbuild(project)
    assert result.exit_code == 0, result.output
    assert "interrupted build" in result.output
    assert (project / "out/b.txt.md").read_text() == "# b.txt\n\n1 words\n"
    (copy,) = kept(project)
    assert "not recorded" in copy.read_text()
    (project / "out/b.txt.md").write_text("my own notes\n")
    assert kbuild(project).exit_code == 1  # that build finished: edits are refused again


def _aged(root: Path) -> None:
    """Every file older than the racy window, so the next build records its stat with its hash."""
    import os
    import time

    old = time.time() - 60
    for path in [*root.glob("*.txt"), *root.glob("out/*.md"), root / "kbuild.lock"]:
        os.utime(path, (old, old))


def _stats_taken(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    from kbuild.engine.files import FileHasher

    taken: list[str] = []
    real = FileHasher.unchanged_since

    def counting(self: FileHasher, key: str, recorded: list[int]) -> bool:
        taken.append(key)
        return real(self, key, recorded)

    monkeypatch.setattr(FileHasher, "unchanged_since", counting)
    return taken


def test_an_edit_stats_each_file_once_for_the_look_and_the_build(project, monkeypatch):
    _aged(project)
    assert kbuild(project).exit_code == 0  # records the stats of the aged files
    (project / "a.txt").write_text("one two three\n")
    taken = _stats_taken(monkeypatch)
    from kbuild.engine.state import State

    loads: list[int] = []
    real_load = State.load_stats
    monkeypatch.setattr(State, "load_stats", lambda self: loads.append(1) or real_load(self))
    assert kbuild(project).exit_code == 0
    assert loads == []  # the look and the build look up the few stats they need one by one
    assert "3 words" in (project / "out/a.txt.md").read_text()
    unchanged = [key for key in taken if key != "a.txt"]
    assert {"b.txt", "out/b.txt.md"} <= set(unchanged)  # the look for hand edits stat'ed them ...
    assert len(unchanged) == len(set(unchanged))  # ... and the build took what it found: once each


def test_the_stats_an_edit_leaves_for_the_next_command_are_those_of_the_whole_stat_cache(project):
    """An edit looks up again only the stats it changed: what it leaves for the next no-op is
    what the whole stat cache, loaded, would give (each path's stat recorded with its hash)."""
    import json
    import os

    from kbuild.engine.snapshot import CLEAN
    from kbuild.engine.state import State

    _aged(project)
    assert kbuild(project).exit_code == 0  # records the stats of the aged files
    (project / "a.txt").write_text("one two three\n")
    os.utime(project / "a.txt", (1_000_000_000, 1_000_000_000))  # not racy: its new stat is recorded
    (project / "b.txt").write_text("three four\n")  # racy: no stat is trusted for it
    assert kbuild(project).exit_code == 0
    state = State(project / ".kbuild/state.db")
    summary, cache = json.loads(state.get_meta(CLEAN)), state.load_stats()
    state.db.close()
    whole = {path: list(cache[path][0]) for kind in ("files", "outputs") for path, digest in summary[kind].items()
             if path in cache and cache[path][1] == digest}
    assert summary["stats"] == whole and "a.txt" in whole and "b.txt" not in whole


def test_a_file_changed_between_the_look_and_the_build_is_built_by_the_next(project, monkeypatch):
    from kbuild.store import handedits

    _aged(project)
    assert kbuild(project).exit_code == 0
    real = handedits.find

    def find_then_edit(engine, targets):
        found = real(engine, targets)
        (project / "b.txt").write_text("three four five\n")  # after the look, before the build
        return found

    monkeypatch.setattr(handedits, "find", find_then_edit)
    assert kbuild(project).exit_code == 0
    monkeypatch.undo()
    assert kbuild(project).exit_code == 0  # the change is seen here, whatever the build before did
    assert "3 words" in (project / "out/b.txt.md").read_text()
    assert "0 ran" in kbuild(project).output
