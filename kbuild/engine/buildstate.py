"""The records of one build that every step reads and updates: the role of salsa's database
handle. Each step (graphload, snapshot, scan, demand, execute, outputs, collect) is an object
holding this handle and its own working fields; build.py puts them together."""
from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from .callcache import CallCache
from .remotecache import RemoteCache
from .files import FileHasher, OutputArea
from .hashing import ABSENT
from .layout import StateFolder
from .lockfiles import LockFiles
from .report import BuildStopped, Report, StateDamaged, stop_for
from .rule import Query, Rule
from .sourcetexts import SourceTexts
from .state import DepGroup, Memo, State

# meta key: the committed memos differ from the lock on disk (a build stopped before writing it),
# so the next build writes the whole lock again, whatever it runs
LOCK_BEHIND = "lock_behind"
LOCK_FILES = "lock_files"  # meta key: each lock file's hash, as this state describes it
COMMIT_EVERY_S = 1.0

Observer = Callable[[str, str], None]  # (event, query id); events: "run", "done", "fail"


class Setup(Protocol):
    """What a build is told of the engine that starts it: its store, rules and limits."""

    root: Path
    rules: dict[str, Rule]
    state_dir: Path
    local: StateFolder
    lock_path: Path
    lock: LockFiles
    cache_dir: Path
    cache_url: str | None
    max_calls: int
    cutoff_hooks: bool
    outputs: OutputArea
    may_write: Callable[[str, str], bool] | None

    def register(self, r: Rule) -> Rule: ...


class BuildState:
    """The state of one build: which queries are settled, running, failed."""

    def __init__(self, engine: Setup, state: State, refresh: bool, observer: Observer | None,
                 read_only: bool = False) -> None:
        self.engine = engine
        self.read_only = read_only
        self.state = state
        self.refresh = refresh
        self.observer = observer
        self.hasher = FileHasher(engine.root, state.load_stats, state.load_stat, keep=not read_only)
        self.sources = SourceTexts(json.loads(state.get_meta("sources") or "{}"))
        self.lock_key = self.hasher.key(engine.lock_path)  # how messages name the lock
        self.lock_changed = self.lock_digest() not in (ABSENT, state.get_meta("lock_hash"))
        self.lock_misplaced = False  # entries were read from a file the layout does not put them in
        self.refused: dict[str, str] = {}  # lock entries not taken in, and why
        self.memos: dict[str, Memo] = {}
        self.changed: set[str] = set()  # queries whose memo this build saved or deleted
        remote = RemoteCache(engine.cache_url) if engine.cache_url and not read_only else None
        self.calls = CallCache(engine.cache_dir, engine.max_calls, remote)
        self.green: dict[str, str] = {}  # settled this build: query id -> hash its readers see
        self.failed: dict[str, str] = {}
        self.waiting: set[str] = set()  # of the failed, those that wait for a deferred call
        self.values: dict[str, Any] = {}
        # the stored bytes of values read in parts, with their parts in order and where each
        # stands, once found (Demand.stored_part)
        self.part_blobs: dict[str, tuple[bytes, list[str], list[tuple[int, int]] | None]] = {}
        self.queries: dict[str, Query] = {}
        self.replaced: dict[str, Memo] = {}  # the memo each re-run query had before
        self.lock_only_outputs: set[str] = set()  # outputs only the lock says were written, taken in this build
        self.report = Report()
        self.last_commit = time.monotonic()
        self.unsynced = False  # outputs written since the last commit, not yet synced to disk
        self.stopped: BuildStopped | None = None
        # the committed memos are ahead of the lock on disk (set by commit, cleared with the lock)
        self.lock_behind = state.get_meta(LOCK_BEHIND) is not None
        self.lock_was_behind = self.lock_behind  # from a build that stopped: the lock is rendered whole
        self.lock_written = False

    def lock_digests(self) -> dict[str, str]:
        """Each lock file's name and hash (stat-cached, as every file the graph reads)."""
        hasher = self.hasher
        return self.engine.lock.digests(lambda f: hasher.hash(hasher.key(f)))

    def lock_digest(self) -> str:
        return self.engine.lock.digest(self.lock_digests())

    def remember_lock_digests(self, digests: dict[str, str]) -> None:
        """Record the lock this state now describes: its hash, and each file's, by which a pull is
        taken in file by file (snapshot.py)."""
        self.state.set_meta("lock_hash", self.engine.lock.digest(digests))
        self.state.set_meta(LOCK_FILES, json.dumps(digests))

    # -- bookkeeping ----------------------------------------------------------------------

    def introduce(self, query: Query) -> None:
        """Make a query runnable by id: one nobody has built yet is known only by its Query."""
        if query.id not in self.queries:
            answering = self.engine.rules.get(query.rule.name)
            if answering is not query.rule:
                answering = self.engine.register(query.rule)
            self.queries[query.id] = query if answering is query.rule else Query(answering, query.key)

    def close(self, save: bool = True) -> None:
        """Commit what this build settled (unless the state is damaged or only read) and close."""
        gc.unfreeze()  # a watch session builds again and again: let this build's graph go
        if save and not isinstance(self.stopped, StateDamaged):
            try:
                if self.hasher.changed_stats:
                    self.state.save_stats(self.hasher.take_changes())
                sources = self.sources.to_record()
                if sources is not None:
                    self.state.set_meta("sources", json.dumps(sources))
                self.commit()
            except sqlite3.Error as exc:
                # the last commit stands: what came after it is found again by the next build
                with contextlib.suppress(sqlite3.Error):
                    self.state.rollback()
                if not self.stop(exc, "writing the local state .kbuild/state.db"):
                    self.state.db.close()
                    raise
        self.state.db.close()

    def stop(self, exc: BaseException, writing: str) -> bool:
        """Stop the build if `exc` stops it (a full disk, a damaged state); False if it does not."""
        stopped = stop_for(exc, writing)
        if stopped is None:
            return False
        if self.stopped is None:
            self.stopped = stopped
        return True

    def commit(self) -> None:
        """Commit the state; once memos changed, the same commit says the lock is behind them,
        so a build stopped before it writes the lock leaves the next build writing all of it."""
        if self.changed and not self.lock_behind and not self.lock_written:
            self.state.set_meta(LOCK_BEHIND, "1")
            self.lock_behind = True
        if self.unsynced:  # the outputs the memos being committed name reach the disk first: one sync
            os.sync()
            self.unsynced = False
        self.state.commit()

    def maybe_commit(self) -> None:
        now = time.monotonic()
        if now - self.last_commit >= COMMIT_EVERY_S:
            self.state.save_stats(self.hasher.take_changes())
            self.commit()
            self.last_commit = now
            # What a build has made so far mostly lives until it ends (memos, values): frozen out
            # of the cyclic collector, which would scan it again at each full collection as the
            # build grows (a cold build of 5,000 facts: 4.07 of 23.48 s in collections; frozen,
            # 1.78 of 19.09 s; python benchmarks/collector.py). close() unfreezes it.
            gc.freeze()

    def emit(self, event: str, qid: str) -> None:
        if self.observer is not None:
            self.observer(event, qid)
