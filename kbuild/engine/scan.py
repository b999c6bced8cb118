"""The synchronous first pass: settle, without running anything, what verifies as recorded."""
from __future__ import annotations

from .buildstate import BuildState
from .graphload import GraphLoading
from .state import FileRead, PartHash
from .verify import Change, Reason, outside_reads, read_changed


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
                if qid in behind:
                    unsure[qid] = Reason.of(Change.DEPENDENCY_OUT_OF_DATE, qid)
                    stack.pop()
                    continue
                if qid not in cursor:
                    reason = outside_reads(memos.get(qid), rules, self.db.sources, file_hash)
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
                        if dep in must_run or dep in unsure or dep in behind:
                            reason = reason or Reason.of(Change.DEPENDENCY_OUT_OF_DATE, dep)
                        elif dep in cursor:  # on the stack: a recorded cycle
                            reason = reason or Reason.of(Change.CYCLE, dep)
                        else:
                            descend = dep
                            i -= 1
                            break
                    elif reason is None:
                        parts = memos[dep].parts if PartHash.part_of(recorded) is not None and dep in memos else None
                        reason = read_changed(dep, recorded, now, "dry run", parts)
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
