"""Garbage collection at the end of a build: forget the queries no target reaches any more,
remove the files they made, and what a crash left half-written."""
from __future__ import annotations

import os

from .files import TEMP_SUFFIX
from .buildstate import BuildState
from .execute import Execute
from .outputs import Outputs
from .state import FileRead, Memo, flat


class Collect:
    """What a build forgets at its end, and the outputs no query owns alone."""

    def __init__(self, db: BuildState, outputs: Outputs, execute: Execute) -> None:
        self.db, self.outputs, self.execute = db, outputs, execute
        self.dead: dict[str, Memo] = {}  # what garbage collection forgot, after a partial load

    def sweep_temporaries(self) -> None:
        """Remove what a crash left half-written: temporary files beside the outputs."""
        folders = {os.path.dirname(path) for memo in self.db.memos.values() for path in memo.outputs}
        for folder in folders:
            for leftover in (self.db.engine.root / folder).glob(f".*{TEMP_SUFFIX}"):
                leftover.unlink(missing_ok=True)

    def collect_garbage(self, roots: list[str]) -> None:
        """Forget queries that no target reaches any more, and remove the files they made.

        A query reaches what its memo read and, when it failed in this build, what its failed
        run read: one failing on its first run has no memo, and what it read is still wanted (a
        source's copy under a page that failed), as are the queries an earlier value read."""
        reached: set[str] = set()
        live_outputs: set[str] = set()
        stack = list(roots)
        while stack:
            qid = stack.pop()
            if qid in reached:
                continue
            reached.add(qid)
            memo = self.db.memos.get(qid)  # none: never built (it failed), or read as failed
            if memo is not None:
                live_outputs.update(memo.outputs)
                stack.extend(d for d, _ in flat(memo.deps) if not isinstance(d, FileRead))
            stack.extend(d for d, _ in flat(self.execute.attempted.get(qid, [])) if not isinstance(d, FileRead))
        dead = [q for q in self.db.memos if q not in reached]
        if not dead:
            return
        self.db.state.delete_memos(dead)  # first, so that what only the dead read can go
        for qid in dead:
            for path, digest in self.db.memos.pop(qid).outputs.items():
                if path not in live_outputs:
                    self.outputs.remove(path, digest)
        self.db.changed.update(dead)

    def check_output_owners(self) -> None:
        owner: dict[str, str] = {}
        for qid, memo in self.db.memos.items():
            for path in memo.outputs:
                other = owner.setdefault(path, qid)
                if other != qid:
                    self._same_output(qid, path, other)

    def _same_output(self, qid: str, path: str, other: str) -> None:
        self.db.report.failed[qid] = f"writes {path}, which {other} writes too; give one of them another path"

    def check_new_outputs(self) -> None:
        for qid in self.db.report.executed:
            memo = self.db.memos.get(qid)
            if memo is None:
                continue
            for path, writers in self.db.state.writers(memo.outputs).items():
                for other in sorted(writers - {qid}):
                    self._same_output(qid, path, other)

    def collect_dropped(self, roots: list[str]) -> None:
        """Forget the queries that re-run queries stopped reading and that nothing else reads
        (the last build left no other garbage), and remove the files they made. What a failed
        run read is read: a query runs only when a reader's run or check asks for it, and a
        reader that runs again asks for what it asked for before the read that changed, so a
        query that failed here is still read by a query that ran, or by a target."""
        state, keep, dead = self.db.state, set(roots), self.dead
        keep.update(d for deps in self.execute.attempted.values() for d, _ in flat(deps) if not isinstance(d, FileRead))
        candidates = sorted(self.execute.dropped)
        while candidates:
            qid = candidates.pop()
            if qid in keep or qid in dead or state.readers([qid]):
                continue
            memo = self.db.memos.get(qid)
            if memo is None:
                continue
            dead[qid] = memo
            state.delete_memos([qid])
            del self.db.memos[qid]
            writers = state.writers(memo.outputs)
            for path, digest in memo.outputs.items():
                if not writers.get(path):
                    self.outputs.remove(path, digest)
            candidates += [d for d, _ in flat(memo.deps) if not isinstance(d, FileRead)]
        self.db.changed |= dead.keys()
