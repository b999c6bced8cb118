"""The split lock: a lock file per shard of the graph (the first element of each query's key), so
a large store's lock stays far below what git hosts take and a build rewrites only the shards it
changed (docs/scale.md)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import kbuild, write

from kbuild.records import uptodate
from kbuild.engine import Engine, LockError, rule
from kbuild.engine import files as engine_files
from kbuild.engine.lockfile import lock_entries, read_lock, render_lock
from kbuild.engine.lockfiles import key_of, shard_of

PROJECTS = ("alpha", "beta", "gamma")


@rule
async def source(ctx, project, i):
    return ctx.read_text(f"src/{project}/{i}.txt")


@rule
async def page(ctx, project, i):
    text = await ctx.query(source(project, i))
    ctx.write(f"out/{project}/{i}.md", f"# {i}\n\n{text}\n")
    return len(text)


@rule
async def project_index(ctx, project, count):
    sizes = await ctx.query_all([page(project, i) for i in range(count)])
    ctx.write(f"out/{project}/index.md", "".join(f"- {i}: {n}\n" for i, n in enumerate(sizes)))
    return sum(sizes)


@rule
async def everything(ctx, projects):
    """Its key's first element is a list: its entry stays in kbuild.lock."""
    return sum(await ctx.query_all([project_index(p, 3) for p in projects]))


RULES = [source, page, project_index, everything]


@pytest.fixture(autouse=True)
def trusted_stats(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_files, "RACY_NS", 0)  # a test writes and builds within a second


def build(root: Path, split: bool = True, projects: tuple[str, ...] = PROJECTS):
    report = Engine(root, RULES, split_lock=split).build([everything(list(projects))])
    assert report.ok, report.failed
    return report


def lock_files(root: Path) -> dict[str, bytes]:
    found = {p.relative_to(root).as_posix(): p.read_bytes() for p in (root / "kbuild.lock.d").glob("*")}
    if (root / "kbuild.lock").exists():
        found["kbuild.lock"] = (root / "kbuild.lock").read_bytes()
    return found


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    for p in PROJECTS:
        for i in range(3):
            write(root, f"src/{p}/{i}.txt", f"{p} source {i}")
    build(root)
    return root


def test_each_project_has_its_lock_file_and_kbuild_lock_keeps_the_rest(store: Path) -> None:
    files = lock_files(store)
    assert set(files) == {"kbuild.lock", *(f"kbuild.lock.d/{p}.lock" for p in PROJECTS)}
    assert set(read_lock(store / "kbuild.lock")) == {'everything(["alpha","beta","gamma"])'}
    alpha = read_lock(store / "kbuild.lock.d/alpha.lock")
    assert len(alpha) == 7 and all(m.key[0] == "alpha" for m in alpha.values())
    # every file is a lock in the one format: sorted, merged by the same driver
    assert all(lock_entries(data) is not None for data in files.values())
    together = {q: m for f in files for q, m in read_lock(store / f).items()}
    assert Engine(store, RULES, split_lock=True).memos() == together


def test_an_edit_rewrites_only_its_projects_file(store: Path) -> None:
    before = {f: os.stat(store / f).st_ino for f in lock_files(store)}
    old = lock_files(store)
    write(store, "src/beta/1.txt", "beta source 1, edited")
    report = build(store)
    assert sorted(report.executed) == ['everything(["alpha","beta","gamma"])', 'page("beta",1)',
                                       'project_index("beta",3)', 'source("beta",1)']
    new = lock_files(store)
    changed = {f for f in new if new[f] != old[f]}
    assert changed == {"kbuild.lock.d/beta.lock", "kbuild.lock"}  # the root's entry read beta's index
    for f in ("kbuild.lock.d/alpha.lock", "kbuild.lock.d/gamma.lock"):
        assert os.stat(store / f).st_ino == before[f]  # not even written again
    # patched in place, the files are what rendering the whole graph writes
    engine = Engine(store, RULES, split_lock=True)
    assert {engine.lock.name(f): d for f, d in engine.lock.render(engine.memos()).items()} == new


def test_a_fresh_clone_reads_every_file(store: Path, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    shutil.copytree(store, clone, ignore=shutil.ignore_patterns(".kbuild"))
    engine = Engine(clone, RULES, split_lock=True)
    inspection = engine.inspect()
    assert inspection.stale == {} and not inspection.lock_misplaced
    assert inspection.memos == Engine(store, RULES, split_lock=True).memos()
    assert build(clone).executed == []
    assert lock_files(clone) == lock_files(store)


def test_turning_the_split_on_and_off_lays_the_lock_out_again_without_running_anything(store: Path) -> None:
    memos = Engine(store, RULES, split_lock=True).memos()
    assert build(store, split=False).executed == []
    assert lock_files(store) == {"kbuild.lock": render_lock(memos)}
    assert not list((store / "kbuild.lock.d").glob("*"))
    assert Engine(store, RULES, split_lock=False).inspect().lock_misplaced is False
    assert build(store, split=True).executed == []
    assert set(lock_files(store)) == {"kbuild.lock", *(f"kbuild.lock.d/{p}.lock" for p in PROJECTS)}
    assert Engine(store, RULES, split_lock=True).memos() == memos


def test_a_fresh_clone_sees_a_lock_laid_out_otherwise(store: Path, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    shutil.copytree(store, clone, ignore=shutil.ignore_patterns(".kbuild"))
    inspection = Engine(clone, RULES, split_lock=False).inspect()
    assert inspection.lock_misplaced and inspection.stale == {}


def test_a_project_no_longer_built_takes_its_file_with_it(store: Path) -> None:
    build(store, projects=("alpha", "beta"))
    assert set(lock_files(store)) == {"kbuild.lock", "kbuild.lock.d/alpha.lock", "kbuild.lock.d/beta.lock"}
    assert not (store / "out/gamma/index.md").exists()


def test_a_pull_is_taken_in_by_the_files_that_changed(store: Path, tmp_path: Path, graph_loads: list[int]) -> None:
    build(store)  # the no-op that records every stat
    team = tmp_path / "team"
    shutil.copytree(store, team, ignore=shutil.ignore_patterns(".kbuild"))
    build(team)
    write(team, "src/gamma/2.txt", "gamma source 2, edited by a teammate")
    build(team)
    for path in ["src/gamma/2.txt", "out/gamma/2.md", "out/gamma/index.md", *lock_files(team)]:  # the pull
        if (store / path).read_bytes() != (team / path).read_bytes():
            write(store, path, (team / path).read_text())
    graph_loads.clear()
    assert build(store).executed == [] and graph_loads == []  # nothing read whole, nothing run
    assert lock_files(store) == lock_files(team)
    assert Engine(store, RULES, split_lock=True).memos() == Engine(team, RULES, split_lock=True).memos()


def test_a_shards_folder_that_is_a_symlink_is_refused_and_nothing_written_through_it(store: Path,
                                                                                      tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    shutil.move(store / "kbuild.lock.d", elsewhere)
    (store / "kbuild.lock.d").symlink_to(elsewhere)
    before = {p.name: p.read_bytes() for p in elsewhere.iterdir()}
    write(store, "src/alpha/0.txt", "alpha source 0, edited")
    with pytest.raises(LockError, match="kbuild.lock.d is a symlink"):
        Engine(store, RULES, split_lock=True).build([everything(list(PROJECTS))])
    assert {p.name: p.read_bytes() for p in elsewhere.iterdir()} == before


def test_an_entry_in_two_files_is_one_clear_error(store: Path, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    shutil.copytree(store, clone, ignore=shutil.ignore_patterns(".kbuild"))
    shutil.copy(clone / "kbuild.lock.d/alpha.lock", clone / "kbuild.lock.d/copy.lock")
    with pytest.raises(LockError, match=r"kbuild.lock.d/copy.lock and kbuild.lock.d/alpha.lock both have the entry"):
        Engine(clone, RULES, split_lock=True).inspect()


def test_shard_names_are_plain_file_names() -> None:
    assert shard_of(["alpha", 1]) == "alpha"
    assert shard_of(["Alpha"]) == shard_of(["alpha"]) == "alpha"  # one file on a disk that ignores case
    for odd in ("../up", "a/b", ".hidden", "", "x" * 65, "naïve"):
        name = shard_of([odd])
        assert name is not None and name.startswith("_") and "/" not in name and name != shard_of(["other"])
    assert shard_of([]) is None and shard_of([1, "a"]) is None and shard_of([["a"]]) is None
    assert key_of('page("beta",1)') == ["beta", 1] and key_of("f()") == [] and key_of("not an id") is None


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
                          capture_output=True, text=True).stdout


def test_split_lock_in_the_kbuildfile_splits_the_stores_lock_and_check_holds_it_to_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(uptodate, "RACY_NS", 0)
    root = tmp_path / "repo"
    root.mkdir()
    assert kbuild(root, "init", str(root)).exit_code == 0
    for project in ("shop", "help"):
        (root / f"{project}.md").write_text(f"# {project}\n\nThe {project} opens at nine. It closes at six.\n")
        assert kbuild(root, "add", project, f"{project}.md").exit_code == 0
    assert kbuild(root).exit_code == 0
    assert not (root / "kbuild.lock.d").exists()
    kbuildfile = root / "Kbuildfile.py"
    kbuildfile.write_text(kbuildfile.read_text().replace("# split_lock = True", "split_lock = True"))
    result = kbuild(root, "check")
    assert result.exit_code == 1 and "not laid out as the Kbuildfile says" in result.output, result.output
    result = kbuild(root)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (root / "kbuild.lock.d").iterdir()) == ["help.lock", "shop.lock"]
    assert kbuild(root, "check").exit_code == 0
    assert kbuild(root).exit_code == 0  # records every stat, the shards' too
    assert uptodate.settled_queries(root, root / ".kbuild") is not None
    (root / "kbuild.lock.d/new.lock").write_bytes(render_lock({}))  # a pull that brought a project
    assert uptodate.settled_queries(root, root / ".kbuild") is None
    (root / "kbuild.lock.d/new.lock").unlink()
    doctor = kbuild(root, "doctor").output
    shards = sorted((root / "kbuild.lock.d").iterdir()) + [root / "kbuild.lock"]
    queries = sum(len(lock_entries(p.read_bytes()) or {}) for p in shards)
    assert f"kbuild.lock: {queries} queries in 3 files" in doctor and ".gitattributes does not merge" not in doctor
    attributes = root / ".gitattributes"
    attributes.write_text(attributes.read_text().replace("kbuild.lock.d/*.lock", "elsewhere/*.lock"))
    assert "add the line `kbuild.lock.d/*.lock linguist-generated merge=kbuild-lock`" in kbuild(root, "doctor").output
    attributes.write_text(attributes.read_text().replace("elsewhere/*.lock", "kbuild.lock.d/*.lock"))
    git(root, "init", "-q")
    git(root, "add", "-A")
    assert git(root, "check-attr", "merge", "kbuild.lock.d/shop.lock").endswith("merge: kbuild-lock\n")
    kbuildfile.write_text(kbuildfile.read_text().replace("split_lock = True", 'split_lock = "yes"'))
    result = kbuild(root)
    assert result.exit_code != 0 and "split_lock must be True or False" in result.output, result.output


def test_a_build_killed_between_two_lock_files_ends_as_a_whole_build_would(store: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The files are written one by one: a build stopped after the first leaves a lock that is
    part old, part new, and the next build ends with the values and lock of an uninterrupted one."""
    from kbuild.engine import build as build_module

    real, written = build_module.atomic_write, []

    def killed_after_one(path, data, durable=True):
        if written:
            raise KeyboardInterrupt
        written.append(path)
        real(path, data, durable)

    for p in ("alpha", "gamma"):
        write(store, f"src/{p}/0.txt", f"{p} source 0, edited")
    monkeypatch.setattr(build_module, "atomic_write", killed_after_one)
    with pytest.raises(KeyboardInterrupt):
        build(store)
    monkeypatch.setattr(build_module, "atomic_write", real)
    assert len(written) == 1
    build(store)
    engine = Engine(store, RULES, split_lock=True)
    memos = engine.memos()
    assert {engine.lock.name(f): d for f, d in engine.lock.render(memos).items()} == lock_files(store)
    assert engine.value(everything(list(PROJECTS))) == sum(len(f"{p} source {i}") + (8 if i == 0 and p != "beta" else 0)
                                                          for p in PROJECTS for i in range(3))
    assert (store / "out/gamma/0.md").read_text() == "# 0\n\ngamma source 0, edited\n"


def test_a_shard_entry_naming_an_output_outside_is_refused_by_its_file(store: Path, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    shutil.copytree(store, clone, ignore=shutil.ignore_patterns(".kbuild"))
    shard = clone / "kbuild.lock.d/alpha.lock"
    shard.write_text(shard.read_text().replace('"out/alpha/0.md"', '"../planted.md"'))
    report = Engine(clone, RULES, split_lock=True).build([everything(list(PROJECTS))])
    why = report.failed['page("alpha",0)']
    assert why.startswith("kbuild.lock.d/alpha.lock: the entry page(\"alpha\",0) was ignored"), why
    assert not (tmp_path / "planted.md").exists()
    assert '"../planted.md"' not in shard.read_text()  # written again without it


@pytest.mark.timeout(60)
def test_a_pipe_planted_as_a_shard_is_one_clear_error_not_a_hang(store: Path, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    shutil.copytree(store, clone, ignore=shutil.ignore_patterns(".kbuild"))
    os.mkfifo(clone / "kbuild.lock.d/pipe.lock")
    with pytest.raises(LockError, match=r"kbuild.lock.d/pipe.lock is not a regular file"):
        Engine(clone, RULES, split_lock=True).inspect()


def test_doctor_says_when_the_lock_nears_what_git_hosts_take(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kbuild.services import doctor

    root = tmp_path / "repo"
    root.mkdir()
    assert kbuild(root, "init", str(root)).exit_code == 0
    (root / "shop.md").write_text("# shop\n\nThe shop opens at nine. It closes at six.\n")
    assert kbuild(root, "add", "shop", "shop.md").exit_code == 0
    assert kbuild(root).exit_code == 0
    assert "GitHub refuses" not in kbuild(root, "doctor").output
    monkeypatch.setattr(doctor, "LOCK_WARN_BYTES", 1000)
    output = kbuild(root, "doctor").output
    assert "WARN  kbuild.lock is 0 MB; GitHub refuses a file over 100 MiB" in output
    assert "set `split_lock = True` in Kbuildfile.py" in output
