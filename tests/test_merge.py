"""Merges that resolve themselves: two branches that each rebuilt the store merge through
kbuild's merge drivers, and one `kbuild` after the merge ends as a clean build of the merged
sources would (same pages, same lock). In a real git repository, with the drivers `kbuild init`
registers."""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import kbuild
from kbuild.engine.lockmerge import STALE_FINGERPRINT, NotALock, merge_locks

ALPHA = "# Alpha\n\nAlpha is the first letter. It has many uses in mathematics.\n"
BETA = "# Beta\n\nBeta is the second letter. It follows alpha.\n"


# git's own folder and the system's, none with a `kbuild` in it: the drivers must run from a
# PATH without the virtual environment, as an editor's or a GUI's git client has
PLAIN_PATH = os.pathsep.join(p for p in dict.fromkeys([os.path.dirname(shutil.which("git") or "/usr/bin/git"),
                                                        "/usr/bin", "/bin"])
                             if not os.path.exists(os.path.join(p, "kbuild")))


def git(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": PLAIN_PATH}
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


def clean_build(root: Path, elsewhere: Path, sources: tuple[str, ...] = ("a.md", "b.md")) -> dict[str, bytes]:
    """The store a first build of `root`'s sources makes, in a fresh folder."""
    elsewhere.mkdir()
    for name in ("Kbuildfile.py", *sources):
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
    assert git(repo, "config", "merge.kbuild-generated.driver").stdout.strip() == "true"


def test_init_registers_the_drivers_with_the_kbuild_that_ran_it(repo):
    """git runs a driver through the shell of whatever client merges: an absolute path, not a
    `kbuild` only the virtual environment's PATH finds."""
    run = f"{shlex.quote(sys.executable)} -m kbuild"
    assert git(repo, "config", "merge.kbuild-lock.driver").stdout.strip() == f"{run} merge-lock %O %A %B"
    assert git(repo, "config", "merge.kbuild-sources.driver").stdout.strip() == f"{run} merge-sources %O %A %B %P"
    assert git(repo, "check-attr", "merge", "--", "kb/p/sources.yml").stdout.strip().endswith("kbuild-sources")


def test_init_outside_git_says_how_to_set_the_drivers_up(tmp_path):
    if subprocess.run(["git", "-C", str(tmp_path), "rev-parse"], capture_output=True).returncode == 0:
        pytest.skip("the temporary folder is inside a git repository")
    out = ok(tmp_path, "init", str(tmp_path))
    assert "not a git repository" in out
    command = out.split("run: ", 1)[1].splitlines()[0]
    git(tmp_path, "init", "-q")
    subprocess.run(command, shell=True, cwd=tmp_path, check=True)  # as the person pastes it
    driver = git(tmp_path, "config", "merge.kbuild-lock.driver").stdout.strip()
    assert driver == f"{shlex.quote(sys.executable)} -m kbuild merge-lock %O %A %B"
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


# sources.yml: merged entry by entry

GAMMA = "# Gamma\n\nGamma is the third letter. It follows beta in the alphabet.\n"
DELTA = "# Delta\n\nDelta is the fourth letter. Its capital is a triangle.\n"


def add_on_branch(root: Path, branch: str, name: str, text: str, comment: str) -> None:
    """On `branch`, `kbuild add` a source with a person's comment on its entry, build, commit."""
    git(root, "checkout", "-q", "-B", branch)
    (root / name).write_text(text)
    ok(root, "add", "p", name)
    listing = root / "kb" / "p" / "sources.yml"
    listing.write_text(listing.read_text().replace(f"path: {name}\n", f"path: {name}  # {comment}\n"))
    ok(root)
    git(root, "add", "-A")
    git(root, "commit", "-qm", f"add {name}")


def test_two_branches_each_adding_a_source_merge_by_themselves(repo, tmp_path):
    add_on_branch(repo, "other", "c.md", GAMMA, "gamma, from the other branch")
    git(repo, "checkout", "-q", "main")
    add_on_branch(repo, "main", "d.md", DELTA, "delta, from main")
    merged = git(repo, "merge", "-m", "merge", "other", check=False)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert "sources.yml merged: 1 entries from theirs" in merged.stdout + merged.stderr
    listing = (repo / "kb" / "p" / "sources.yml").read_text()
    assert "# gamma, from the other branch" in listing and "# delta, from main" in listing
    assert "# Sources of this project." in listing  # the file's own comments too
    from kbuild.store.sources import parse

    assert parse(listing.encode(), "sources.yml").ids == ["a", "b", "d", "c"]
    ok(repo)
    assert generated(repo) == clean_build(repo, tmp_path / "clean", ("a.md", "b.md", "c.md", "d.md"))
    assert "ok:" in ok(repo, "check")


def test_after_a_merge_check_names_the_merge_not_the_kbuildfile(repo):
    """Both branches rebuilt the project's index: the merged lock marks it to run again, and the
    check says so, rather than blaming a rule nobody changed."""
    add_on_branch(repo, "other", "c.md", GAMMA, "gamma")
    git(repo, "checkout", "-q", "main")
    add_on_branch(repo, "main", "d.md", DELTA, "delta")
    git(repo, "merge", "-m", "merge", "other")
    result = kbuild(repo, "check", "--format", "github")
    assert result.exit_code == 1
    annotations = [line for line in result.output.splitlines() if line.startswith("::error")]
    assert annotations and all("Kbuildfile.py" not in a and "rule " not in a for a in annotations), result.output
    merge = [a for a in annotations if "title=Changed on both branches of a merge" in a]
    assert len(merge) == 1 and "file=kbuild.lock" in merge[0]
    assert "both branches of a merge changed" in merge[0] and "Fix: kbuild, then commit" in merge[0]
    text = kbuild(repo, "check").output
    assert "rule " not in text and "both branches of a merge changed" in text


def test_both_branches_changing_one_source_entry_is_a_conflict(repo):
    listing = repo / "kb" / "p" / "sources.yml"
    git(repo, "checkout", "-q", "-B", "other")
    listing.write_text(listing.read_text().replace("path: a.md", "path: a.md\n    title: Alpha"))
    git(repo, "commit", "-qam", "title alpha")
    git(repo, "checkout", "-q", "main")
    listing.write_text(listing.read_text().replace("path: a.md", "path: a.md\n    title: The letter alpha"))
    git(repo, "commit", "-qam", "another title")
    merged = git(repo, "merge", "-m", "merge", "other", check=False)
    assert merged.returncode == 1
    assert "source a changed on both sides" in merged.stdout + merged.stderr
    assert git(repo, "diff", "--name-only", "--diff-filter=U").stdout.split() == ["kb/p/sources.yml"]
    text = listing.read_text()
    assert "<<<<<<< ours\n" in text and "title: Alpha" in text and "title: The letter alpha" in text
    assert text.count("id: b") == 1  # only the entry in conflict is shown twice


def test_doctor_in_a_fresh_clone_gives_the_command_that_registers_the_drivers(repo, tmp_path):
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    found = {f["what"]: f for f in json.loads(ok(clone, "doctor", "--json"))["findings"]}
    drivers = [f for what, f in found.items() if "merge drivers" in what]
    assert len(drivers) == 1 and drivers[0]["status"] == "WARN" and "not registered" in drivers[0]["what"]
    subprocess.run(drivers[0]["fix"], shell=True, cwd=clone, check=True, env={**os.environ, "PATH": PLAIN_PATH})
    found = {f["what"]: f for f in json.loads(ok(clone, "doctor", "--json"))["findings"]}
    assert [f["status"] for what, f in found.items() if "merge drivers" in what] == ["PASS"]
    # and the clone merges as the repository that ran `kbuild init` does
    add_on_branch(clone, "other", "c.md", GAMMA, "gamma")
    git(clone, "checkout", "-q", "main")
    add_on_branch(clone, "main", "d.md", DELTA, "delta")
    assert git(clone, "merge", "-m", "merge", "other", check=False).returncode == 0


def test_doctor_outside_git_says_nothing_of_merge_drivers(tmp_path):
    if subprocess.run(["git", "-C", str(tmp_path), "rev-parse"], capture_output=True).returncode == 0:
        pytest.skip("the temporary folder is inside a git repository")
    ok(tmp_path, "init", str(tmp_path))
    assert "merge drivers" not in kbuild(tmp_path, "doctor").output


LISTING = """# Sources of this project.
kind: docs   # docs, or research
sources:
  - id: a
    path: a.md
  - id: b
    path: b.md  # b
"""


def test_the_sources_merge_takes_each_change_from_the_side_that_made_it():
    from kbuild.store.sourcesmerge import merge_listings

    ours = LISTING.replace("path: a.md", "path: a.md\n    title: Alpha") + "  # why d\n  - id: d\n    path: d.md\n"
    theirs = (LISTING.replace("kind: docs", "kind: research").replace("  - id: b\n    path: b.md  # b\n", "")
              + "  # why c\n  - id: c\n    path: c.md  # c\n")
    merged = merge_listings(LISTING, ours, theirs)
    assert merged.conflicts == [] and merged.from_theirs == ["setting kind", "source b", "source c"]
    assert merged.text == ("# Sources of this project.\nkind: research   # docs, or research\nsources:\n"
                           "  - id: a\n    path: a.md\n    title: Alpha\n  # why d\n  - id: d\n    path: d.md\n"
                           "  # why c\n  - id: c\n    path: c.md  # c\n")


def test_the_sources_merge_conflicts_only_on_an_entry_both_sides_changed():
    from kbuild.store.sourcesmerge import merge_listings

    ours = LISTING.replace("path: b.md", "url: https://example.org/b") + "  - id: d\n    path: d.md\n"
    theirs = LISTING.replace("path: b.md", "path: docs/b.md") + "  - id: d\n    path: d.md\n"
    merged = merge_listings(LISTING, ours, theirs)
    assert merged.conflicts == ["source b"]
    assert ("<<<<<<< ours\n  - id: b\n    url: https://example.org/b  # b\n=======\n  - id: b\n"
            "    path: docs/b.md  # b\n>>>>>>> theirs\n") in merged.text
    assert merged.text.count("id: d") == 1  # added the same on both sides: no conflict


def test_the_sources_merge_of_a_list_written_by_hand_in_flow_style():
    from kbuild.store.sourcesmerge import merge_listings

    merged = merge_listings("kind: docs\nsources: []\n", "kind: docs\nsources: [{id: a, path: a.md}]\n",
                            "kind: docs\nsources:\n  - id: c\n    path: c.md\n")
    from kbuild.store.sources import parse

    assert merged.conflicts == [] and parse(merged.text.encode(), "sources.yml").ids == ["a", "c"]
