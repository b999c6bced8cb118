"""Every fix a message gives works when followed as written: for a page edited by hand and for a
lock a merge left conflicted, each command `kbuild`, `kbuild check` (its text, its annotations,
its step summary) and `kbuild doctor` name is run here as a person would type it, and must succeed."""
from __future__ import annotations

import json
import re
import shlex
import subprocess

import pytest

from conftest import kbuild
from test_merge import ALPHA, BETA, PLAIN_PATH, edit_on_branch, git, ok, repo  # noqa: F401  (repo: a fixture)

PAGE = "kb/p/artifacts/views/digest.md"


def commands(message: str) -> list[str]:
    """The commands a message names, in order: what it puts between backquotes."""
    return re.findall(r"`([^`]+)`", message)


def follow(root, command: str) -> str:
    """Run one command of a message as typed in `root`; its output. It must succeed."""
    if command.startswith("kbuild"):
        result = kbuild(root, *shlex.split(command)[1:])
        assert result.exit_code == 0, f"`{command}` failed: {result.output}"
        return result.output
    assert command.startswith("git "), command
    done = subprocess.run(command, shell=True, cwd=root, capture_output=True, text=True,
                          env={"PATH": PLAIN_PATH, "HOME": str(root), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})
    assert done.returncode == 0, f"`{command}` failed: {done.stdout}{done.stderr}"
    return done.stdout


def passes_check(root) -> None:
    result = kbuild(root, "check")
    assert result.exit_code == 0, result.output


def edit_by_hand(root) -> None:
    page = root / PAGE
    page.write_text(page.read_text() + "\nA line a person added.\n")


# --- a page edited by hand ----------------------------------------------------------------------

def hand_edit_fix(root, monkeypatch, tmp_path) -> str:
    """The fix `check` gives for the edited page, the same in its text, annotations and step summary."""
    found = json.loads(kbuild(root, "check", "--format", "json").output)
    fixes = [f["fix"] for f in found["findings"] if f["kind"] == "hand-edited" and f["page"] == PAGE]
    assert len(fixes) == 1
    fix = fixes[0]
    assert f"(fix: {fix})" in kbuild(root, "check").output
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    annotations = kbuild(root, "check", "--format", "github").output
    assert f"Fix: {fix}" in annotations and fix in summary.read_text()
    return fix


def test_the_fix_check_gives_for_a_hand_edit_restores_the_page(repo, monkeypatch, tmp_path):
    edit_by_hand(repo)
    restore, _ = commands(hand_edit_fix(repo, monkeypatch, tmp_path))
    follow(repo, restore)
    passes_check(repo)


def test_the_other_fix_check_gives_for_a_hand_edit_writes_the_page_again(repo, monkeypatch, tmp_path):
    edit_by_hand(repo)
    _, rebuild = commands(hand_edit_fix(repo, monkeypatch, tmp_path))
    follow(repo, rebuild)
    passes_check(repo)
    kept = list((repo / ".kbuild" / "overwritten").rglob("digest.md.*"))
    assert len(kept) == 1 and "A line a person added." in kept[0].read_text()


def test_the_fixes_a_refused_build_gives_for_a_hand_edit(repo):
    edit_by_hand(repo)
    refused = kbuild(repo)
    assert refused.exit_code == 1
    (force,) = commands(refused.output)
    follow(repo, force)
    passes_check(repo)
    edit_by_hand(repo)  # "or remove the page"
    (repo / PAGE).unlink()
    follow(repo, "kbuild")
    passes_check(repo)


# --- a lock a merge left conflicted ------------------------------------------------------------

@pytest.fixture
def conflicted(repo):
    """A merge of two branches that each rebuilt a source, in a clone whose git has no kbuild
    drivers (git does not clone them): kbuild.lock is left with conflict markers."""
    for name in ("kbuild-lock", "kbuild-sources", "kbuild-generated"):
        git(repo, "config", "--remove-section", f"merge.{name}")
    edit_on_branch(repo, "other", "b.md", BETA.replace("It follows alpha.", "It comes after alpha, before gamma."))
    git(repo, "checkout", "-q", "main")
    edit_on_branch(repo, "main", "a.md", ALPHA.replace("mathematics", "physics and mathematics"))
    assert git(repo, "merge", "-m", "merge", "other", check=False).returncode == 1
    assert "kbuild.lock" in git(repo, "diff", "--name-only", "--diff-filter=U").stdout.split()
    return repo


def conflict_fix(root) -> list[str]:
    """The commands the build gives for the conflicted lock; check and doctor give the same."""
    from kbuild.engine.lockfile import conflict_remedy

    build = kbuild(root)
    assert build.exit_code == 2 and conflict_remedy() in build.output, build.output
    check = kbuild(root, "check", "--format", "github")
    assert check.exit_code == 2 and f"Fix: {conflict_remedy()}" in check.output, check.output
    assert any(f["fix"] == conflict_remedy() for f in json.loads(kbuild(root, "doctor", "--json").output)["findings"])
    return commands(conflict_remedy())


def test_merging_the_lock_as_advised_ends_the_conflict(conflicted):
    merge, build, _, _ = conflict_fix(conflicted)
    assert "staged" in follow(conflicted, merge)
    follow(conflicted, build)
    passes_check(conflicted)
    assert "kbuild.lock" not in git(conflicted, "diff", "--name-only", "--diff-filter=U").stdout.split()


def test_taking_a_side_of_the_lock_as_advised_ends_the_conflict(conflicted):
    _, _, take, force = conflict_fix(conflicted)
    follow(conflicted, take)
    follow(conflicted, force)
    passes_check(conflicted)


def test_merge_lock_with_nothing_conflicted_gives_advice_that_works(repo):
    from kbuild.engine.lockfile import take_a_side

    result = kbuild(repo, "merge-lock")
    assert result.exit_code == 1 and take_a_side() in result.output
    edit_by_hand(repo)  # what taking a side leaves: a page that is not what the lock says
    take, force = commands(take_a_side())
    follow(repo, take)
    follow(repo, force)
    passes_check(repo)
