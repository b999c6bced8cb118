"""Merges that resolve themselves: two branches that each rebuilt the store merge through
kbuild's merge drivers, and one `kbuild` after the merge ends as a clean build of the merged
sources would (same pages, same lock). In a real git repository, with the drivers `kbuild init`
registers."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import kbuild
from kbuild.engine.lockmerge import STALE_FINGERPRINT, NotALock, merge_locks

ALPHA = "# Alpha\n\nAlpha is the first letter. It has many uses in mathematics.\n"
BETA = "# Beta\n\nBeta is the second letter. It follows alpha.\n"


def git(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    # the driver git starts is this interpreter's kbuild, not whatever `kbuild` is on PATH
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, env=env,
                          capture_output=True, text=True)
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


def ok(root: Path, *args: str) -> str:
    result = kbuild(root, *args)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    assert "set up git's merge drivers" in ok(root, "init", str(root))
    git(root, "config", "merge.kbuild-lock.driver", f'"{sys.executable}" -m kbuild merge-lock %O %A %B')
    (root / "a.md").write_text(ALPHA)
    (root / "b.md").write_text(BETA)
    ok(root, "add", "p", "a.md")
    ok(root, "add", "p", "b.md")
    ok(root)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "store")
    return root


def generated(root: Path) -> dict[str, bytes]:
    files = {p.relative_to(root).as_posix(): p.read_bytes() for p in (root / "kb").rglob("*") if p.is_file()}
    files["kbuild.lock"] = (root / "kbuild.lock").read_bytes()
    return files


def clean_build(root: Path, elsewhere: Path) -> dict[str, bytes]:
    """The store a first build of `root`'s sources makes, in a fresh folder."""
    elsewhere.mkdir()
    for name in ("Kbuildfile.py", "a.md", "b.md"):
        shutil.copy(root / name, elsewhere / name)
    (elsewhere / "kb" / "p").mkdir(parents=True)
    shutil.copy(root / "kb" / "p" / "sources.yml", elsewhere / "kb" / "p" / "sources.yml")
    ok(elsewhere)
    return generated(elsewhere)


def edit_on_branch(root: Path, branch: str, name: str, text: str) -> None:
    git(root, "checkout", "-q", "-B", branch)
    (root / name).write_text(text)
    ok(root)
    git(root, "commit", "-qam", f"edit {name}")


def test_init_writes_gitattributes_and_registers_the_drivers(repo):
    attributes = (repo / ".gitattributes").read_text()
    assert "kbuild.lock linguist-generated merge=kbuild-lock" in attributes
    assert "kb/** linguist-generated merge=kbuild-generated" in attributes
    assert git(repo, "check-attr", "merge", "--", "kb/p/sources.yml").stdout.strip().endswith("text")
    assert git(repo, "config", "merge.kbuild-generated.driver").stdout.strip() == "true"


def test_init_outside_git_says_how_to_set_the_drivers_up(tmp_path):
    if subprocess.run(["git", "-C", str(tmp_path), "rev-parse"], capture_output=True).returncode == 0:
        pytest.skip("the temporary folder is inside a git repository")
    out = ok(tmp_path, "init", str(tmp_path))
    assert "not a git repository" in out and 'git config merge.kbuild-lock.driver "kbuild merge-lock %O %A %B"' in out
    assert (tmp_path / ".gitattributes").exists()


def test_two_branches_rebuilding_different_sources_merge_by_themselves(repo, tmp_path):
    edit_on_branch(repo, "other", "b.md", BETA.replace("It follows alpha.", "It comes after alpha, before gamma."))
    git(repo, "checkout", "-q", "main")
    edit_on_branch(repo, "main", "a.md", ALPHA.replace("mathematics", "physics and mathematics"))
    merged = git(repo, "merge", "-m", "merge", "other")
    assert "kbuild.lock merged" in merged.stdout + merged.stderr
    assert not git(repo, "diff", "--name-only", "--diff-filter=U").stdout.strip()  # nothing left to resolve
    assert STALE_FINGERPRINT in (repo / "kbuild.lock").read_text()  # the indexes both sides rebuilt
    ok(repo)
    assert generated(repo) == clean_build(repo, tmp_path / "clean")
    assert "0 ran" in ok(repo)


def test_both_branches_editing_one_source(repo, tmp_path):
    edit_on_branch(repo, "other", "a.md", ALPHA.replace("mathematics", "geometry"))
    git(repo, "checkout", "-q", "main")
    edit_on_branch(repo, "main", "a.md", ALPHA.replace("mathematics", "algebra"))
    merged = git(repo, "merge", "-m", "merge", "other", check=False)
    assert merged.returncode == 1
    conflicted = git(repo, "diff", "--name-only", "--diff-filter=U").stdout.split()
    assert conflicted == ["a.md"]  # the source is the person's to resolve; nothing kbuild writes
    (repo / "a.md").write_text(ALPHA.replace("mathematics", "geometry and algebra"))
    git(repo, "commit", "-qam", "merge")
    ok(repo)
    assert generated(repo) == clean_build(repo, tmp_path / "clean")


def test_a_conflicted_page_without_the_page_driver_is_rebuilt(repo, tmp_path):
    (repo / ".git" / "info" / "attributes").write_text("kb/** merge=text\n")  # git merges the pages as text
    edit_on_branch(repo, "other", "b.md", BETA.replace("It follows alpha.", "It comes after alpha, before gamma."))
    git(repo, "checkout", "-q", "main")
    edit_on_branch(repo, "main", "a.md", ALPHA.replace("mathematics", "physics and mathematics"))
    assert git(repo, "merge", "-m", "merge", "other", check=False).returncode == 1
    conflicted = git(repo, "diff", "--name-only", "--diff-filter=U").stdout.split()
    assert conflicted and all(p.startswith("kb/") for p in conflicted)  # pages with conflict markers
    ok(repo)
    assert generated(repo) == clean_build(repo, tmp_path / "clean")


# The merge itself, entry by entry


def lock(**entries: str) -> bytes:
    from kbuild.engine.lockfile import render_lock
    from kbuild.engine.state import Memo

    return render_lock({q: Memo(q, "r", [q], "f" * 32, [[("x.txt", h)]] if h else [], h or "0" * 32, {}, {})
                        for q, h in entries.items()})


def test_the_merge_takes_each_change_from_the_side_that_made_it():
    base = lock(a="1", b="1", c="1", d="1")
    ours = lock(a="2", b="1", c="1", d="3")
    theirs = lock(a="1", b="2", d="4", e="1")
    merged = merge_locks(base, ours, theirs)
    assert merged.from_ours == ["a"] and sorted(merged.from_theirs) == ["b", "c", "e"] and merged.stale == ["d"]
    from kbuild.engine.lockfile import lock_entries

    entries = lock_entries(merged.data)
    assert entries is not None and sorted(entries) == ["a", "b", "d", "e"]  # c: removed by them
    assert entries["a"] == lock_entries(ours)["a"] and entries["b"] == lock_entries(theirs)["b"]
    assert STALE_FINGERPRINT.encode() in entries["d"]
    assert merge_locks(base, ours, ours).data == ours


def test_a_change_against_a_removal_is_kept_and_runs_again():
    merged = merge_locks(lock(a="1"), lock(a="2"), lock())
    assert merged.stale == ["a"]


def test_a_lock_that_is_no_lock_is_a_conflict_in_one_line(tmp_path):
    with pytest.raises(NotALock):
        merge_locks(lock(a="1"), b"<<<<<<< ours\n", lock(a="2"))
    for name, data in (("o", lock(a="1")), ("a", b"not a lock\n"), ("b", lock(a="2"))):
        (tmp_path / name).write_bytes(data)
    result = kbuild(tmp_path, "merge-lock", *(str(tmp_path / n) for n in "oab"))
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and "our side is kept" in result.output
    assert (tmp_path / "a").read_bytes() == b"not a lock\n"


def test_a_split_lock_merges_file_by_file(repo, tmp_path):
    """Two projects, each its own lock file: branches that rebuilt different sources of one project
    merge that file through the driver, and the next `kbuild` ends as a clean build would."""
    kbuildfile = repo / "Kbuildfile.py"
    kbuildfile.write_text(kbuildfile.read_text().replace("# split_lock = True", "split_lock = True"))
    (repo / "c.md").write_text("# Gamma\n\nGamma is the third letter.\n")
    ok(repo, "add", "q", "c.md")
    ok(repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "split")
    assert sorted(p.name for p in (repo / "kbuild.lock.d").iterdir()) == ["p.lock", "q.lock"]
    edit_on_branch(repo, "other", "b.md", BETA.replace("It follows alpha.", "It comes after alpha, before gamma."))
    git(repo, "checkout", "-q", "main")
    edit_on_branch(repo, "main", "a.md", ALPHA.replace("mathematics", "physics and mathematics"))
    merged = git(repo, "merge", "-m", "merge", "other")
    assert "kbuild.lock merged" in merged.stdout + merged.stderr
    assert not git(repo, "diff", "--name-only", "--diff-filter=U").stdout.strip()
    assert STALE_FINGERPRINT in (repo / "kbuild.lock.d" / "p.lock").read_text()  # p's index, rebuilt on both
    assert STALE_FINGERPRINT not in (repo / "kbuild.lock.d" / "q.lock").read_text()
    ok(repo)
    clean = tmp_path / "clean"
    clean.mkdir()
    for name in ("Kbuildfile.py", "a.md", "b.md", "c.md"):
        shutil.copy(repo / name, clean / name)
    for project in ("p", "q"):
        (clean / "kb" / project).mkdir(parents=True)
        shutil.copy(repo / "kb" / project / "sources.yml", clean / "kb" / project / "sources.yml")
    ok(clean)
    for root in (repo, clean):
        assert "0 ran" in ok(root)
    shards = {p.name: p.read_bytes() for p in (repo / "kbuild.lock.d").iterdir()}
    assert shards == {p.name: p.read_bytes() for p in (clean / "kbuild.lock.d").iterdir()}
    assert generated(repo) == generated(clean)
