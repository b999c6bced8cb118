"""The engine: memoised queries, verification against recorded reads, early cutoff.

A build brings a set of target queries up to date. Each query's memo records what it read, in
order, with the hash of each read. A query is reused when every recorded read still has its
recorded hash; reads are checked in the order they were made, each brought up to date first, so
the query nearest the inputs is always settled before the queries above it. A query that runs
again and produces the hash it had before (or that its rule's cutoff hook judges equivalent)
presents its old hash to its readers, so nothing above it runs (early cutoff).

Comparing hashes rather than revision numbers (Salsa's "changed at") is what lets the committed
lock carry the graph to a fresh clone, and makes a reverted edit cost nothing.
"""
from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from . import eventloop, staleness
from .build import UNFINISHED, Build
from .buildlock import BuildLock
from .buildstate import Observer
from .files import OutputArea
from .hashing import ABSENT
from .layout import FOLDER, LOCK_FILE, StateFolder
from .lockfiles import LockFiles
from .report import Report, StateDamaged, state_damaged, stop_for
from .snapshot import CLEAN, CleanRecord, StatPass
from .rule import Query, Rule
from .staleness import Inspection
from .state import FileRead, Memo, State, flat
from .verify import Reason


class Engine:
    def __init__(
        self,
        root: str | os.PathLike[str],
        rules: Iterable[Rule] = (),
        *,
        state_dir: Path | None = None,
        lock_path: Path | None = None,
        cache_dir: Path | None = None,
        cache_url: str | None = None,
        max_calls: int = 4,
        cutoff_hooks: bool = True,
        output_folder: str | None = None,
        split_lock: bool = False,
        may_write: Callable[[str, str], bool] | None = None,
    ) -> None:
        """`output_folder` (relative to the root) is where every output lies: a rule writing
        elsewhere fails, and a lock naming an output elsewhere has that entry refused.
        `split_lock` lays the lock out as a file per shard (lockfiles.py). `may_write(rule name,
        output path)` says whether a query of that rule can write that path at all: a lock entry
        naming an output its rule never writes (a person's file beside the pages) is refused, so
        no build removes that file on the lock's word."""
        self.root = Path(root).resolve()
        self.cutoff_hooks = cutoff_hooks  # False: exact cutoff only (`kbuild build --cutoff exact`)
        self.rules: dict[str, Rule] = {}
        for r in rules:
            self.register(r)
        self.state_dir = state_dir or self.root / FOLDER
        self.local = StateFolder(self.state_dir)
        self.lock_path = lock_path or self.root / LOCK_FILE
        self.lock = LockFiles(self.lock_path, split_lock)
        env_cache = os.environ.get("KBUILD_CACHE_DIR")
        self.cache_dir = cache_dir or (Path(env_cache) if env_cache else self.local.cache)
        # a remote call cache beside it (s3://bucket/prefix, remotecache.py), read and written through
        self.cache_url = cache_url or os.environ.get("KBUILD_CACHE_URL", "").strip() or None
        self.max_calls = max_calls
        self.outputs = OutputArea(self.root, output_folder or "", (self.lock_path, self.lock.folder, self.state_dir))
        self.may_write = may_write

    def register(self, r: Rule) -> Rule:
        """Know `r` by its name, and return the rule that answers for that name: a configured
        copy of a rule stands for the rule itself (queries made with the module's rule run
        with the configured one)."""
        known = self.rules.get(r.name)
        if known is None or known is r:
            self.rules[r.name] = r
            return r
        if known.fn is not r.fn:
            raise ValueError(f"two different rules are named {r.name!r}; give one of them another name")
        if r.configuration is None:
            return known
        if known.configuration is None:
            self.rules[r.name] = r
            return r
        if known.configuration is not r.configuration:
            raise ValueError(f"rule {r.name!r} is configured twice, with different settings; "
                             "a Kbuildfile configures each rule once")
        return known

    def build(
        self,
        targets: Iterable[Query],
        *,
        collect_garbage: bool = True,
        refresh: bool = False,
        observer: Observer | None = None,
        stat_pass: StatPass | None = None,
    ) -> Report:
        """Bring `targets` up to date. With `collect_garbage`, queries no target reaches any more
        are forgotten and their files removed (pass False when building a subset). `stat_pass`:
        what `edited_outputs`, called by the same command just before, found unchanged.

        Damaged local state is dropped and the build run again from the lock, with a warning:
        each attempt has an event loop of its own, so nothing of the first one runs on."""
        targets = list(targets)

        def attempt() -> Report:
            return eventloop.run(self.build_async(targets, collect_garbage=collect_garbage, refresh=refresh,
                                                  observer=observer, stat_pass=stat_pass))

        try:
            return attempt()
        except StateDamaged as exc:
            self.discard_state()
            report = attempt()
            report.warnings.setdefault("", []).append(f"{exc}; it was rebuilt from {self.lock_path.name}")
            return report

    def discard_state(self) -> None:
        """Remove the local state database (and SQLite's files beside it); the lock rebuilds it."""
        with BuildLock(self.state_dir):
            for file in self.local.state_db_files:
                file.unlink(missing_ok=True)

    async def build_async(
        self,
        targets: Iterable[Query],
        *,
        collect_garbage: bool = True,
        refresh: bool = False,
        observer: Observer | None = None,
        stat_pass: StatPass | None = None,
    ) -> Report:
        targets = list(targets)
        with BuildLock(self.state_dir):
            try:
                state = State(self.local.state_db)
            except sqlite3.Error as exc:
                raise stop_for(exc, "writing the local state .kbuild/state.db") or exc from None
            build = Build(self, state, refresh, observer)
            try:
                report = await build.run(targets, collect_garbage, stat_pass)
            except sqlite3.Error as exc:  # the state failed outside any query
                if not build.db.stop(exc, "writing the local state .kbuild/state.db"):
                    raise
                report = build.db.report
            finally:
                build.db.close()
            if build.db.stopped is not None:
                raise build.db.stopped
            return report

    def plan(self, targets: Iterable[Query]) -> dict[str, Reason]:
        """What a build would run and why, without running anything: a dry run.

        It is an upper bound: a query listed here may turn out unchanged and be cut off.
        """
        targets = list(targets)
        with self._reading() as build:
            for t in targets:
                build.db.introduce(t)
            root_ids = [t.id for t in targets]
            if build.snapshot.still_clean(root_ids) is not None:
                return {}
            build.graph.load_graph()
            scan = build.scan
            scan.settle(root_ids)
            return {q: scan.must_run.get(q) or scan.unsure[q] for q in [*scan.must_run, *scan.unsure]}

    def edited_outputs(self, targets: Iterable[Query]) -> tuple[dict[str, str], StatPass | None]:
        """Each recorded output that is there but is not what the build that wrote it left
        (edited by a person; not a symlink, which a build replaces without writing through it),
        with the query that writes it: what a build would overwrite; and what the look found
        unchanged by its stat, for the build that follows at once (`build(stat_pass=)`). An
        output of a lock entry a merge marked to run again is not one (the merge wrote it).
        After a build that left every query settled, a stat per output it wrote, and only the
        outputs that changed since are looked up, in the lock when a pull changed it; else the
        whole graph, of which only what the targets reach (a build leaves the rest in place).
        BuildLocked while another build holds the store (its writes are no edits)."""
        from .lockfile import parse_entry
        from .lockmerge import STALE_FINGERPRINT

        with BuildLock(self.state_dir), self._reading() as build:
            db = build.db
            blob = None if db.lock_behind else db.state.get_meta(CLEAN)
            memos: dict[str, Memo] | None = None
            only: set[str] | None = None  # the outputs worth a look
            stat_pass: StatPass | None = None
            if blob is not None:
                summary = CleanRecord.parse(blob)
                _, changed = build.snapshot.changed_since(summary)  # what the last build wrote, as it wrote it
                stat_pass = replace(build.snapshot.stat_pass, summary=(blob, summary))
                only = set(changed)
                writers = {q for qs in db.state.writers(changed).values() for q in qs}
                if not db.lock_changed:
                    memos = db.state.load_memos(writers)
                else:  # a pull: the pages it brought are recorded in its lock
                    with contextlib.suppress(OSError, ValueError, KeyError, TypeError, AttributeError):
                        entries = self.lock.entries_for(writers)
                        if entries is not None:
                            memos = {q: parse_entry(entries[q]) for q in writers if q in entries}
            if memos is None:
                build.graph.load_graph()
                memos, only = _reached(db.memos, [t.id for t in targets]), None
            file_hash = db.hasher.hash
            edited: dict[str, str] = {}
            for qid, memo in memos.items():
                if memo.fingerprint == STALE_FINGERPRINT:
                    continue
                for path, digest in memo.outputs.items():
                    if only is not None and path not in only:
                        continue
                    now = file_hash(path)
                    full = self.root / path  # a symlink is replaced, its target untouched: nothing lost
                    if now != digest and now != ABSENT and full.is_file() and not full.is_symlink():
                        edited[path] = qid
            return dict(sorted(edited.items())), stat_pass

    def last_build_unfinished(self) -> bool:
        """Whether the last build was killed or stopped: then an output that differs from its
        memo may be one it wrote and had not recorded yet, rather than a person's edit."""
        if not self.local.state_db.exists():
            return False
        with self._reading() as build:
            return build.db.state.get_meta(UNFINISHED) is not None

    def settled_stats(self) -> dict[str, list[int]] | None:
        """The stat of every file the graph reads or writes, each as recorded with its hash, when
        the last build left every query settled and a stat is known for each; else None."""
        if not self.local.state_db.exists():
            return None
        state = State(self.local.state_db)
        try:
            summary = CleanRecord.read(state)
        finally:
            state.db.close()
        return None if summary is None else summary.settled_stats()

    def inspect(self, read_outputs: Callable[[str], bool] | None = None) -> Inspection:
        """The recorded graph and every query that a build would have to check again, in one
        reading of the lock and the files: (why, the query whose own inputs, rule or outputs
        changed and that it is built on, directly or not). Each recorded output that
        `read_outputs` chooses (a caller's pages) is read whole once, for its hash and for the
        caller, who finds the bytes in `Inspection.contents` with their hashes."""
        with self._reading() as build:
            return staleness.inspect(build.graph, read_outputs)

    def value(self, query: Query) -> Any:
        """The stored value of a query as the last build left it, without running anything."""
        state = State(self.local.state_db)
        try:
            blob = state.load_value(query.id)
        finally:
            state.db.close()
        if blob is None:
            raise KeyError(f"{query.id} has no stored value; run `kbuild` first")
        return self.rules.get(query.rule.name, query.rule).decode(blob)

    def memos(self) -> dict[str, Memo]:
        """The recorded graph: from local state, or from the lock on a fresh clone."""
        with self._reading() as build:
            build.graph.load_graph()
            return dict(build.db.memos)

    @contextlib.contextmanager
    def _reading(self) -> Iterator[Build]:
        """A build that only reads: local state when there is some, else the lock alone in memory
        (a fresh clone), and nothing written either way."""
        state_file = self.local.state_db
        try:
            build = Build(self, State(state_file if state_file.exists() else None), False, None, read_only=True)
        except sqlite3.DatabaseError as exc:
            if not state_damaged(exc):
                raise
            # a cache that cannot be read: the lock alone says what was built (the next build repairs it)
            build = Build(self, State(None), False, None, read_only=True)
        try:
            yield build
        finally:
            build.db.close(save=False)


def _reached(memos: dict[str, Memo], roots: list[str]) -> dict[str, Memo]:
    """The memos the roots reach through their recorded query reads."""
    reached: dict[str, Memo] = {}
    stack = list(roots)
    while stack:
        qid = stack.pop()
        memo = memos.get(qid)
        if memo is None or qid in reached:
            continue
        reached[qid] = memo
        stack.extend(d for d, _ in flat(memo.deps) if not isinstance(d, FileRead))
    return reached
