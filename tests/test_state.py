"""The local state (.kbuild/state.db): what a build relies on finding again after it stops."""
from __future__ import annotations

import sqlite3
from pathlib import Path

from kbuild.engine.state import STATE_VERSION, FileRead, Memo, PartHash, State, damage


def memo(qid: str, reads: list[list[tuple[str, str]]], outputs: dict[str, str] | None = None) -> Memo:
    return Memo(qid, qid.split("(")[0], ["k"], "fp", reads, f"hash of {qid}", outputs or {}, {"grounding": True})


def test_a_committed_memo_is_read_back_whole_with_its_file_reads_typed(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    state = State(path)
    reads = [[[FileRead.of("a.txt"), "h1"]], [["words(\"a\")", "h2"], ["words(\"b\")", "h3"]]]
    saved = memo("count(\"a\")", reads, {"out/a.md": "h4"})  # type: ignore[arg-type]
    state.save_memo(saved, b"value")
    state.close()

    again = State(path)
    loaded = again.load_memos()
    assert loaded == {saved.id: saved}
    first_read = loaded[saved.id].deps[0][0][0]
    assert isinstance(first_read, FileRead) and first_read.path == "a.txt"
    assert not isinstance(loaded[saved.id].deps[1][0][0], FileRead)  # a query read stays a query id
    assert again.load_value(saved.id) == b"value"


def test_what_was_not_committed_is_gone_after_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    state = State(path)
    state.save_memo(memo("kept()", []), None)
    state.commit()
    state.save_memo(memo("lost()", []), None)
    state.db.close()  # the process dies: no commit

    assert set(State(path).load_memos()) == {"kept()"}


def test_a_state_of_another_version_is_dropped_and_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    state = State(path)
    state.save_memo(memo("old()", []), None)
    state.set_meta("lock_hash", "x")
    state.close()
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version={STATE_VERSION - 1}")
    db.commit()
    db.close()

    again = State(path)
    assert again.load_memos() == {}
    assert again.get_meta("lock_hash") is None
    again.save_memo(memo("new()", []), None)  # and it works as a new state
    assert set(again.load_memos()) == {"new()"}


def test_the_graph_read_backwards_follows_each_memo_as_it_is_replaced(tmp_path: Path) -> None:
    state = State(tmp_path / "state.db")
    state.save_memo(memo("a()", [[(FileRead.of("in.txt"), "h")]], {"out/a.md": "h"}), None)
    state.save_memo(memo("b()", [[("a()", "h"), (FileRead.of("in.txt"), "h")]]), None)
    assert state.readers([FileRead.of("in.txt")]) == {"a()", "b()"}
    assert state.readers(["a()"]) == {"b()"}
    assert state.writers(["out/a.md", "out/other.md"]) == {"out/a.md": {"a()"}}

    state.save_memo(memo("b()", [[(FileRead.of("other.txt"), "h")]]), None)  # b no longer reads a or in.txt
    assert state.readers([FileRead.of("in.txt")]) == {"a()"}
    assert state.readers(["a()"]) == set()

    state.delete_memos(["a()"])
    assert state.readers([FileRead.of("in.txt")]) == set()
    assert state.writers(["out/a.md"]) == {}


def test_replacing_every_memo_keeps_only_the_values_asked_for(tmp_path: Path) -> None:
    state = State(tmp_path / "state.db")
    for qid in ("a()", "b()", "gone()"):
        state.save_memo(memo(qid, []), qid.encode())
    state.replace_memos([memo("a()", []), memo("b()", [[("a()", "h")]]), memo("new()", [])], keep_values_of={"a()"})

    assert set(state.load_memos()) == {"a()", "b()", "new()"}
    assert state.load_value("a()") == b"a()"
    assert state.load_value("b()") is None  # its memo came from elsewhere (the lock): the value must be rebuilt
    assert state.load_value("gone()") is None
    assert state.readers(["a()"]) == {"b()"}


def test_many_memos_load_by_id_past_one_statement_s_parameter_limit(tmp_path: Path) -> None:
    state = State(tmp_path / "state.db")
    ids = [f"q({i})" for i in range(1200)]
    for qid in ids:
        state.save_memo(memo(qid, []), None)
    assert set(state.load_memos(ids[:1100] + ["missing()"])) == set(ids[:1100])
    assert len(state.readers(ids)) == 0


def test_values_load_together_whether_written_yet_or_not(tmp_path: Path) -> None:
    """A rule reading thousands of queries gets their values in one read, including those saved
    in this build and not yet written; a memo without a value (from the lock) has none."""
    state = State(tmp_path / "state.db")
    ids = [f"q({i})" for i in range(1200)]
    for qid in ids:
        state.save_memo(memo(qid, []), qid.encode())
    state.save_memo(memo("valueless()", []), None)
    state.commit()
    state.save_memo(memo("fresh()", []), b"fresh")
    state.save_memo(memo("q(0)", []), None)  # rebuilt in this build, its value not kept

    found = state.load_values([*ids, "fresh()", "valueless()", "missing()"])
    assert found == {**{qid: qid.encode() for qid in ids[1:]}, "fresh()": b"fresh"}


def test_file_stats_are_kept_and_forgotten(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    state = State(path)
    stats = {"a.txt": ((3, 100, 7), "ha"), "b.txt": ((4, 200, 8), "hb")}
    state.save_stats(stats)
    state.close()
    state = State(path)
    assert state.load_stats() == stats
    assert state.load_stat("b.txt") == stats["b.txt"] and state.load_stat("c.txt") is None
    state.save_stats({"b.txt": None})  # b.txt has no stat any more: forgotten
    assert state.load_stats() == {"a.txt": stats["a.txt"]}


def test_an_in_memory_state_leaves_no_file(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    state = State(None)
    state.save_memo(memo("a()", []), None)
    assert set(state.load_memos()) == {"a()"}
    state.close()
    assert list(tmp_path.iterdir()) == []


def test_damage_is_found_in_a_broken_state_and_not_in_a_sound_one(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    state = State(path)
    for i in range(300):
        state.save_memo(memo(f"q({i})", [[(FileRead.of(f"{i}.txt"), "h" * 32)]]), b"v" * 200)
    state.close()
    assert damage(path) is None

    data = bytearray(path.read_bytes())
    page = 4096
    data[3 * page:5 * page] = b"\xff" * (2 * page)  # two pages of the table and its indexes overwritten
    path.write_bytes(bytes(data))
    found = damage(path)
    assert found is not None and found != "ok"


def test_the_reach_answers_from_the_index_alone(tmp_path: Path) -> None:
    state = State(tmp_path / "state.db")
    state.save_memo(memo("b()", [[("a()", "h")]]), None)
    state.write_memos()
    for sql in ("SELECT reader FROM reads WHERE dep IN (?)", "SELECT reader FROM reads WHERE dep IN (?) AND part=''",
                "SELECT reader FROM reads WHERE dep=? AND part IN (?)", "SELECT DISTINCT dep FROM reads WHERE dep IN (?) AND part!=''"):
        plan = " ".join(str(row) for row in state.db.execute(f"EXPLAIN QUERY PLAN {sql}", ["a()"] * sql.count("?")))
        assert "COVERING INDEX reads_by_dep_part_reader" in plan, (sql, plan)


def test_the_reads_index_names_the_part_a_part_read_read(tmp_path: Path) -> None:
    state = State(tmp_path / "state.db")
    state.save_memo(memo("b()", [[("a()", PartHash.of("low", "h1")), ("a()", PartHash.of("high", "h2"))],
                                 [("c()", "h3")]]), None)
    state.save_memo(memo("d()", [[("a()", "h4")]]), None)
    assert state.whole_readers(["a()", "c()"]) == {"b()", "d()"}  # b reads c whole, d reads a whole
    assert state.part_readers("a()") == {"b()"} and state.part_readers("a()", ["high"]) == {"b()"}
    assert state.part_readers("a()", ["other"]) == set() and state.part_readers("c()") == set()
    assert state.read_in_parts(["a()", "c()"]) == {"a()"}


def test_what_lies_behind_a_gate_is_kept_until_who_reads_what_changes(tmp_path: Path) -> None:
    """The queries behind a part read, walked once, are taken from the state by the next build
    for as long as every query run again reads what it read; any other change of the reads
    makes the next build walk them again, so the set is never one of an older graph."""
    state = State(tmp_path / "state.db")
    state.save_memo(memo("b()", [[("a()", PartHash.of("p", "h1"))]]), None)
    state.save_memo(memo("c()", [[("b()", "h2")]]), None)
    assert state.behind("a()") == {"b()", "c()"}
    state.commit()
    walked = []
    real = state.readers
    state.readers = lambda deps: walked.append(deps) or real(deps)  # type: ignore[method-assign]

    state.save_memo(memo("b()", [[("a()", PartHash.of("p", "h9"))]]), None)  # run again: a new hash, the same read
    assert state.behind("a()") == {"b()", "c()"} and walked == []

    state.save_memo(memo("d()", [[("c()", "h3")]]), None)  # a new reader
    assert state.behind("a()") == {"b()", "c()", "d()"} and walked
    state.save_memo(memo("c()", [[(FileRead.of("x.txt"), "h")]]), None)  # c no longer reads b
    assert state.behind("a()") == {"b()"}
    state.save_memo(memo("c()", [[("b()", "h2")]]), None)
    assert state.behind("a()") == {"b()", "c()", "d()"}
    state.delete_memos(["d()"])
    assert state.behind("a()") == {"b()", "c()"}
    state.close()
    assert State(tmp_path / "state.db").behind("a()") == {"b()", "c()"}
