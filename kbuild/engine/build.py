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

import asyncio
import contextlib
import errno
import fcntl
import gc
import inspect
import json
import os
import sqlite3
import time
import traceback
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .callcache import CallCache
from .files import TEMP_SUFFIX, FileHasher, OutputArea, atomic_write
from .hashing import ABSENT, FAILED, UNKNOWN, decode_value, encode_value, hash_bytes
from . import rule as rules_module
from .lockfile import patch_lock, read_lock, render_lock
from .rule import Query, Rule
from .state import DepGroup, FileRead, Memo, State, flat
from .verify import Change, Reason, first_changed_read, outside_reads, read_changed

CLEAN = "clean"  # meta key: what the last build settled, for the no-op fast path
# meta key: the committed memos differ from the lock on disk (a build stopped before writing it),
# so the next build writes the whole lock again, whatever it runs
LOCK_BEHIND = "lock_behind"
SQLITE_CORRUPT, SQLITE_FULL, SQLITE_NOTADB = 11, 13, 26
COMMIT_EVERY_S = 1.0

Observer = Callable[[str, str], None]  # (event, query id); events: "run", "done", "fail"


class BuildLocked(RuntimeError):
    pass


class BuildStopped(RuntimeError):
    """A build that cannot go on (the disk is full): one line for the user. What finished is
    kept (its pages, its memos, its cached calls); the lock is not written, so it never names
    a state that was not committed."""


class StateDamaged(BuildStopped):
    """The local state is not a readable database. It is a cache of the lock and the files,
    so it is dropped and the build starts again from the lock."""


def out_of_space(exc: BaseException) -> bool:
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    return isinstance(exc, sqlite3.Error) and (getattr(exc, "sqlite_errorcode", None) == SQLITE_FULL
                                               or "database or disk is full" in str(exc))


def state_damaged(exc: BaseException) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(exc, sqlite3.DatabaseError) and (
        code is not None and code & 0xFF in (SQLITE_CORRUPT, SQLITE_NOTADB)
        or "malformed" in str(exc) or "not a database" in str(exc))


def _stop_for(exc: BaseException, where: str) -> BuildStopped | None:
    """The BuildStopped an error `where` means, or None when it fails one query only."""
    if out_of_space(exc):
        return BuildStopped(f"no space left on the device ({where}); free some space and run "
                            "`kbuild` again (what was built is kept)")
    if state_damaged(exc):
        return StateDamaged(f"the local state .kbuild/state.db is damaged ({exc})")
    return None


class CycleError(RuntimeError):
    def __init__(self, members: list[str]) -> None:
        self.members = members
        super().__init__("dependency cycle: " + " -> ".join(members))


class Problem(Exception):
    """A failure the user can act on (bad input, a refused reply): shown as its message alone,
    with no exception type and no traceback unless asked for."""


class QueryFailed(Exception):
    """Raised inside a rule when a query it reads has failed in this build."""

    def __init__(self, query_id: str, reason: str) -> None:
        self.query_id = query_id
        self.reason = reason
        super().__init__(f"{query_id} failed: {reason}")


@dataclass
class Report:
    """What one build did. `reasons` says why each executed query ran."""

    executed: list[str] = field(default_factory=list)
    reused: int = 0
    cutoff: dict[str, Literal["exact", "hook"]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    warnings: dict[str, list[str]] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)  # cutoff hooks' decisions, by query
    reasons: dict[str, str] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    calls: int = 0
    cache_hits: int = 0
    seconds: float = 0.0
    errors: dict[str, BaseException] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        return not self.failed

    def root_failures(self) -> dict[str, str]:
        """The failures that are causes, not queries that failed because something they read did."""
        return {q: m for q, m in self.failed.items() if not isinstance(self.errors.get(q), QueryFailed)}

    def summary(self) -> str:
        parts = [
            f"{len(self.executed)} ran",
            f"{self.reused} reused",
            f"{len(self.cutoff)} cut off",
            f"{len(self.failed)} failed",
            f"{self.calls} calls ({self.cache_hits} cached)",
            *(f"{value:.4f} {name}" if isinstance(value, float) and not value.is_integer() else f"{value:g} {name}"
              for name, value in sorted(self.counters.items())),
            f"{self.seconds:.2f}s",
        ]
        return ", ".join(parts)


class Context:
    """A rule's only window on the world: every read through it is recorded with its hash."""

    __slots__ = ("_build", "_query", "deps", "outputs", "notes")

    def __init__(self, build: _Build, query: Query) -> None:
        self._build = build
        self._query = query
        self.deps: list[DepGroup] = []
        self.outputs: dict[str, bytes] = {}
        self.notes: dict[str, object] = {}

    @property
    def query_id(self) -> str:
        return self._query.id

    @property
    def root(self) -> Path:
        return self._build.engine.root

    def read(self, path: str | os.PathLike[str]) -> bytes:
        """The bytes of an input file. A missing file is recorded too, so creating it is a change."""
        hasher = self._build.hasher
        key = hasher.key(path)
        try:
            data, digest = hasher.read(key)
        except FileNotFoundError:
            self.deps.append([(FileRead.of(key), ABSENT)])
            raise
        self.deps.append([(FileRead.of(key), digest)])
        return data

    def read_text(self, path: str | os.PathLike[str]) -> str:
        return self.read(path).decode("utf-8")

    def exists(self, path: str | os.PathLike[str]) -> bool:
        hasher = self._build.hasher
        key = hasher.key(path)
        digest = hasher.hash(key)
        self.deps.append([(FileRead.of(key), digest)])
        return digest != ABSENT

    async def query(self, query: Query) -> Any:
        (value,) = await self.query_all([query])
        return value

    async def query_all(self, queries: Sequence[Query], *, return_failures: bool = False) -> list[Any]:
        """Read several queries concurrently. With `return_failures`, a failed one is returned as
        its QueryFailed instead of raising, so a rule can build around it (an index leaving out a
        page that failed its checks)."""
        build = self._build
        me = self._query.id
        for q in queries:
            build.introduce(q)
        ids = [q.id for q in queries]
        # Only what is not settled yet is awaited, and one read without a task: a cold build has
        # every query suspended at once, and a task per read was most of its memory.
        pending = [i for i in ids if i not in build.green]
        if len(pending) == 1:
            await build.demand(pending[0], me)
        elif pending:
            await asyncio.gather(*(build.demand(i, me) for i in pending))
        known, failed = build.values, build.failed
        missing = [i for i in ids if i not in known or i in failed]
        if len(missing) == 1:
            fetched = {missing[0]: await build.value_of(missing[0])}
        else:
            fetched = dict(zip(missing, await asyncio.gather(*(build.value_of(i) for i in missing)))) if missing else {}
        values = [fetched[i] if i in fetched else known[i] for i in ids]
        group = [(i, build.current_hash(i)) for i in ids]
        self.deps.append(group)
        failures = [v for v in values if isinstance(v, QueryFailed)]
        if failures and not return_failures:
            raise failures[0]
        return list(values)

    @property
    def state_dir(self) -> Path:
        """The git-ignored folder for local state (logs, caches): rebuildable, never committed."""
        return self._build.engine.state_dir

    @property
    def built_before(self) -> bool:
        """Whether this query has a value from an earlier build, which stands if it fails now."""
        return self._query.id in self._build.memos

    def count(self, name: str, amount: float) -> None:
        """Add to a build-wide counter shown in the report (tokens, cost, calls...)."""
        counters = self._build.report.counters
        counters[name] = counters.get(name, 0) + amount

    def note(self, key: str, value: object) -> None:
        """Record something about this query's output in the lock (a check's verdict, say), so
        that a fresh clone can read it without running anything. JSON values only."""
        self.notes[key] = value

    def warn(self, message: str) -> None:
        """Something the user should know about this query's inputs; shown when the query runs."""
        self._build.report.warnings.setdefault(self._query.id, []).append(message)

    def write(self, path: str, data: bytes | str) -> None:
        """Produce a file (relative to the root). It is written when the rule succeeds, atomically,
        and removed when a later run of this query no longer produces it."""
        self._build.engine.outputs.path(path)  # refuse a path outside the outputs' folder now, in the rule
        self.outputs[Path(path).as_posix()] = data.encode() if isinstance(data, str) else bytes(data)

    async def call(
        self, request: Mapping[str, Any], compute: Callable[[], Awaitable[Any]]
    ) -> Any:
        """An expensive call (a model), cached under the hash of `request` and bounded in flight.

        `request` must hold everything that decides the answer; the response must be JSON.
        """
        build = self._build
        return await build.calls.call(request, compute, refresh=build.refresh)


class Engine:
    def __init__(
        self,
        root: str | os.PathLike[str],
        rules: Iterable[Rule] = (),
        *,
        state_dir: Path | None = None,
        lock_path: Path | None = None,
        cache_dir: Path | None = None,
        max_calls: int = 4,
        cutoff_hooks: bool = True,
        output_folder: str | None = None,
    ) -> None:
        """`output_folder` (relative to the root) is where every output lies: a rule writing
        elsewhere fails, and a lock naming an output elsewhere has that entry refused."""
        self.root = Path(root).resolve()
        self.cutoff_hooks = cutoff_hooks  # False: exact cutoff only (`kbuild build --cutoff exact`)
        self.rules: dict[str, Rule] = {}
        for r in rules:
            self.register(r)
        self.state_dir = state_dir or self.root / ".kbuild"
        self.lock_path = lock_path or self.root / "kbuild.lock"
        env_cache = os.environ.get("KBUILD_CACHE_DIR")
        self.cache_dir = cache_dir or (Path(env_cache) if env_cache else self.state_dir / "cache")
        self.max_calls = max_calls
        self.outputs = OutputArea(self.root, output_folder or "", (self.lock_path, self.state_dir))

    def register(self, r: Rule) -> None:
        known = self.rules.setdefault(r.name, r)
        if known is not r and known.fn is not r.fn:
            raise ValueError(f"two different rules are named {r.name!r}; give one of them another name")

    def build(
        self,
        targets: Iterable[Query],
        *,
        collect_garbage: bool = True,
        refresh: bool = False,
        observer: Observer | None = None,
    ) -> Report:
        """Bring `targets` up to date. With `collect_garbage`, queries no target reaches any more
        are forgotten and their files removed (pass False when building a subset).

        Damaged local state is dropped and the build run again from the lock, with a warning:
        each attempt has an event loop of its own, so nothing of the first one runs on."""
        targets = list(targets)

        def attempt() -> Report:
            return asyncio.run(self.build_async(targets, collect_garbage=collect_garbage, refresh=refresh,
                                                observer=observer))

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
            for suffix in ("", "-wal", "-shm", "-journal"):
                (self.state_dir / f"state.db{suffix}").unlink(missing_ok=True)

    async def build_async(
        self,
        targets: Iterable[Query],
        *,
        collect_garbage: bool = True,
        refresh: bool = False,
        observer: Observer | None = None,
    ) -> Report:
        targets = list(targets)
        with BuildLock(self.state_dir):
            try:
                state = State(self.state_dir / "state.db")
            except sqlite3.Error as exc:
                raise _stop_for(exc, "writing the local state .kbuild/state.db") or exc from None
            build = _Build(self, state, refresh, observer)
            try:
                report = await build.run(targets, collect_garbage)
            except sqlite3.Error as exc:  # the state failed outside any query
                if not build.stop(exc, "writing the local state .kbuild/state.db"):
                    raise
                report = build.report
            finally:
                build.close()
            if build.stopped is not None:
                raise build.stopped
            return report

    def plan(self, targets: Iterable[Query]) -> dict[str, Reason]:
        """What a build would run and why, without running anything: a dry run.

        It is an upper bound: a query listed here may turn out unchanged and be cut off.
        """
        targets = list(targets)
        with self._reading() as build:
            for t in targets:
                build.introduce(t)
            root_ids = [t.id for t in targets]
            if build.still_clean(root_ids) is not None:
                return {}
            build.load_graph()
            build.settle(root_ids)
            return {q: build.must_run.get(q) or build.unsure[q] for q in [*build.must_run, *build.unsure]}

    def inspect(self) -> Inspection:
        """The recorded graph and every query that a build would have to check again, in one
        reading of the lock and the files: (why, the query whose own inputs, rule or outputs
        changed and that it is built on, directly or not). Unlike a dry run, it does not stop at a
        query's first changed read: this is the set a reviewer is shown, every page that depends
        on a change."""
        with self._reading() as build:
            build.load_graph()
            memos, file_hash = build.memos, build.hasher.hash
            causes: dict[str, Reason] = {}

            def recorded_hash(dep: str) -> str | None:
                memo = memos.get(dep)
                return None if memo is None else memo.hash  # none: a build that failed part way

            for qid, memo in memos.items():
                reason = (outside_reads(memo, build.engine.rules, file_hash)
                          or first_changed_read(flat(memo.deps), file_hash, recorded_hash, "status"))
                if reason:
                    causes[qid] = reason
            readers: dict[str, list[str]] = {}
            for qid, memo in memos.items():
                for dep, _ in flat(memo.deps):
                    if not isinstance(dep, FileRead):
                        readers.setdefault(dep, []).append(qid)
            stale = {qid: (reason, qid) for qid, reason in causes.items()}
            frontier = sorted(causes)
            while frontier:  # breadth first, so each query names the nearest stale query it reads
                nxt = []
                for qid in frontier:
                    for reader in readers.get(qid, ()):
                        if reader not in stale:
                            stale[reader] = (Reason.of(Change.BUILT_ON_STALE, qid), stale[qid][1])
                            nxt.append(reader)
                frontier = sorted(nxt)
            return Inspection(dict(memos), stale, dict(build.refused))

    def value(self, query: Query) -> Any:
        """The stored value of a query as the last build left it, without running anything."""
        state = State(self.state_dir / "state.db")
        try:
            blob = state.load_value(query.id)
        finally:
            state.db.close()
        if blob is None:
            raise KeyError(f"{query.id} has no stored value; run `kbuild` first")
        return decode_value(blob)

    def memos(self) -> dict[str, Memo]:
        """The recorded graph: from local state, or from the lock on a fresh clone."""
        with self._reading() as build:
            build.load_graph()
            return dict(build.memos)

    @contextlib.contextmanager
    def _reading(self) -> Iterator[_Build]:
        """A build that only reads: local state when there is some, else the lock alone in memory
        (a fresh clone), and nothing written either way."""
        state_file = self.state_dir / "state.db"
        try:
            build = _Build(self, State(state_file if state_file.exists() else None), False, None, read_only=True)
        except sqlite3.DatabaseError as exc:
            if not state_damaged(exc):
                raise
            # a cache that cannot be read: the lock alone says what was built (the next build repairs it)
            build = _Build(self, State(None), False, None, read_only=True)
        try:
            yield build
        finally:
            build.close(save=False)


@dataclass
class Inspection:
    memos: dict[str, Memo]
    stale: dict[str, tuple[Reason, str]]  # query id -> (why, the query whose own change it comes from)
    refused: dict[str, str] = field(default_factory=dict)  # lock entries not taken in, and why


def _takes_context(hook: Callable[..., Any]) -> bool:
    """A cutoff hook is hook(old, new), or hook(ctx, old, new) when it needs to ask a model."""
    return len(inspect.signature(hook).parameters) == 3


def _targets_digest(root_ids: list[str]) -> str:
    return hash_bytes("\n".join(sorted(root_ids)).encode())


class BuildLock:
    """One build per store: an exclusive lock on a file in the state folder."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "build.lock"
        self.fd: int | None = None

    def __enter__(self) -> BuildLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise BuildLocked(
                f"another kbuild (pid {holder}) is building this store; wait for it to finish or stop it"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self.fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


class _Build:
    """The state of one build: which queries are settled, running, failed."""

    def __init__(self, engine: Engine, state: State, refresh: bool, observer: Observer | None,
                 read_only: bool = False) -> None:
        self.engine = engine
        self.read_only = read_only
        self.state = state
        self.refresh = refresh
        self.observer = observer
        self.hasher = FileHasher(engine.root, state.load_stats)
        self.sources_seen = json.loads(state.get_meta("sources") or "{}")
        rules_module.SOURCES.update(self.sources_seen)
        self.lock_key = self.hasher.key(engine.lock_path)
        self.lock_changed = self.hasher.hash(self.lock_key) not in (ABSENT, state.get_meta("lock_hash"))
        self.memos: dict[str, Memo] = {}
        self.changed: set[str] = set()  # queries whose memo this build saved or deleted
        self.calls = CallCache(engine.cache_dir, engine.max_calls)
        self.green: dict[str, str] = {}  # settled this build: query id -> hash its readers see
        self.must_run: dict[str, Reason] = {}  # query id -> why it cannot be reused
        self.unsure: dict[str, Reason] = {}  # a read is out of date: verify once that one is settled
        self.failed: dict[str, str] = {}
        self.attempted: dict[str, list[DepGroup]] = {}  # the reads of queries that failed, up to their failure
        self.values: dict[str, Any] = {}
        self.tasks: dict[str, asyncio.Task[str]] = {}
        self.forced: dict[str, asyncio.Task[str]] = {}
        self.waits: dict[str, set[str]] = {}
        self.report = Report()
        self.last_commit = time.monotonic()
        self.queries: dict[str, Query] = {}
        # When the last build left everything settled and only a few inputs changed, only the
        # queries those changes reach are loaded (`reached`); the rest are settled as recorded.
        self.reached: set[str] | None = None
        self.replaced: dict[str, Memo] = {}  # the memo each re-run query had before
        self.dropped: set[str] = set()  # queries that re-run queries read before and no longer do
        self.dead: dict[str, Memo] = {}  # what garbage collection forgot, after a partial load
        self.read_removals: dict[str, str] = {}  # files to remove once no query reads them: path -> hash
        self.produced: set[str] = set()  # every output a query produced in this build
        self.refused: dict[str, str] = {}  # lock entries not taken in, and why
        self.stopped: BuildStopped | None = None
        # the committed memos are ahead of the lock on disk (set by _commit, cleared with the lock)
        self.lock_behind = state.get_meta(LOCK_BEHIND) is not None
        self.lock_was_behind = self.lock_behind  # from a build that stopped: the lock is rendered whole
        self.lock_written = False

    # -- bookkeeping ----------------------------------------------------------------------

    def load_graph(self) -> None:
        # Loading the graph allocates a million small objects; the cyclic collector would scan
        # them again and again (3 s instead of 0.5 s at 100k queries), and they all live for the
        # whole build, so collection is paused while loading and they are frozen out of it.
        gc.disable()
        try:
            self.memos = self.state.load_memos()
            if self.lock_changed:
                self._import_lock()
        finally:
            gc.enable()
        gc.freeze()

    def load_reached(self, changed_files: list[str], changed_outputs: list[str], root_ids: list[str]) -> None:
        """Load only the queries that the changed files and outputs reach through the recorded
        graph read backwards; every other query is settled with its recorded hash, which its
        readers recorded too (the last build left every read settled)."""
        state = self.state
        frontier = state.readers(FileRead.of(p) for p in changed_files)
        for writers in state.writers(changed_outputs).values():
            frontier |= writers
        reached: set[str] = set()
        while frontier:
            reached |= frontier
            frontier = state.readers(frontier) - reached
        self.reached = reached
        self.memos = _LazyMemos(state)
        self.memos.update(state.load_memos(reached))
        green = self.green
        for qid in reached:
            for dep, recorded in flat(self.memos[qid].deps):
                if dep not in reached and not isinstance(dep, FileRead):
                    green[dep] = recorded
        for qid in root_ids:
            memo = self.memos.get(qid) if qid not in reached else None
            if memo is not None:
                green[qid] = memo.hash

    def _import_lock(self) -> None:
        """Take the graph from the lock when it changed under us (a fresh clone, a git pull).

        An entry naming an output where no output may be (outside the outputs' folder, in .git,
        the lock itself) is refused: a lock is a file anyone can edit in a pull request, and its
        outputs are files a build may remove."""
        imported = read_lock(self.engine.lock_path)
        for qid, memo in list(imported.items()):
            why = next(filter(None, (self.engine.outputs.problem(p, resolve=False) for p in memo.outputs)), None)
            if why is not None:
                del imported[qid]
                self.refused[qid] = (f"{self.lock_key}: the entry {qid} was ignored: {why}; "
                                     "review the change that brought it")
                self.changed.add(qid)  # the lock is written again without it
        if not self.read_only:  # a check or a dry run reads the lock; only a build takes it in
            keep = {q for q, m in imported.items() if self.memos.get(q) == m}
            self.state.replace_memos(imported.values(), keep_values_of=keep)
            self.state.set_meta("lock_hash", self.hasher.hash(self.lock_key))
            self.state.delete_meta(CLEAN)
        self.memos = imported

    # -- the no-op fast path ------------------------------------------------------------------

    def clean_summary(self, root_ids: list[str]) -> dict[str, Any] | None:
        """What the last build recorded when it left every query settled, if it still describes
        this build: the same lock, targets and rules."""
        if self.lock_changed or self.lock_behind:
            return None
        blob = self.state.get_meta(CLEAN)
        if blob is None:
            return None
        summary = json.loads(blob)
        if summary["targets"] != _targets_digest(root_ids):
            return None
        rules = self.engine.rules
        for name, fingerprint in summary["fingerprints"].items():
            r = rules.get(name)
            if r is None or r.fingerprint != fingerprint:
                return None
        return summary

    def changed_since(self, summary: dict[str, Any]) -> tuple[list[str], list[str]]:
        """The files read and the outputs written that changed since the summary: a stat per
        file, as `git status` does, and not the graph (nor the stat cache, when each file still
        has the stat the summary recorded with its hash)."""
        hasher, stats = self.hasher, summary.get("stats", {})

        def changed(path: str, digest: str) -> bool:
            recorded = stats.get(path)
            if recorded is not None and hasher.unchanged_since(path, recorded):
                return False
            return hasher.hash(path) != digest

        return ([path for path, digest in summary["files"].items() if changed(path, digest)],
                [path for path, digest in summary["outputs"].items() if changed(path, digest)])

    def _stats_of(self, summary: dict[str, Any]) -> dict[str, list[int]]:
        """The stat of each file the summary names, where the stat cache holds it with that hash."""
        cache = self.hasher.stat_cache
        return {path: list(entry[0]) for kind in ("files", "outputs") for path, digest in summary[kind].items()
                if (entry := cache.get(path)) is not None and entry[1] == digest}

    def still_clean(self, root_ids: list[str]) -> int | None:
        """The number of queries, when the whole graph is still settled; else None."""
        summary = self.clean_summary(root_ids)
        if summary is None or any(self.changed_since(summary)):
            return None
        return summary["queries"]

    def _record_clean(self, root_ids: list[str]) -> None:
        if self.failed or len(self.green) != len(self.memos):
            return
        files: dict[str, str] = {}
        outputs: dict[str, str] = {}
        fingerprints: dict[str, str] = {}
        for memo in self.memos.values():
            if fingerprints.setdefault(memo.rule, memo.fingerprint) != memo.fingerprint:
                return
            outputs.update(memo.outputs)
            for group in memo.deps:
                for dep, digest in group:
                    if isinstance(dep, FileRead):
                        files[dep.path] = digest
        summary = {"targets": _targets_digest(root_ids), "fingerprints": fingerprints, "files": files,
                   "outputs": outputs, "queries": len(self.memos)}
        summary["stats"] = self._stats_of(summary)
        self.state.set_meta(CLEAN, json.dumps(summary))

    def introduce(self, query: Query) -> None:
        """Make a query runnable by id: one nobody has built yet is known only by its Query."""
        if query.id not in self.queries:
            if self.engine.rules.get(query.rule.name) is not query.rule:
                self.engine.register(query.rule)
            self.queries[query.id] = query

    def close(self, save: bool = True) -> None:
        """Commit what this build settled (unless the state is damaged or only read) and close."""
        gc.unfreeze()  # a watch session builds again and again: let this build's graph go
        if save and not isinstance(self.stopped, StateDamaged):
            try:
                if self.hasher.changed_stats:
                    self.state.save_stats(self.hasher.stat_cache, self.hasher.changed_stats)
                used = {k: rules_module.SOURCES[k] for k in rules_module.SOURCES_USED if k in rules_module.SOURCES}
                if used and used != self.sources_seen:
                    self.state.set_meta("sources", json.dumps(used))
                self._commit()
            except sqlite3.Error as exc:
                # the last commit stands: what came after it is found again by the next build
                with contextlib.suppress(sqlite3.Error):
                    self.state.db.execute("ROLLBACK")
                if not self.stop(exc, "writing the local state .kbuild/state.db"):
                    self.state.db.close()
                    raise
        self.state.db.close()

    def stop(self, exc: BaseException, writing: str) -> bool:
        """Stop the build if `exc` stops it (a full disk, a damaged state); False if it does not."""
        stopped = _stop_for(exc, writing)
        if stopped is None:
            return False
        if self.stopped is None:
            self.stopped = stopped
        return True

    def _commit(self) -> None:
        """Commit the state; once memos changed, the same commit says the lock is behind them,
        so a build stopped before it writes the lock leaves the next build writing all of it."""
        if self.changed and not self.lock_behind and not self.lock_written:
            self.state.set_meta(LOCK_BEHIND, "1")
            self.lock_behind = True
        self.state.commit()

    def _maybe_commit(self) -> None:
        now = time.monotonic()
        if now - self.last_commit >= COMMIT_EVERY_S:
            self.state.save_stats(self.hasher.stat_cache, self.hasher.changed_stats)
            self.hasher.changed_stats.clear()
            self._commit()
            self.last_commit = now

    def _emit(self, event: str, qid: str) -> None:
        if self.observer is not None:
            self.observer(event, qid)

    # -- the synchronous first pass ---------------------------------------------------------

    def settle(self, roots: list[str]) -> None:
        """Settle, without running anything, every query whose recorded reads all still hold.

        An explicit stack rather than recursion or tasks, so a deep graph cannot overflow and a
        large one costs a loop over the edges loaded (after a few changes, only what they reach).
        """
        memos, green, must_run, unsure = self.memos, self.green, self.must_run, self.unsure
        file_hash, rules = self.hasher.hash, self.engine.rules
        cursor: dict[str, int] = {}
        first_reason: dict[str, Reason] = {}
        deps_of: dict[str, list[tuple[str, str]]] = {}
        for root in roots:
            stack = [root]
            while stack:
                qid = stack[-1]
                if qid in green or qid in must_run or qid in unsure:
                    stack.pop()
                    continue
                if qid not in cursor:
                    reason = outside_reads(memos.get(qid), rules, file_hash)
                    if reason:
                        must_run[qid] = reason
                        stack.pop()
                        continue
                    cursor[qid] = 0
                    deps_of[qid] = [dep for group in memos[qid].deps for dep in group]
                deps = deps_of[qid]
                i = cursor[qid]
                reason = first_reason.get(qid)
                descend = None
                # Past the first changed read, the rest are still settled: the query's verification
                # after its changed read is settled needs them, and they cost a stat here against
                # a task each in the asynchronous pass.
                while i < len(deps):
                    dep, recorded = deps[i]
                    i += 1
                    if isinstance(dep, FileRead):
                        if reason is None:
                            reason = read_changed(dep, recorded, file_hash(dep.path), "dry run")
                        continue
                    now = green.get(dep)
                    if now is None:
                        if dep in must_run or dep in unsure:
                            reason = reason or Reason.of(Change.DEPENDENCY_OUT_OF_DATE, dep)
                        elif dep in cursor:  # on the stack: a recorded cycle
                            reason = reason or Reason.of(Change.CYCLE, dep)
                        else:
                            descend = dep
                            i -= 1
                            break
                    elif reason is None:
                        reason = read_changed(dep, recorded, now, "dry run")
                if descend is not None:
                    cursor[qid] = i
                    if reason is not None:
                        first_reason[qid] = reason
                    stack.append(descend)
                    continue
                stack.pop()
                del cursor[qid], deps_of[qid]
                first_reason.pop(qid, None)
                if reason is None:
                    green[qid] = memos[qid].hash
                else:
                    unsure[qid] = reason

    # -- the asynchronous pass: run what must run ---------------------------------------------

    async def run(self, targets: list[Query], collect_garbage: bool) -> Report:
        started = time.perf_counter()
        for r in {t.rule for t in targets}:
            if self.engine.rules.get(r.name) is not r:
                self.engine.register(r)
        root_ids = [t.id for t in targets]
        report = self.report
        summary = self.clean_summary(root_ids)
        changed_files, changed_outputs = self.changed_since(summary) if summary else ([], [])
        if summary is not None and not changed_files and not changed_outputs:
            report.reused = summary["queries"]  # the no-op: nothing changed, the graph is not read
            report.seconds = time.perf_counter() - started
            return report
        for t in targets:  # past the no-op: the targets become runnable by id
            self.introduce(t)
        self.state.delete_meta(CLEAN)
        if summary is not None and collect_garbage:
            self.state.commit()  # a crash from here on leaves no summary: the next build reads the whole graph
            self.load_reached(changed_files, changed_outputs, root_ids)
        else:
            self.load_graph()
        self.settle(root_ids)
        await asyncio.gather(*(self.demand(q, None) for q in root_ids if q not in self.green))
        report.failed = dict(self.failed)
        if self.stopped is not None:
            return report  # nothing is collected and no lock written: the caller raises it
        if self.reached is None:
            report.reused = len(self.green) - len(report.executed)
            nothing_ran_and_all_settled = not report.executed and len(self.green) == len(self.memos)
            if collect_garbage and not nothing_ran_and_all_settled:
                self._collect_garbage(root_ids)
            self._sweep_temporaries()  # the slow path only: a crash always leaves the next build on it
            self._check_output_owners()
        else:
            self._collect_dropped(root_ids)
            report.reused = summary["queries"] - len(self.dead.keys() | {q for q in report.executed if q in self.replaced})
            self._check_new_outputs()
        self._finish_removals()
        for qid, why in self.refused.items():
            report.failed[qid] = why
            report.errors[qid] = Problem(why)  # it names the entry itself
        if self.changed or self.lock_behind or not self.engine.lock_path.exists():
            self._commit()  # first: the lock only ever describes a committed state
            self._write_lock()
        if self.reached is None:
            self._record_clean(root_ids)
        else:
            self._update_clean(summary, changed_files)
        report.calls = self.calls.calls
        report.cache_hits = self.calls.hits
        report.seconds = time.perf_counter() - started
        return report

    def _write_lock(self) -> None:
        data = None
        # The lock on disk is this state's when this code wrote it (not imported from a pull or
        # a merge) and its hash is the one recorded: then only the queries that changed are
        # rendered again.
        # A build that stopped before writing the lock left changes it does not know: all of it.
        if (not self.lock_changed and not self.lock_was_behind
                and self.hasher.hash(self.lock_key) == self.state.get_meta("lock_hash")):
            with contextlib.suppress(OSError, UnicodeDecodeError):
                data = patch_lock(self.engine.lock_path.read_bytes(), self.memos, self.changed)
        if data is None:
            data = render_lock(self.memos if self.reached is None else self.state.load_memos())
        try:
            atomic_write(self.engine.lock_path, data)
        except OSError as exc:
            self.stopped = self.stopped or _stop_for(exc, f"writing {self.lock_key}") or BuildStopped(
                f"cannot write {self.lock_key}: {exc.strerror or exc}; the outputs are written, run `kbuild` again")
            return
        digest = hash_bytes(data)
        self.state.set_meta("lock_hash", digest)
        self.state.delete_meta(LOCK_BEHIND)
        self.lock_behind, self.lock_written = False, True
        self.hasher.wrote(self.lock_key, digest)

    async def demand(self, qid: str, requester: str | None) -> str:
        """Bring one query up to date and return the hash its readers see."""
        settled = self.green.get(qid)
        if settled is not None:
            return settled
        if qid in self.failed:
            return FAILED
        task = self.tasks.get(qid)
        if task is None:
            task = asyncio.ensure_future(self._update(qid))
            self.tasks[qid] = task
        elif requester is not None and (cycle := self._cycle_path(qid, requester)) is not None:
            raise CycleError(cycle)
        if requester is None:
            return await task
        waiting = self.waits.setdefault(requester, set())
        waiting.add(qid)
        try:
            return await task
        finally:
            waiting.discard(qid)

    def _cycle_path(self, start: str, target: str) -> list[str] | None:
        """A path start -> ... -> target through queries waiting on one another, if any."""
        seen = {start}
        stack = [[start]]
        while stack:
            path = stack.pop()
            if path[-1] == target:
                return [target, *path]
            for nxt in self.waits.get(path[-1], ()):
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append([*path, nxt])
        return None

    def current_hash(self, qid: str) -> str:
        return self.green.get(qid) or FAILED

    async def _update(self, qid: str) -> str:
        memo = self.memos.get(qid)
        if self.reached is not None and qid not in self.reached and memo is not None:
            self.green[qid] = memo.hash  # no change reaches it: settled as recorded
            return memo.hash
        if memo is None and qid not in self.queries:
            # Read by a query in an earlier build, never built since (it failed): only a reader
            # running again can say whether it is still wanted, and with which rule.
            return UNKNOWN
        reason = self.must_run.get(qid) or outside_reads(memo, self.engine.rules, self.hasher.hash)
        if reason is None:
            assert memo is not None
            try:
                reason = await self._first_changed_read(qid, memo)
            except CycleError as exc:
                return self._fail(qid, str(exc), exc)
            if reason is None:
                self.green[qid] = memo.hash
                return memo.hash
        return await self._execute(qid, memo, reason)

    async def _first_changed_read(self, qid: str, memo: Memo) -> Reason | None:
        """Check recorded reads in order, bringing each up to date first; name the first changed."""
        green = self.green
        for group in memo.deps:
            unsettled = [dep for dep, _ in group if not isinstance(dep, FileRead) and dep not in green]
            seen: dict[str, str] = {}
            if len(unsettled) == 1:
                seen[unsettled[0]] = await self.demand(unsettled[0], qid)
            elif unsettled:  # brought up to date together; a task each only for these
                seen = dict(zip(unsettled, await asyncio.gather(*(self.demand(d, qid) for d in unsettled))))
            reason = first_changed_read(group, self.hasher.hash, lambda dep: seen.get(dep) or green[dep])
            if reason is not None:
                return reason
        return None

    def _query_for(self, qid: str) -> Query | None:
        known = self.queries.get(qid)
        if known is not None:
            return known
        memo = self.memos.get(qid)
        if memo is None:
            return None
        r = self.engine.rules.get(memo.rule)
        return Query(r, tuple(memo.key)) if r else None

    async def _execute(self, qid: str, memo: Memo | None, reason: Reason) -> str:
        query = self._query_for(qid)
        if query is None:
            return self._fail(qid, reason.sentence, None)
        if self.stopped is not None:  # no more model calls or writes: the build is ending
            return self._fail(qid, f"not run: {self.stopped}", None)
        rule = query.rule
        ctx = Context(self, query)
        self.report.reasons[qid] = reason.sentence
        self._emit("run", qid)
        try:
            try:
                value = await rule.fn(ctx, *query.key)
                blob = encode_value(value)
            except BaseException:
                # what a failed query read before it failed is still reached: garbage collection
                # must not take the pages under a query that failed on its first build
                self.attempted[qid] = ctx.deps
                raise
        except CycleError as exc:
            return self._fail(qid, str(exc), exc)
        except QueryFailed as exc:
            return self._fail(qid, f"needs {exc.query_id}, which failed", exc)
        except Problem as exc:
            return self._fail(qid, str(exc), exc)
        except Exception as exc:  # a rule's bug or bad input: this query fails, others go on
            # ... unless it is a full disk (a cache entry, a log) or a damaged state: that stops the build
            self.stop(exc, f"writing {exc.filename}" if getattr(exc, "filename", None) else f"while building {qid}")
            return self._fail(qid, f"{type(exc).__name__}: {exc}", exc)
        digest = hash_bytes(blob)
        cut: Literal["exact", "hook"] | None = None
        outputs_intact = memo is not None and self._outputs_intact(memo)
        if memo is not None and digest == memo.hash:
            cut = "exact"
        elif memo is not None and rule.cutoff is not None and outputs_intact and self.engine.cutoff_hooks:
            old_blob = self.state.load_value(qid)
            if old_blob is not None and hash_bytes(old_blob) == memo.hash:
                old_value = decode_value(old_blob)
                try:
                    hook = rule.cutoff
                    args = (ctx, old_value, decode_value(blob)) if _takes_context(hook) else (old_value, decode_value(blob))
                    verdict = hook(*args)
                    if inspect.isawaitable(verdict):
                        verdict = await verdict
                except Exception as exc:
                    return self._fail(qid, f"its cutoff hook raised {type(exc).__name__}: {exc}", exc)
                same = getattr(verdict, "same", verdict)
                if hasattr(verdict, "stage"):  # a classifier's decision: kept for the report and explain
                    self.report.decisions[qid] = {"same": bool(same), "stage": verdict.stage,
                                                  "probability": verdict.probability, "reason": verdict.reason}
                if same:
                    cut, blob, digest = "hook", old_blob, memo.hash
        try:
            if cut == "hook" and memo is not None:
                outputs = memo.outputs  # the old value stands, and so do its files
            else:
                outputs = self._write_outputs(ctx.outputs, memo.outputs if memo else {})
        except OSError as exc:
            self.stop(exc, f"writing {exc.filename}")
            return self._fail(qid, f"cannot write its output: {exc}", exc)
        notes = memo.notes if cut == "hook" and memo is not None else ctx.notes
        new = Memo(qid, rule.name, list(query.key), rule.fingerprint, ctx.deps, digest, outputs, notes)
        if memo is not None:
            self.replaced.setdefault(qid, memo)
            self.dropped |= {d for d, _ in flat(memo.deps) if not isinstance(d, FileRead)} - {d for d, _ in flat(new.deps)}
        self.memos[qid] = new
        try:
            self.state.save_memo(new, blob)
        except sqlite3.Error as exc:
            if not self.stop(exc, "writing the local state .kbuild/state.db"):
                raise
            return self._fail(qid, str(exc), exc)
        self.values[qid] = decode_value(blob)
        self.changed.add(qid)
        self.green[qid] = digest
        self.report.executed.append(qid)
        if cut:
            self.report.cutoff[qid] = cut
        self._emit("done", qid)
        try:
            self._maybe_commit()
        except sqlite3.Error as exc:
            if not self.stop(exc, "writing the local state .kbuild/state.db"):
                raise
        return digest

    def _fail(self, qid: str, message: str, exc: BaseException | None) -> str:
        self.failed[qid] = message
        if exc is not None:
            self.report.errors[qid] = exc
            exc.__kbuild_traceback__ = traceback.format_exc()  # type: ignore[attr-defined]
        self._emit("fail", qid)
        return FAILED

    def _outputs_intact(self, memo: Memo) -> bool:
        return all(self.hasher.hash(p) == d for p, d in memo.outputs.items())

    def _write_outputs(self, produced: dict[str, bytes], previous: dict[str, str]) -> dict[str, str]:
        area = self.engine.outputs
        written: dict[str, str] = {}
        for path, data in sorted(produced.items()):
            digest = hash_bytes(data)
            full = area.path(path)
            # an unchanged file is not touched; a symlink is replaced even when its target matches
            if self.hasher.hash(path) != digest or full.is_symlink():
                try:
                    atomic_write(full, data)
                except OSError as exc:
                    exc.filename = path  # the page, not its temporary file: what the user knows
                    raise
                self.hasher.wrote(path, digest)
            written[path] = digest
            self.produced.add(path)
        for path in previous.keys() - written.keys():
            self._remove_output(path, previous[path])
        return written

    def _remove_output(self, path: str, recorded: str) -> None:
        """Remove a file a query no longer produces, if it is still what kbuild wrote: never a
        file outside the outputs' folder, one whose content is not the recorded one (edited by
        hand, or never ours), or one a query reads (until it is read no more: see
        _finish_removals)."""
        if path in self.produced:  # another query makes it now
            return
        full = self.engine.root / path
        why = self.engine.outputs.problem(path)
        if why is None and full.is_symlink():
            why = f"{path} is a symlink now, not the file kbuild wrote"
        if why is None:
            current = self.hasher.hash(path)
            if current == ABSENT:
                return
            if current != recorded:
                why = f"{path} is not what kbuild wrote there (edited by hand?)"
        if why is None and self.state.readers([FileRead.of(path)]):
            self.read_removals[path] = recorded  # a query still reads it; decided at the end
            return
        if why is not None:
            self.report.warnings.setdefault(path, []).append(f"kept {path}, which no query produces any more: {why}; "
                                                             "remove it yourself if it is not wanted")
            return
        full.unlink(missing_ok=True)
        self.hasher.forget(path)
        for folder in full.parents:  # folders the removed files leave empty go too
            if folder == self.engine.root or not folder.is_relative_to(self.engine.root):
                break
            try:
                folder.rmdir()
            except OSError:  # not empty (or gone): stop climbing
                break
        self.report.removed.append(path)

    def _finish_removals(self) -> None:
        """Remove the files that were read when their writer stopped producing them, if no
        query reads them now (a raw copy under its old name), and keep those still read (a file
        a person writes, which a hostile lock named as an output)."""
        pending, self.read_removals = self.read_removals, {}
        for path, recorded in sorted(pending.items()):
            if not self.state.readers([FileRead.of(path)]) and not self.state.writers([path]):
                self._remove_output(path, recorded)

    async def value_of(self, qid: str) -> Any:
        """The value of a settled query, or its QueryFailed."""
        if qid in self.failed:
            return QueryFailed(qid, self.failed[qid])
        value = self.values.get(qid)
        if value is not None or qid in self.values:
            return value
        blob = self.state.load_value(qid)
        if blob is not None and hash_bytes(blob) == self.green.get(qid):
            value = decode_value(blob)
            self.values[qid] = value
            return value
        # Settled from the lock on a fresh clone: the value was never stored here; run it.
        task = self.forced.get(qid)
        if task is None:
            task = asyncio.ensure_future(self._execute(qid, self.memos.get(qid), Reason.of(Change.VALUE_NOT_STORED)))
            self.forced[qid] = task
        await task
        if qid in self.failed:
            return QueryFailed(qid, self.failed[qid])
        return self.values[qid]

    # -- the end of a build -----------------------------------------------------------------

    def _sweep_temporaries(self) -> None:
        """Remove what a crash left half-written: temporary files beside the outputs."""
        folders = {os.path.dirname(path) for memo in self.memos.values() for path in memo.outputs}
        for folder in folders:
            for leftover in (self.engine.root / folder).glob(f".*{TEMP_SUFFIX}"):
                leftover.unlink(missing_ok=True)

    def _collect_garbage(self, roots: list[str]) -> None:
        """Forget queries that no target reaches any more, and remove the files they made."""
        reached: set[str] = set()
        stack = list(roots)
        while stack:
            qid = stack.pop()
            if qid in reached or (qid not in self.memos and qid not in self.attempted):
                continue
            reached.add(qid)
            stack.extend(d for d, _ in flat(self.memos[qid].deps if qid in self.memos else []) if not isinstance(d, FileRead))
            stack.extend(d for d, _ in flat(self.attempted.get(qid, [])) if not isinstance(d, FileRead))
        dead = [q for q in self.memos if q not in reached]
        if not dead:
            return
        live_outputs = {p for q in reached for p in self.memos[q].outputs}
        self.state.delete_memos(dead)  # first, so that what only the dead read can go
        for qid in dead:
            for path, digest in self.memos.pop(qid).outputs.items():
                if path not in live_outputs:
                    self._remove_output(path, digest)
        self.changed.update(dead)

    def _check_output_owners(self) -> None:
        owner: dict[str, str] = {}
        for qid, memo in self.memos.items():
            for path in memo.outputs:
                other = owner.setdefault(path, qid)
                if other != qid:
                    self._same_output(qid, path, other)

    def _same_output(self, qid: str, path: str, other: str) -> None:
        self.report.failed[qid] = f"writes {path}, which {other} writes too; give one of them another path"

    def _check_new_outputs(self) -> None:
        for qid in self.report.executed:
            memo = self.memos.get(qid)
            if memo is None:
                continue
            for path, writers in self.state.writers(memo.outputs).items():
                for other in sorted(writers - {qid}):
                    self._same_output(qid, path, other)

    def _collect_dropped(self, roots: list[str]) -> None:
        """Forget the queries that re-run queries stopped reading and that nothing else reads
        (the last build left no other garbage), and remove the files they made."""
        state, keep, dead = self.state, set(roots), self.dead
        candidates = sorted(self.dropped)
        while candidates:
            qid = candidates.pop()
            if qid in keep or qid in dead or state.readers([qid]):
                continue
            memo = self.memos.get(qid)
            if memo is None:
                continue
            dead[qid] = memo
            state.delete_memos([qid])
            del self.memos[qid]
            writers = state.writers(memo.outputs)
            for path, digest in memo.outputs.items():
                if not writers.get(path):
                    self._remove_output(path, digest)
            candidates += [d for d, _ in flat(memo.deps) if not isinstance(d, FileRead)]
        self.changed |= dead.keys()

    def _update_clean(self, summary: dict[str, Any], changed_files: list[str]) -> None:
        """The summary of a build that loaded only what changes reached, brought up to date from
        the memos it replaced and removed, when it too left every query settled."""
        reached, dead = self.reached, self.dead
        assert reached is not None
        if self.failed or any(q not in self.green and q not in dead for q in reached):
            return
        files, outputs = summary["files"], summary["outputs"]
        touched = set(changed_files)
        for old in [*self.replaced.values(), *dead.values()]:
            for path in old.outputs:
                outputs.pop(path, None)
            touched |= {d.path for d, _ in flat(old.deps) if isinstance(d, FileRead)}
        for qid in self.report.executed:
            if qid in dead:
                continue
            memo = self.memos[qid]
            outputs.update(memo.outputs)
            touched |= {d.path for d, _ in flat(memo.deps) if isinstance(d, FileRead)}
            if memo.rule not in summary["fingerprints"]:
                summary["fingerprints"][memo.rule] = memo.fingerprint
        for path in touched:
            if self.state.readers([FileRead.of(path)]):
                files[path] = self.hasher.hash(path)
            else:
                files.pop(path, None)
        summary["queries"] += sum(q not in self.replaced for q in self.report.executed) - len(dead)
        summary["stats"] = self._stats_of(summary)
        self.state.set_meta(CLEAN, json.dumps(summary))


class _LazyMemos(dict[str, Memo]):
    """Memos loaded from the state when first asked for: a build that loaded only what its
    changes reach can still look up any query it meets."""

    def __init__(self, state: State) -> None:
        super().__init__()
        self.state = state

    def __missing__(self, qid: str) -> Memo:
        found = self.state.load_memos([qid])
        if not found:
            raise KeyError(qid)
        self[qid] = found[qid]
        return found[qid]

    def get(self, qid: str, default: Memo | None = None) -> Memo | None:  # type: ignore[override]
        try:
            return self[qid]
        except KeyError:
            return default

    def __contains__(self, qid: object) -> bool:
        return isinstance(qid, str) and self.get(qid) is not None
