"""One build, step by step: load the recorded graph (or take the no-op fast path), settle
what verifies without running, demand the targets, then collect garbage and write the lock."""
from __future__ import annotations

import asyncio
import time

from .buildstate import LOCK_BEHIND
from .collect import Collect
from .demand import Demand
from .files import atomic_write
from .graphload import GraphLoading
from .hashing import hash_pieces
from .lockfile import LockError
from .report import BuildStopped, Problem, Report, stop_for
from .rule import Query
from .scan import Scan
from .snapshot import CLEAN, Snapshot, StatPass


UNFINISHED = "unfinished"  # meta key: a build started and has not ended (killed, stopped)


class Build(GraphLoading, Snapshot, Scan, Demand, Collect):
    """A build: the build state with every step of the algorithm."""

    async def run(self, targets: list[Query], collect_garbage: bool, stat_pass: StatPass | None = None) -> Report:
        """`stat_pass`: what a look at the files made just before this build found unchanged."""
        started = time.perf_counter()
        for r in {t.rule for t in targets}:
            self.engine.register(r)
        root_ids = [t.id for t in targets]
        report = self.report
        summary = self.clean_summary(root_ids, stat_pass)
        changed_files, changed_outputs = self.changed_since(summary, stat_pass) if summary else ([], [])
        if summary is not None and not changed_files and not changed_outputs:
            report.reused = summary["queries"]  # the no-op: nothing changed, the graph is not read
            self._complete_stats(summary)
            report.seconds = time.perf_counter() - started
            return report
        for t in targets:  # past the no-op: the targets become runnable by id
            self.introduce(t)
        self.state.delete_meta(CLEAN)
        self.state.set_meta(UNFINISHED, "1")
        # committed before any output is written: a crash from here on leaves no summary (the next
        # build reads the whole graph) and says that outputs may differ from their memos without
        # anyone having edited them (Engine.last_build_unfinished)
        self.state.commit()
        if summary is not None and collect_garbage:
            self.load_reached(changed_files, changed_outputs, root_ids)
        else:
            self.load_graph()
        self.settle(root_ids)
        await asyncio.gather(*(self.demand(q, None) for q in root_ids if q not in self.green))
        report.failed = {q: m for q, m in self.failed.items() if q not in self.waiting}
        report.waiting = {q: m for q, m in self.failed.items() if q in self.waiting}
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
        self.state.delete_meta(UNFINISHED)  # committed below, or when the build closes
        for qid, why in self.refused.items():
            report.failed[qid] = why
            report.errors[qid] = Problem(why)  # it names the entry itself
        if self.changed or self.lock_behind or self.lock_misplaced or not self.engine.lock_path.exists():
            self._commit()  # first: the lock only ever describes a committed state
            self._write_lock()
        if self.reached is None:
            self._record_clean(root_ids)
        else:
            self._update_clean(summary, changed_files)
        report.calls = self.calls.calls
        report.cache_hits = self.calls.hits
        if self.engine.cache_url:
            report.remote_hits = self.calls.remote_hits
        if self.calls.warnings:
            report.warnings.setdefault("", []).extend(self.calls.warnings)
        report.seconds = time.perf_counter() - started
        return report

    def _write_lock(self) -> None:
        lock, files = self.engine.lock, None
        # The lock on disk is this state's when this code wrote it (not imported from a pull or
        # a merge, nor laid out otherwise) and its hash is the one recorded: then only the
        # queries that changed are rendered again, in the files they lie in.
        # A build that stopped before writing the lock left changes it does not know: all of it.
        try:
            if (not self.lock_changed and not self.lock_was_behind and not self.lock_misplaced
                    and self.lock_digest() == self.state.get_meta("lock_hash")):
                files = lock.patch(self.memos, self.changed)
            if files is None:
                rendered = lock.render(self.memos if self.reached is None else self.state.load_memos())
                files = {f: None if data is None else [data] for f, data in rendered.items()}
            for file, pieces in sorted(files.items(), key=lambda item: item[0] == lock.path):  # kbuild.lock last
                key = self.hasher.key(file)
                if pieces is None:
                    file.unlink(missing_ok=True)
                    self.hasher.forget(key)
                else:
                    atomic_write(file, pieces)
                    self.hasher.wrote(key, hash_pieces(pieces))
            digests = self.lock_digests()
        except (OSError, LockError) as exc:
            why = exc.strerror or exc if isinstance(exc, OSError) else exc
            self.stopped = self.stopped or stop_for(exc, f"writing {self.lock_key}") or BuildStopped(
                f"cannot write {self.lock_key}: {why}; the outputs are written, run `kbuild` again")
            return
        self.remember_lock_digests(digests)
        self.state.delete_meta(LOCK_BEHIND)
        self.lock_behind, self.lock_written = False, True
