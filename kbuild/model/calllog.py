"""Every model call, logged where a user can query it: .kbuild/logs.db, read by `kbuild logs`.

The request exactly as it was sent (messages, response format with its schema, max_tokens),
the response, tokens, latency, cost (NULL when no price is known) and whether the cache
answered; also the replies that did not fit their schema, with why.

The database grows by migrations (as llm's migrations.py): a list of numbered functions, each
run once, in order, with the number of the last one kept in SQLite's user_version; so a log
written by an older kbuild stays readable. Add a migration at the end; never edit one that shipped.
"""
from __future__ import annotations

import datetime
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

from ..store.localstate import LocalState

Migration = Callable[[sqlite3.Connection], None]
MIGRATIONS: list[Migration] = []  # migration n is MIGRATIONS[n - 1]


def migration(step: Migration) -> Migration:
    MIGRATIONS.append(step)
    return step


@migration
def m001_calls(db: sqlite3.Connection) -> None:
    db.execute("""CREATE TABLE IF NOT EXISTS calls (
        id INTEGER PRIMARY KEY, at TEXT, task TEXT, query TEXT, model TEXT, cache_hit INTEGER,
        latency_ms REAL, tokens_in INTEGER, tokens_out INTEGER, cost REAL, error TEXT,
        request TEXT, response TEXT
    )""")


@migration
def m002_whole_request_and_unknown_cost(db: sqlite3.Connection) -> None:
    # `request` holds the whole body as sent, not only its messages; a cost of 0 logged for a
    # model without a price was never known
    db.execute("UPDATE calls SET request = json_object('messages', json(request)) WHERE json_type(request) = 'array'")
    db.execute("UPDATE calls SET cost = NULL WHERE cost = 0")


def migrate(db: sqlite3.Connection) -> None:
    """Run the migrations this log has not had yet, each in a transaction with its number."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    for number, step in enumerate(MIGRATIONS[version:], start=version + 1):
        db.execute("BEGIN")
        try:
            step(db)
            db.execute(f"PRAGMA user_version = {number}")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")


@dataclass(frozen=True)
class LoggedCall:
    id: int
    at: str
    task: str
    query: str
    model: str
    cache_hit: int
    latency_ms: float
    tokens_in: int
    tokens_out: int
    cost: float | None
    error: str | None
    request: str  # the body as sent, JSON
    response: str


COLUMNS = tuple(f.name for f in fields(LoggedCall))


class CallLog:
    _open: ClassVar[dict[Path, CallLog]] = {}

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        migrate(self.db)

    @classmethod
    def for_root(cls, state_dir: Path) -> CallLog:
        path = LocalState(state_dir).call_log
        if path not in cls._open:
            cls._open[path] = cls(path)
        return cls._open[path]

    def record(self, *, task: str, query: str, model: str, request: dict[str, Any], response: Any,
               cache_hit: bool, latency: float, tokens_in: int = 0, tokens_out: int = 0, cost: float | None = None,
               error: str | None = None) -> None:
        self.db.execute(
            "INSERT INTO calls (at, task, query, model, cache_hit, latency_ms, tokens_in, tokens_out, cost, error, "
            "request, response) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (datetime.datetime.now().isoformat(timespec="seconds"), task, query, model, int(cache_hit),
             round(latency * 1000, 1), tokens_in, tokens_out, cost, error, json.dumps(request),
             response if isinstance(response, str) else json.dumps(response)))

    def rows(self, limit: int, query: str | None = None, errors: bool = False) -> list[LoggedCall]:
        """The newest `limit` calls, oldest first: only those for queries whose id contains
        `query`, only failed replies with `errors`."""
        where, args = [], []
        if query:
            where.append("query LIKE ?")
            args.append(f"%{query}%")
        if errors:
            where.append("error IS NOT NULL")
        sql = f"SELECT {', '.join(COLUMNS)} FROM calls" + (" WHERE " + " AND ".join(where) if where else "")
        sql += " ORDER BY id DESC LIMIT ?"
        cursor = self.db.execute(sql, (*args, limit))
        return [LoggedCall(*row) for row in cursor][::-1]

    def remove(self, doomed: Callable[[str], bool]) -> int:
        """Delete every logged call whose request or response `doomed` says must go (a forgotten
        note's words), then vacuum, so that the file keeps no copy in its free pages."""
        ids = [row_id for row_id, request, response in self.db.execute("SELECT id, request, response FROM calls")
               if doomed(request or "") or doomed(response or "")]
        for row_id in ids:
            self.db.execute("DELETE FROM calls WHERE id = ?", (row_id,))
        if ids:
            self.db.execute("VACUUM")
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the write-ahead log held the old pages too
        return len(ids)

    def average_tokens(self) -> tuple[float, float] | None:
        """Tokens in and out of an average call the model answered (cache hits and failed replies
        left out), or None before the first; what an estimate of a build's cost scales."""
        row = self.db.execute(
            "SELECT AVG(tokens_in), AVG(tokens_out) FROM calls WHERE cache_hit = 0 AND error IS NULL").fetchone()
        return (row[0], row[1]) if row and row[0] is not None else None
