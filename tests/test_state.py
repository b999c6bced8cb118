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


def test_the_reach_answers_from_the_index_alone_in_a_state_made_before_it(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    state = State(path)
    state.save_memo(memo("b()", [[("a()", "h")]]), None)
    state.close()
    old = sqlite3.connect(path)  # a state from before parts: no part column, readers indexed by dep
    old.executescript("DROP INDEX reads_by_dep_reader_part; CREATE TABLE r AS SELECT dep, reader FROM reads; "
                      "DROP TABLE reads; ALTER TABLE r RENAME TO reads; CREATE INDEX reads_by_dep ON reads (dep);")
    old.close()
    state = State(path)
    plan = " ".join(str(row) for row in state.db.execute(
        "EXPLAIN QUERY PLAN SELECT dep, reader, part FROM reads WHERE dep IN (?)", ["a()"]))
    assert "COVERING INDEX reads_by_dep_reader_part" in plan, plan
    assert state.readers(["a()"]) == {"b()"}
    assert state.reads_of(["a()"]) == [("a()", "b()", "")]  # read as a whole read: a larger reach, never a wrong one


def test_the_reads_index_names_the_part_a_part_read_read(tmp_path: Path) -> None:
    state = State(tmp_path / "state.db")
    state.save_memo(memo("b()", [[("a()", PartHash.of("low", "h1")), ("a()", PartHash.of("high", "h2"))],
                                 [("c()", "h3")]]), None)
    assert sorted(state.reads_of(["a()", "c()"])) == [("a()", "b()", "high"), ("a()", "b()", "low"), ("c()", "b()", "")]
