"""The log of model calls that `kbuild logs` reads: what is kept, and what an older log becomes."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from kbuild.model.calllog import MIGRATIONS, CallLog


def record(log: CallLog, query: str, *, error: str | None = None, cost: float | None = None) -> None:
    log.record(task="reading", query=query, model="m", request={"messages": [{"role": "user", "content": query}]},
               response={"facts": []}, cache_hit=False, latency=0.25, tokens_in=10, tokens_out=5, cost=cost,
               error=error)


def test_a_call_is_kept_with_its_request_as_sent_and_read_back_newest_last(tmp_path: Path) -> None:
    log = CallLog(tmp_path / "logs.db")
    record(log, "chunk(a)", cost=0.002)
    record(log, "chunk(b)")
    record(log, "chunk(c)", error="did not fit its schema")
    rows = CallLog(tmp_path / "logs.db").rows(10)  # another process reading the same file
    assert [r.query for r in rows] == ["chunk(a)", "chunk(b)", "chunk(c)"]
    first = rows[0]
    assert json.loads(first.request) == {"messages": [{"role": "user", "content": "chunk(a)"}]}
    assert json.loads(first.response) == {"facts": []}
    assert (first.latency_ms, first.tokens_in, first.tokens_out, first.cost) == (250.0, 10, 5, 0.002)
    assert rows[1].cost is None  # no price known: not a cost of 0


def test_rows_filter_by_query_and_errors_and_keep_the_newest(tmp_path: Path) -> None:
    log = CallLog(tmp_path / "logs.db")
    for name in ("chunk(a)", "summary(a)", "chunk(b)"):
        record(log, name)
    record(log, "chunk(c)", error="timeout")
    assert [r.query for r in log.rows(2)] == ["chunk(b)", "chunk(c)"]
    assert [r.query for r in log.rows(10, query="chunk")] == ["chunk(a)", "chunk(b)", "chunk(c)"]
    assert [r.query for r in log.rows(10, errors=True)] == ["chunk(c)"]


def test_one_log_per_state_folder_in_a_process(tmp_path: Path) -> None:
    assert CallLog.for_root(tmp_path) is CallLog.for_root(tmp_path)
    assert CallLog.for_root(tmp_path) is not CallLog.for_root(tmp_path / "other")


def test_a_log_written_by_the_first_kbuild_stays_readable(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    db = sqlite3.connect(path)
    MIGRATIONS[0](db)
    db.execute("PRAGMA user_version = 1")
    db.execute("INSERT INTO calls (query, request, response, cost) VALUES (?, ?, ?, ?)",
               ("chunk(a)", json.dumps([{"role": "user", "content": "hi"}]), "{}", 0))
    db.commit()
    db.close()
    rows = CallLog(path).rows(10)
    assert json.loads(rows[0].request) == {"messages": [{"role": "user", "content": "hi"}]}
    assert rows[0].cost is None
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
