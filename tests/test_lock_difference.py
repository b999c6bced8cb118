"""A pull that brings a new lock: taken in by the entries that differ, not by reading the whole
lock and graph, with the same result as reading it whole."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from conftest import write

from kbuild.engine import Engine, rule
from kbuild.engine import files as engine_files
from kbuild.engine.lockfile import read_lock


@rule
async def source(ctx, i):
    return ctx.read_text(f"src/{i}.txt")


@rule
async def page(ctx, i):
    text = await ctx.query(source(i))
    ctx.write(f"out/{i}.md", f"# {i}\n\n{text}\n")
    return len(text)


def listed(ctx, sizes: list[int]) -> int:
    ctx.write("out/index.md", "".join(f"- {i}: {n}\n" for i, n in enumerate(sizes)))
    return sum(sizes)


@rule(uses=(listed,))
async def index(ctx, count):
    return listed(ctx, await ctx.query_all([page(i) for i in range(count)]))


RULES = [source, page, index]
COUNT = 12


def build(root: Path):
    report = Engine(root, RULES).build([index(COUNT)])
    assert report.ok, report.failed
    return report


@pytest.fixture(autouse=True)
def trusted_stats(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_files, "RACY_NS", 0)  # a test writes and builds within a second


@pytest.fixture
def stores(tmp_path: Path) -> tuple[Path, Path]:
    """Mine, built and settled, and a teammate's, cloned from it (the tree without .kbuild/)."""
    mine = tmp_path / "mine"
    for i in range(COUNT):
        write(mine, f"src/{i}.txt", f"source {i}")
    build(mine)
    build(mine)  # the no-op that records every stat
    team = tmp_path / "team"
    shutil.copytree(mine, team, ignore=shutil.ignore_patterns(".kbuild"))
    build(team)
    return mine, team


def pull(team: Path, mine: Path) -> None:
    """What a pull of the teammate's commit writes: the files that differ, the lock."""
    for path in sorted(p.relative_to(team).as_posix() for p in team.rglob("*")
                       if p.is_file() and ".kbuild" not in p.parts):
        if not (mine / path).exists() or (mine / path).read_bytes() != (team / path).read_bytes():
            write(mine, path, (team / path).read_text())
    for path in sorted(p.relative_to(mine).as_posix() for p in mine.rglob("*")
                       if p.is_file() and ".kbuild" not in p.parts):
        if not (team / path).exists():
            (mine / path).unlink()


def outputs(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in (root / "out").rglob("*.md")}


def test_a_pull_is_taken_in_by_what_differs_as_reading_it_whole_would(stores, graph_loads, tmp_path) -> None:
    mine, team = stores
    write(team, "src/3.txt", "source 3, edited by a teammate")
    assert build(team).executed
    pull(team, mine)
    whole = tmp_path / "whole"  # the same store and state, without the lock it was built with
    shutil.copytree(mine, whole)
    (whole / ".kbuild" / "lock.taken" / "kbuild.lock").unlink()
    report = build(mine)
    assert report.executed == [] and graph_loads == []
    assert (mine / "kbuild.lock").read_bytes() == (team / "kbuild.lock").read_bytes()
    assert Engine(mine, RULES).memos() == read_lock(mine / "kbuild.lock")
    loads = len(graph_loads)
    assert build(whole).executed == [] and len(graph_loads) == loads + 1  # read whole
    assert Engine(whole, RULES).memos() == Engine(mine, RULES).memos()
    # and each builds on from there as the other does
    for root in (mine, whole):
        write(root, "src/5.txt", "source 5, edited here")
    ran = [sorted(build(root).executed) for root in (mine, whole)]
    assert ran[0] == ran[1] and {'index(12)', 'page(5)', 'source(5)'} <= set(ran[0])
    assert outputs(mine) == outputs(whole) and "source 5, edited here" in outputs(mine)["out/5.md"]
    assert Engine(mine, RULES).memos() == read_lock(mine / "kbuild.lock") == read_lock(whole / "kbuild.lock")
    assert build(mine).executed == []


def test_a_pull_with_local_edits_builds_them_too(stores, graph_loads) -> None:
    mine, team = stores
    write(team, "src/3.txt", "source 3, edited by a teammate")
    build(team)
    pull(team, mine)
    write(mine, "src/7.txt", "source 7, edited here before the build")
    report = build(mine)
    assert {'index(12)', 'page(7)', 'source(7)'} <= set(report.executed) and not graph_loads
    assert "teammate" in (mine / "out/3.md").read_text() and "here" in (mine / "out/7.md").read_text()
    assert Engine(mine, RULES).memos() == read_lock(mine / "kbuild.lock")


def test_a_lock_whose_entries_disagree_is_read_whole(stores, graph_loads) -> None:
    """An entry that says it read another's value with another hash (a merge of two locks):
    the whole lock is read and checked, as before."""
    mine, team = stores
    write(team, "src/3.txt", "source 3, edited by a teammate")
    build(team)
    pull(team, mine)
    lock = mine / "kbuild.lock"
    entries = read_lock(lock)
    old_hash = read_lock(mine / ".kbuild" / "lock.taken" / "kbuild.lock")['source(3)'].hash
    text = lock.read_text()
    new_hash = entries['source(3)'].hash
    start = text.index('\n  "page(3)": {')
    end = text.index('\n  }', start)
    assert new_hash in text[start:end]
    write(mine, "kbuild.lock", text[:start] + text[start:end].replace(new_hash, old_hash) + text[end:])
    report = build(mine)
    assert graph_loads  # read whole (and checked: the entry that disagrees runs again)
    assert 'page(3)' in report.executed
    assert "teammate" in (mine / "out/3.md").read_text()
    assert Engine(mine, RULES).memos() == read_lock(mine / "kbuild.lock")


def test_a_lock_link_edited_in_place_is_not_trusted(stores, graph_loads) -> None:
    mine, team = stores
    write(team, "src/3.txt", "source 3, edited by a teammate")
    build(team)
    pull(team, mine)
    (mine / ".kbuild" / "lock.taken" / "kbuild.lock").write_text("not the lock this state describes")  # edited in place
    report = build(mine)
    assert graph_loads and report.executed == []
    assert Engine(mine, RULES).memos() == read_lock(mine / "kbuild.lock")


def test_an_entry_kept_as_it_was_under_a_changed_one_is_read_whole(stores, graph_loads) -> None:
    """An entry kept as it was under one that changed (a lock merged by git): read whole."""
    mine, team = stores
    write(team, "src/3.txt", "source 3, edited by a teammate")
    build(team)
    pull(team, mine)
    text = (mine / "kbuild.lock").read_text()
    old = (mine / ".kbuild" / "lock.taken" / "kbuild.lock").read_text()
    start, old_start = text.index('\n  "source(3)": {'), old.index('\n  "source(3)": {')
    end, old_end = text.index('\n  }', start), old.index('\n  }', old_start)
    # the source's entry as it was, the page's as the teammate left it: they disagree
    write(mine, "kbuild.lock", text[:start] + old[old_start:old_end] + text[end:])
    report = build(mine)
    assert graph_loads and report.executed
    assert "teammate" in (mine / "out/3.md").read_text()
    assert Engine(mine, RULES).memos() == read_lock(mine / "kbuild.lock")


@rule(parts=True)
async def table(ctx, count):
    """Every source's words, one part each, which each section reads alone."""
    return {str(i): ctx.read_text(f"src/{i}.txt") for i in range(count)}


@rule
async def section(ctx, i):
    words = await ctx.query_part(table(COUNT), str(i))
    ctx.write(f"out/{i}.md", f"# {i}\n\n{words}\n")
    return len(words)


@rule(uses=(listed,))
async def sections(ctx, count):
    return listed(ctx, await ctx.query_all([section(i) for i in range(count)]))


def test_a_pull_through_part_reads_is_taken_in_by_what_differs(tmp_path, graph_loads) -> None:
    """Reads of one part of a value hold while that part does: a pull that changes one part
    keeps the entries that read the others, and is not read whole for them."""
    part_rules = [table, section, sections]

    def build_parts(root: Path) -> list[str]:
        report = Engine(root, part_rules).build([sections(COUNT)])
        assert report.ok, report.failed
        return report.executed

    mine, team = tmp_path / "mine", tmp_path / "team"
    for i in range(COUNT):
        write(mine, f"src/{i}.txt", f"source {i}")
    build_parts(mine)
    build_parts(mine)
    shutil.copytree(mine, team, ignore=shutil.ignore_patterns(".kbuild"))
    build_parts(team)
    write(team, "src/3.txt", "source 3, edited by a teammate")
    assert "section(3)" in build_parts(team)
    pull(team, mine)
    loads = len(graph_loads)  # the builds above read the whole graph once each, being first
    assert build_parts(mine) == [] and len(graph_loads) == loads
    assert Engine(mine, part_rules).memos() == read_lock(mine / "kbuild.lock")
    assert "teammate" in (mine / "out/3.md").read_text()
    write(mine, "src/5.txt", "source 5, edited here")
    ran = set(build_parts(mine))  # and section(3), whose value came with the pull, not its bytes
    assert {"table(12)", "section(5)", "sections(12)"} <= ran
    assert not ran & {f"section({i})" for i in range(COUNT) if i not in (3, 5)}


def _memo(qid: str, n: int) -> "Memo":
    from kbuild.engine.state import Memo

    return Memo(qid, "r", [qid], "f", [[["file:src/a.txt", f"h{n}"]]], f"v{n}", {}, {}, {})


@given(st.dictionaries(st.sampled_from([f"q{i:03d}" for i in range(60)]), st.integers(0, 3), max_size=60),
       st.dictionaries(st.sampled_from([f"q{i:03d}" for i in range(60)]), st.integers(0, 3), max_size=60))
def test_the_entries_two_locks_differ_in_are_what_reading_both_whole_finds(was: dict, now: dict) -> None:
    from kbuild.engine.lockfile import entries_that_differ, lock_entries, render_lock

    old = render_lock({q: _memo(q, n) for q, n in was.items()})
    new = render_lock({q: _memo(q, n) for q, n in now.items()})
    a, b = lock_entries(old), lock_entries(new)
    assert a is not None and b is not None
    assert entries_that_differ(old, new) == ({q: e for q, e in b.items() if a.get(q) != e}, a.keys() - b.keys())


def test_a_lock_whose_entries_are_out_of_order_differs_in_nothing_that_can_be_trusted() -> None:
    from kbuild.engine.lockfile import FOOTER, HEADER, JOIN, entries_that_differ, lock_entries, render_lock

    memos = {f"q{i:03d}": _memo(f"q{i:03d}", 0) for i in range(40)}
    old = render_lock(memos)
    entries = list(lock_entries(old).values())
    entries[10], entries[30] = entries[30], entries[10]
    swapped = (HEADER + JOIN.join(e.decode() for e in entries) + FOOTER).encode()
    assert entries_that_differ(old, swapped) is None
    assert entries_that_differ(old, b"not a lock") is None
