"""Every model call, logged where a user can query it: .kbuild/logs.db, read by `kbuild logs`.

The request exactly as it was sent (messages, response format with its schema, max_tokens),
the response, tokens, latency, cost (NULL when no price is known) and whether the cache
answered; also the replies that did not fit their schema, with why. The database grows by
migrations, numbered by SQLite's user_version, so a log written by an older kbuild stays readable.
"""
from __future__ import annotations

import datetime
import json
import sqlite3
from pathlib import Path
from typing import Any, ClassVar

MIGRATIONS = [
    # 1: the first table
    """CREATE TABLE IF NOT EXISTS calls (
        id INTEGER PRIMARY KEY, at TEXT, task TEXT, query TEXT, model TEXT, cache_hit INTEGER,
        latency_ms REAL, tokens_in INTEGER, tokens_out INTEGER, cost REAL, error TEXT,
        request TEXT, response TEXT
    );""",
    # 2: `request` holds the whole body as sent, not only its messages; a cost of 0 logged for a
    # model without a price was never known
    """UPDATE calls SET request = json_object('messages', json(request)) WHERE json_type(request) = 'array';
       UPDATE calls SET cost = NULL WHERE cost = 0;""",
]
COLUMNS = ("id", "at", "task", "query", "model", "cache_hit", "latency_ms", "tokens_in", "tokens_out",
           "cost", "error", "request", "response")


class CallLog:
    _open: ClassVar[dict[Path, CallLog]] = {}

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.migrate()

    def migrate(self) -> None:
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
            self.db.executescript(f"BEGIN; {script} PRAGMA user_version = {number}; COMMIT;")

    @classmethod
    def for_root(cls, state_dir: Path) -> CallLog:
        path = state_dir / "logs.db"
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

    def rows(self, limit: int, query: str | None = None, errors: bool = False) -> list[dict[str, Any]]:
        where, args = [], []
        if query:
            where.append("query LIKE ?")
            args.append(f"%{query}%")
        if errors:
            where.append("error IS NOT NULL")
        sql = "SELECT * FROM calls" + (" WHERE " + " AND ".join(where) if where else "")
        sql += " ORDER BY id DESC LIMIT ?"
        cursor = self.db.execute(sql, (*args, limit))
        return [dict(zip(COLUMNS, row)) for row in cursor][::-1]
