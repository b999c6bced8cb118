"""Local state in .kbuild/state.db: the memo of every query, the stat cache, a little metadata.

SQLite gives atomic commits, so a crash at any point leaves the state of the last commit.
Everything here can be rebuilt: from the lock (the graph without values) and by running rules.
"""
from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .files import StatEntry
from .hashing import canonical_json

STATE_VERSION = 5
# memos are written a batch at a time, so the last commit does not hold up the build's end
WRITE_BATCH = 64


class FileRead(str):
    """A recorded read of a file; any other read is of a query, by its id (a plain str).

    It is the string the state, the lock and the graph name the read by: its path behind
    "file:", so that a file and a query can never have the same name. Reads loaded from either
    are typed by `typed_reads`, so nothing else looks at the prefix."""

    __slots__ = ()
    PREFIX = "file:"

    @classmethod
    def of(cls, path: str) -> FileRead:
        return cls(cls.PREFIX + path)

    @property
    def path(self) -> str:
        return self[len(FileRead.PREFIX):]


class PartHash(str):
    """What a read of one part of a query's value recorded (`ctx.query_part`): the part's name
    and the hash of that part alone, so the read still holds when the rest of the value changes.
    Any other read of a query records the hash of its whole value (a plain str)."""

    __slots__ = ()
    MARK = "@"  # never in a hash, which is hex or a word (failed, absent)

    @classmethod
    def of(cls, part: str, digest: str) -> PartHash:
        return cls(f"{digest}{cls.MARK}{part}")

    @staticmethod
    def part_of(recorded: str) -> str | None:
        digest, mark, part = recorded.partition(PartHash.MARK)
        return part if mark else None


DepGroup = list[tuple[str, str]]  # (FileRead or query id, hash read); one group is read concurrently


def typed_reads(deps: list[list[DepGroup]]) -> list[list[DepGroup]]:
    """The memos' `deps` as JSON left them, with each file read made a FileRead (in place: a
    graph of a million reads is loaded without copying it)."""
    prefix = FileRead.PREFIX
    for memo_deps in deps:
        for group in memo_deps:
            for read in group:
                if read[0].startswith(prefix):
                    read[0] = FileRead(read[0])  # type: ignore[index]
    return deps

SCHEMA = """
CREATE TABLE IF NOT EXISTS memo (
    id TEXT PRIMARY KEY, rule TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL,
    deps TEXT NOT NULL, hash TEXT NOT NULL, outputs TEXT NOT NULL, notes TEXT NOT NULL, parts TEXT NOT NULL,
    value BLOB
);
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, ino INTEGER, hash TEXT
);
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT);
-- The graph read backwards, so a build after a few changes finds what they reach without
-- loading the graph: who reads each query or file, who writes each output.
-- `part` names the part of dep's value a part read read ('' for a whole read), so the reach
-- can stop where only an unchanged part was read (graphload.py).
-- Looked up by dep, whole reads apart from part reads: the index holds the part and the reader,
-- so the reach is answered from the index alone.
CREATE TABLE IF NOT EXISTS reads (dep TEXT NOT NULL, reader TEXT NOT NULL, part TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS reads_by_dep_part_reader ON reads (dep, part, reader);
CREATE INDEX IF NOT EXISTS reads_by_reader ON reads (reader);
CREATE TABLE IF NOT EXISTS writes (path TEXT NOT NULL, writer TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS writes_by_path ON writes (path);
CREATE INDEX IF NOT EXISTS writes_by_writer ON writes (writer);
-- What lies behind a gate (graphload.py): every query that reads a part of `gate`, or reads one
-- that does, directly or not, as a JSON list. Emptied whenever who reads what changes.
CREATE TABLE IF NOT EXISTS behind (gate TEXT PRIMARY KEY, readers TEXT NOT NULL);
"""


@dataclass(slots=True)
class Memo:
    """What one query read, in order, with the hash of each read; its own hash; its files."""

    id: str
    rule: str
    key: list[object]
    fingerprint: str
    deps: list[DepGroup]
    hash: str
    outputs: dict[str, str] = field(default_factory=dict)
    notes: dict[str, object] = field(default_factory=dict)  # what a rule recorded about its output
    parts: dict[str, str] = field(default_factory=dict)  # the hash of each part of its value, for part reads

    def to_row(self) -> tuple[str, str, str, str, str, str, str, str, str]:
        # the rows are only read back by json.loads, so canonical_json's one encoder writes them:
        # json.dumps with arguments made an encoder per call: the rows of 35,000 memos took 0.36 s
        # that way, 0.26 s this way (python benchmarks/lock_render.py --against an older install)
        spell = canonical_json
        return (
            self.id,
            self.rule,
            spell(self.key),
            self.fingerprint,
            spell(self.deps),
            self.hash,
            spell(self.outputs) if self.outputs else "{}",
            spell(self.notes) if self.notes else "{}",
            spell(self.parts) if self.parts else "{}",
        )


class State:
    def __init__(self, path: Path | None) -> None:
        """`None` keeps the state in memory (read-only commands on a fresh clone)."""
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(path) if path else ":memory:", isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        if version != STATE_VERSION:  # local state is rebuildable: an older layout is dropped, not migrated
            self.db.executescript("DROP TABLE IF EXISTS memo; DROP TABLE IF EXISTS files; DROP TABLE IF EXISTS meta; "
                                  "DROP TABLE IF EXISTS reads; DROP TABLE IF EXISTS writes; DROP TABLE IF EXISTS behind;")
            self.db.execute(f"PRAGMA user_version={STATE_VERSION}")
        self.db.executescript(SCHEMA)
        self.db.execute("BEGIN")
        # Memos saved and not yet written, written together (WRITE_BATCH) before anything reads
        # the database or commits. They are in the open transaction either way (a crash loses
        # both alike), and five statements a memo were most of a cold build's time in the event
        # loop: 0.2 of 0.64 ms a query at 16 calls in flight (benchmarks/scheduling.py).
        self._unwritten: dict[str, tuple[Memo, bytes | None]] = {}

    def close(self) -> None:
        self.commit()
        self.db.execute("COMMIT")
        self.db.close()

    def commit(self) -> None:
        self.write_memos()
        # SQLite rolls the whole transaction back itself after some errors (a full disk): what it
        # held is lost, as in a crash, and COMMIT would fail with "no transaction is active"
        if self.db.in_transaction:
            self.db.execute("COMMIT")
        self.db.execute("BEGIN")

    def rollback(self) -> None:
        """Forget what was saved since the last commit."""
        self._unwritten.clear()
        self.db.execute("ROLLBACK")

    def load_memos(self, ids: Iterable[str] | None = None) -> dict[str, Memo]:
        """Every memo, or those of `ids` that exist."""
        self.write_memos()
        columns = "SELECT id, rule, key, fingerprint, deps, hash, outputs, notes, parts FROM memo"
        if ids is None:
            rows = self.db.execute(columns).fetchall()
        else:
            rows = [row for batch in _batches(ids) for row in
                    self.db.execute(f"{columns} WHERE id IN ({','.join('?' * len(batch))})", batch)]
        if not rows:
            return {}
        ids, rules, keys, fingerprints, deps, hashes, outputs, notes, parts = zip(*rows)
        # One json.loads over all rows instead of one per row: the per-call overhead was most
        # of the time of a no-op build.
        keys, deps, outputs, notes, parts = (json.loads("[" + ",".join(c) + "]")
                                             for c in (keys, deps, outputs, notes, parts))
        typed_reads(deps)
        return {
            i: Memo(i, r, k, f, d, h, o, n, p)
            for i, r, k, f, d, h, o, n, p in zip(ids, rules, keys, fingerprints, deps, hashes, outputs, notes, parts)
        }

    def readers(self, deps: Iterable[str]) -> set[str]:
        """The queries whose memos read any of `deps` (query ids, or FileReads)."""
        self.write_memos()
        return {r for batch in _batches(deps) for (r,) in
                self.db.execute(f"SELECT reader FROM reads WHERE dep IN ({','.join('?' * len(batch))})", batch)}

    def whole_readers(self, deps: Iterable[str]) -> set[str]:
        """The queries whose memos read the whole value of any of `deps`."""
        self.write_memos()
        return {r for batch in _batches(deps) for (r,) in self.db.execute(
            f"SELECT reader FROM reads WHERE dep IN ({','.join('?' * len(batch))}) AND part=''", batch)}

    def part_readers(self, dep: str, parts: Iterable[str] | None = None) -> set[str]:
        """The queries whose memos read one of `parts` of `dep`'s value (any part, if None)."""
        self.write_memos()
        if parts is None:
            return {r for (r,) in self.db.execute("SELECT reader FROM reads WHERE dep=? AND part!=''", (dep,))}
        return {r for batch in _batches(parts) for (r,) in self.db.execute(
            f"SELECT reader FROM reads WHERE dep=? AND part IN ({','.join('?' * len(batch))})", [dep, *batch])}

    def read_in_parts(self, deps: Iterable[str]) -> set[str]:
        """Those of `deps` that some memo reads a part of."""
        self.write_memos()
        return {d for batch in _batches(deps) for (d,) in self.db.execute(
            f"SELECT DISTINCT dep FROM reads WHERE dep IN ({','.join('?' * len(batch))}) AND part!=''", batch)}

    def behind(self, gate: str) -> set[str]:
        """Every query that reads a part of `gate`'s value, or reads one that does, directly or
        not. Kept until who reads what changes: a one-sentence edit changes what queries read,
        not who reads whom, so the next edit of that input takes the set from here instead of
        walking thousands of readers again (`python benchmarks/edit_time.py`)."""
        self.write_memos()
        row = self.db.execute("SELECT readers FROM behind WHERE gate=?", (gate,)).fetchone()
        if row is not None:
            return set(json.loads(row[0]))
        seen = self.part_readers(gate)
        frontier = set(seen)
        while frontier:
            frontier = self.readers(frontier) - seen
            seen |= frontier
        self.db.execute("INSERT INTO behind VALUES (?,?)", (gate, json.dumps(list(seen))))
        return seen

    def writers(self, paths: Iterable[str]) -> dict[str, set[str]]:
        """The queries whose memos write each of `paths`."""
        self.write_memos()
        found: dict[str, set[str]] = {}
        for batch in _batches(paths):
            for path, writer in self.db.execute(
                    f"SELECT path, writer FROM writes WHERE path IN ({','.join('?' * len(batch))})", batch):
                found.setdefault(path, set()).add(writer)
        return found

    def _index(self, memos: list[Memo]) -> None:
        """Record whom each memo reads and what it writes. Only the memos whose reads differ from
        their recorded ones are written again (a query run again mostly reads what it read), and
        a difference empties `behind`, which was walked over the reads as they were."""
        part_of = PartHash.part_of
        reads = {m.id: {(d, part_of(h) or "") for d, h in flat(m.deps)} for m in memos}
        recorded: dict[str, set[tuple[str, str]]] = {}
        for batch in _batches(reads):
            for reader, dep, part in self.db.execute(
                    f"SELECT reader, dep, part FROM reads WHERE reader IN ({','.join('?' * len(batch))})", batch):
                recorded.setdefault(reader, set()).add((dep, part))
        changed = [(qid,) for qid, read in reads.items() if read != recorded.get(qid, set())]
        if changed:
            self.db.execute("DELETE FROM behind")
            self.db.executemany("DELETE FROM reads WHERE reader=?", changed)
            self.db.executemany("INSERT INTO reads VALUES (?,?,?)",
                                ((d, qid, part) for (qid,) in changed for d, part in reads[qid]))
        ids = [(m.id,) for m in memos]
        self.db.executemany("DELETE FROM writes WHERE writer=?", ids)
        self.db.executemany("INSERT INTO writes VALUES (?,?)", ((p, m.id) for m in memos for p in m.outputs))

    def save_memo(self, memo: Memo, value: bytes | None) -> None:
        self._unwritten[memo.id] = (memo, value)
        if len(self._unwritten) >= WRITE_BATCH:
            self.write_memos()

    def write_memos(self) -> None:
        """Write the memos saved since the last time, in one statement per table."""
        if not self._unwritten:
            return
        saved = list(self._unwritten.values())
        self._unwritten.clear()
        self.db.executemany("INSERT OR REPLACE INTO memo VALUES (?,?,?,?,?,?,?,?,?,?)",
                            ((*memo.to_row(), value) for memo, value in saved))
        self._index([memo for memo, _ in saved])

    def replace_memos(self, memos: Iterable[Memo], keep_values_of: set[str]) -> None:
        """Make the memo table exactly `memos`, keeping stored values only for `keep_values_of`."""
        self.write_memos()
        memos = list(memos)
        wanted = {m.id for m in memos}
        stale = [(i,) for (i,) in self.db.execute("SELECT id FROM memo") if i not in wanted]
        self.delete_memos(i for (i,) in stale)
        replaced = [m for m in memos if m.id not in keep_values_of]
        self.db.executemany("INSERT OR REPLACE INTO memo VALUES (?,?,?,?,?,?,?,?,?,NULL)", (m.to_row() for m in replaced))
        self._index(replaced)

    def delete_memos(self, ids: Iterable[str]) -> None:
        self.write_memos()
        ids = list(ids)
        if ids:
            self.db.execute("DELETE FROM behind")
        for table, column in (("memo", "id"), ("reads", "reader"), ("writes", "writer")):
            self.db.executemany(f"DELETE FROM {table} WHERE {column}=?", ((i,) for i in ids))

    def load_value(self, query_id: str) -> bytes | None:
        return self.load_values([query_id]).get(query_id)

    def load_values(self, query_ids: Iterable[str]) -> dict[str, bytes]:
        """The stored values of those of `query_ids` that have one: one SELECT per batch, where a
        rule reading thousands of queries made one each."""
        ids = list(query_ids)
        unwritten = {i: self._unwritten[i][1] for i in ids if i in self._unwritten}
        found = {i: v for i, v in unwritten.items() if v is not None}
        for batch in _batches(i for i in ids if i not in unwritten):
            found.update(self.db.execute(f"SELECT id, value FROM memo WHERE id IN ({','.join('?' * len(batch))})"
                                         " AND value IS NOT NULL", batch))
        return found

    def load_stats(self) -> dict[str, StatEntry]:
        rows = self.db.execute("SELECT path, size, mtime_ns, ino, hash FROM files")
        return {r[0]: ((r[1], r[2], r[3]), r[4]) for r in rows}

    def load_stat(self, path: str) -> StatEntry | None:
        row = self.db.execute("SELECT size, mtime_ns, ino, hash FROM files WHERE path=?", (path,)).fetchone()
        return None if row is None else ((row[0], row[1], row[2]), row[3])

    def save_stats(self, changes: Mapping[str, StatEntry | None]) -> None:
        """Record each changed stat entry (None: forget it)."""
        for key, entry in changes.items():
            if entry is None:
                self.db.execute("DELETE FROM files WHERE path=?", (key,))
            else:
                (size, mtime, ino), digest = entry
                self.db.execute("INSERT OR REPLACE INTO files VALUES (?,?,?,?,?)", (key, size, mtime, ino, digest))

    def get_meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT v FROM meta WHERE k=?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta VALUES (?,?)", (key, value))

    def delete_meta(self, key: str) -> None:
        self.db.execute("DELETE FROM meta WHERE k=?", (key,))


def damage(path: Path) -> str | None:
    """What is wrong with the state database at `path`, read-only and in full (SQLite's
    quick_check reads every page: for `kbuild doctor`, not for every build), or None."""
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            problems = [row[0] for row in db.execute("PRAGMA quick_check(3)")]
        finally:
            db.close()
    except sqlite3.Error as exc:
        return str(exc)
    return None if problems == ["ok"] else "; ".join(problems)


def _batches(items: Iterable[str], size: int = 500) -> Iterator[list[str]]:
    """`items` in lists short enough for one SQL statement's parameters."""
    batch: list[str] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def flat(deps: list[DepGroup]) -> Iterator[tuple[str, str]]:
    for group in deps:
        yield from group
