"""One build, step by step: load the recorded graph (or take the no-op fast path), settle
what verifies without running, demand the targets, then collect garbage and write the lock."""
from __future__ import annotations

import asyncio
import time

from .buildstate import LOCK_BEHIND, BuildState, Observer, Setup
from .collect import Collect
from .demand import Demand
from .execute import Execute
from .files import atomic_write
from .graphload import GraphLoading
from .hashing import hash_pieces
from .lockfile import LockError
from .outputs import Outputs
from .report import BuildStopped, Problem, Report, stop_for
from .rule import Query
from .scan import Scan
from .snapshot import CLEAN, Snapshot, StatPass
from .state import State


UNFINISHED = "unfinished"  # meta key: a build started and has not ended (killed, stopped)


class Build:
    """A build: its records, and the step of the algorithm that each collaborator takes."""

    def __init__(self, engine: Setup, state: State, refresh: bool, observer: Observer | None,
                 read_only: bool = False) -> None:
        self.db = db = BuildState(engine, state, refresh, observer, read_only)
        self.graph = GraphLoading(db)
        self.snapshot = Snapshot(db)
        self.scan = Scan(db, self.graph)
        self.outputs = Outputs(db)
        self.execute = Execute(db, self.outputs)
        self.demand = Demand(db, self.graph, self.scan, self.execute)
        self.collect = Collect(db, self.outputs, self.execute)

    async def run(self, targets: list[Query], collect_garbage: bool, stat_pass: StatPass | None = None) -> Report:
        """`stat_pass`: what a look at the files made just before this build found unchanged."""
        started = time.perf_counter()
        db, graph, snapshot, collect = self.db, self.graph, self.snapshot, self.collect
        for r in {t.rule for t in targets}:
            db.engine.register(r)
        root_ids = [t.id for t in targets]
        report = db.report
        summary = snapshot.clean_summary(root_ids, stat_pass)
        changed_files, changed_outputs = snapshot.changed_since(summary, stat_pass) if summary else ([], [])
        if summary is not None and not changed_files and not changed_outputs:
            report.reused = summary.queries  # the no-op: nothing changed, the graph is not read
            snapshot.complete_stats(summary)
            report.seconds = time.perf_counter() - started
            return report
        for t in targets:  # past the no-op: the targets become runnable by id
            db.introduce(t)
        db.state.delete_meta(CLEAN)
        db.state.set_meta(UNFINISHED, "1")
        # committed before any output is written: a crash from here on leaves no summary (the next
        # build reads the whole graph) and says that outputs may differ from their memos without
        # anyone having edited them (Engine.last_build_unfinished)
        db.state.commit()
        if summary is not None and collect_garbage:
            graph.load_reached(changed_files, changed_outputs, root_ids)
        else:
            graph.load_graph()
        self.scan.settle(root_ids)
        await asyncio.gather(*(self.demand.demand(q, None) for q in root_ids if q not in db.green))
        report.failed = {q: m for q, m in db.failed.items() if q not in db.waiting}
        report.waiting = {q: m for q, m in db.failed.items() if q in db.waiting}
        if db.stopped is not None:
            return report  # nothing is collected and no lock written: the caller raises it
        if graph.reached is None:
            report.reused = len(db.green) - len(report.executed)
            nothing_ran_and_all_settled = not report.executed and len(db.green) == len(db.memos)
            if collect_garbage and not nothing_ran_and_all_settled:
                collect.collect_garbage(root_ids)
            collect.sweep_temporaries()  # the slow path only: a crash always leaves the next build on it
            collect.check_output_owners()
        else:
            collect.collect_dropped(root_ids)
            report.reused = summary.queries - len(collect.dead.keys() | {q for q in report.executed if q in db.replaced})
            collect.check_new_outputs()
        self.outputs.finish_removals()
        db.state.delete_meta(UNFINISHED)  # committed below, or when the build closes
        for qid, why in db.refused.items():
            report.failed[qid] = why
            report.errors[qid] = Problem(why)  # it names the entry itself
        if db.changed or db.lock_behind or db.lock_misplaced or not db.engine.lock_path.exists():
            db.commit()  # first: the lock only ever describes a committed state
            self._write_lock()
        if graph.reached is None:
            snapshot.record_clean(root_ids)
        else:
            snapshot.update_clean(summary, changed_files, graph.reached, collect.dead)
        report.calls = db.calls.calls
        report.cache_hits = db.calls.hits
        if db.engine.cache_url:
            report.remote_hits = db.calls.remote_hits
        if db.calls.warnings:
            report.warnings.setdefault("", []).extend(db.calls.warnings)
        report.seconds = time.perf_counter() - started
        return report

    def _write_lock(self) -> None:
        lock, files = self.db.engine.lock, None
        # The lock on disk is this state's when this code wrote it (not imported from a pull or
        # a merge, nor laid out otherwise) and its hash is the one recorded: then only the
        # queries that changed are rendered again, in the files they lie in.
        # A build that stopped before writing the lock left changes it does not know: all of it.
        try:
            if (not self.db.lock_changed and not self.db.lock_was_behind and not self.db.lock_misplaced
                    and self.db.lock_digest() == self.db.state.get_meta("lock_hash")):
                files = lock.patch(self.db.memos, self.db.changed)
            if files is None:
                rendered = lock.render(self.db.memos if self.graph.reached is None else self.db.state.load_memos())
                files = {f: None if data is None else [data] for f, data in rendered.items()}
            for file, pieces in sorted(files.items(), key=lambda item: item[0] == lock.path):  # kbuild.lock last
                key = self.db.hasher.key(file)
                if pieces is None:
                    file.unlink(missing_ok=True)
                    self.db.hasher.forget(key)
                else:
                    atomic_write(file, pieces)
                    self.db.hasher.wrote(key, hash_pieces(pieces))
            digests = self.db.lock_digests()
        except (OSError, LockError) as exc:
            why = exc.strerror or exc if isinstance(exc, OSError) else exc
            self.db.stopped = self.db.stopped or stop_for(exc, f"writing {self.db.lock_key}") or BuildStopped(
                f"cannot write {self.db.lock_key}: {why}; the outputs are written, run `kbuild` again")
            return
        self.db.remember_lock_digests(digests)
        self.db.state.delete_meta(LOCK_BEHIND)
        self.db.lock_behind, self.db.lock_written = False, True
