"""The synchronous first pass: settle, without running anything, what verifies as recorded."""
from __future__ import annotations

from .buildstate import BuildState
from .graphload import GraphLoading
from .verify import HOLDS, UNSETTLED, Change, Reason, ValuesNow, Walked, outside_reads, walk_reads


class Scan:
    """The settle pass, and what it found must or may have to run."""

    def __init__(self, db: BuildState, graph: GraphLoading) -> None:
        self.db, self.graph = db, graph
        self.must_run: dict[str, Reason] = {}  # query id -> why it cannot be reused
        self.unsure: dict[str, Reason] = {}  # a read is out of date: verify once that one is settled

    def settle(self, roots: list[str]) -> None:
        """Settle, without running anything, every query whose recorded reads all still hold.

        An explicit stack rather than recursion or tasks, so a deep graph cannot overflow and a
        large one costs a loop over the edges loaded (after a few changes, only what they reach).
        """
        memos, green, must_run, unsure = self.db.memos, self.db.green, self.must_run, self.unsure
        # behind a gate: settled by demand, once the gate is (graphload.py); nothing runs here
        behind = self.graph.behind_gates.keys() - (self.graph.reached or ())
        file_hash, rules = self.db.hasher.hash, self.db.engine.rules
        walking: dict[str, Walked] = {}  # queries on the stack: where each one's walk stopped

        def settled_now(dep: str) -> str | Reason:
            now = green.get(dep)
            if now is not None:
                return now
            if dep in must_run or dep in unsure or dep in behind:
                return Reason.of(Change.DEPENDENCY_OUT_OF_DATE, dep)
            if dep in walking:  # on the stack: a recorded cycle
                return Reason.of(Change.CYCLE, dep)
            return UNSETTLED  # walked first: the reader waits on the stack below it

        def parts_of(dep: str) -> dict[str, str] | None:
            memo = memos.get(dep)
            return None if memo is None else memo.parts

        now = ValuesNow(file_hash, settled_now, parts_of, "dry run")
        for root in roots:
            stack = [root]
            while stack:
                qid = stack[-1]
                if qid in green or qid in must_run or qid in unsure:
                    stack.pop()
                    continue
                if qid in behind:
                    unsure[qid] = Reason.of(Change.DEPENDENCY_OUT_OF_DATE, qid)
                    stack.pop()
                    continue
                stopped = walking.get(qid)
                if stopped is None:
                    reason = outside_reads(memos.get(qid), rules, self.db.sources, file_hash)
                    if reason:
                        must_run[qid] = reason
                        stack.pop()
                        continue
                    stopped = walking[qid] = HOLDS
                # Past the first changed read, the rest are still settled: the query's verification
                # after its changed read is settled needs them, and they cost a stat here against
                # a task each in the asynchronous pass.
                walked = walk_reads(memos[qid].deps, now, stopped.at, to_the_end=True, changed=stopped.changed)
                if walked.waits_for is not None:
                    walking[qid] = walked
                    stack.append(walked.waits_for)
                    continue
                stack.pop()
                del walking[qid]
                if walked.changed is None:
                    green[qid] = memos[qid].hash
                else:
                    unsure[qid] = walked.changed
