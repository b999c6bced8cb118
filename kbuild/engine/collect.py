"""Garbage collection at the end of a build: forget the queries no target reaches any more,
remove the files they made, and what a crash left half-written."""
from __future__ import annotations

import os

from .files import TEMP_SUFFIX
from .outputs import Outputs
from .state import FileRead, flat


class Collect(Outputs):
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
        # a reached query that failed on its first build has no memo, and no outputs
        live_outputs = {p for q in reached if q in self.memos for p in self.memos[q].outputs}
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
