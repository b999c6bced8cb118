"""Change propagation: after a few changes, settle what they reach from the bottom up.

Demand from the targets (demand.py) verifies every query a change may reach before it knows
that early cutoff stopped the change below: after one edited sentence in a source of 2,000
chunks, that is every query of the source. Here the queries the changes may reach are taken in
the recorded graph's order instead, and a query is looked at only when something it read has
changed: a change that is cut off costs the queries up to the cutoff.

Running a query from below is right only if the build would demand it from above (the property
test's minimality): a rule reads the same things, in the same order, while what it read before
is the same, so a query is certainly demanded when a reader that is certainly demanded read it
after reads that all still hold. A query that cannot be shown to be demanded, and everything
above it, is left to demand from the targets, as before.
"""
from __future__ import annotations

import asyncio
from collections import deque

from .demand import Demand
from .graphload import LazyMemos
from .hashing import FAILED
from .state import FileRead, PartHash, flat
from .verify import read_changed


class Propagate(Demand):
    async def propagate(self, changed_files: list[str], changed_outputs: list[str], root_ids: list[str]) -> None:
        """Settle every query the changed files and outputs reach, from the bottom up; then
        demand the targets, which settles what no change reached as recorded."""
        state = self.state
        seeds = state.readers(FileRead.of(p) for p in changed_files)
        for writers in state.writers(changed_outputs).values():
            seeds |= writers
        readers: dict[str, set[str]] = {}  # the recorded graph backwards, within what the changes may reach
        reach, frontier = set(seeds), set(seeds)
        while frontier:
            found: set[str] = set()
            for dep, reader in state.reads_of(frontier):
                readers.setdefault(dep, set()).add(reader)
                if reader not in reach:
                    found.add(reader)
            reach |= found
            frontier = found
        self.memos = LazyMemos(state)
        # Demand settles a query outside `reached` as recorded: during propagation that is every
        # query whose reads were all settled and none changed.
        self.reached = dirty = set(seeds)
        self._reach, self._readers, self._roots = reach, readers, set(root_ids)
        self._resolved: set[str] = set()  # settled, or known to hold, or left to demand
        self._demanded: set[str] = set()  # certainly demanded by this build (memoised)
        left: set[str] = set()  # queries left to demand from the targets, and all above them
        waits = dict.fromkeys(reach, 0)
        for dep, rs in readers.items():
            if dep in reach:
                for r in rs:
                    waits[r] += 1
        ready = deque(q for q, n in waits.items() if n == 0)
        running: dict[asyncio.Future[str], str] = {}
        undecided: list[str] = []  # changed reads, but not yet shown to be demanded

        def resolve(qid: str) -> None:
            self._resolved.add(qid)
            for r in readers.get(qid, ()):
                if qid in left:
                    left.add(r)
                waits[r] -= 1
                if waits[r] == 0:
                    ready.append(r)

        while ready or running or undecided:
            while ready:
                qid = ready.popleft()
                if qid in left:
                    dirty.add(qid)
                    resolve(qid)
                elif qid not in dirty:
                    resolve(qid)  # every read it made holds: settled as recorded when demanded
                elif self._certainly_demanded(qid):
                    running[asyncio.ensure_future(self.demand(qid, None))] = qid
                else:
                    undecided.append(qid)
            if running:
                done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    qid = running.pop(task)
                    task.result()
                    self._spread(qid, dirty)
                    resolve(qid)
                continue
            # Stalled: only undecided queries are left. What settled since may show some of them
            # demanded; the rest, and everything above them, go to demand from the targets.
            now_sure = [q for q in undecided if self._certainly_demanded(q)]
            for qid in now_sure:
                running[asyncio.ensure_future(self.demand(qid, None))] = qid
            if not now_sure:
                for qid in undecided:
                    left.add(qid)
                    dirty.add(qid)
                    resolve(qid)
            started = set(running.values())
            undecided = [q for q in undecided if q not in started and q not in left]
        # what never became ready is on a recorded cycle: demand from the targets reports it
        dirty |= {q for q, n in waits.items() if n > 0}
        await asyncio.gather(*(self.demand(q, None) for q in root_ids if q not in self.green))

    def _spread(self, qid: str, dirty: set[str]) -> None:
        """A query settled: the readers whose recorded read of it no longer holds have changed reads."""
        if qid not in self.replaced and qid not in self.failed:
            return  # verified without running: the hash its readers recorded
        now = self.green.get(qid, FAILED)
        candidates = [r for r in self._readers.get(qid, ()) if r not in dirty]
        self.memos.preload(candidates)
        parts = self.memos[qid].parts if qid in self.memos else None
        for r in candidates:
            for dep, recorded in flat(self.memos[r].deps):
                if dep == qid and read_changed(dep, recorded, now, parts=parts) is not None:
                    dirty.add(r)
                    break

    def _certainly_demanded(self, start: str) -> bool:
        """Whether this build demands `start`: it is a target, or a reader this build demands
        read it after reads that all hold (a rule reads the same things in the same order while
        what it read is the same)."""
        demanded = self._demanded
        via: dict[str, str] = {start: start}  # a reader -> the query it was found to demand
        stack = [start]
        while stack:
            qid = stack.pop()
            if qid in demanded or qid in self._roots:
                while qid != start:  # the whole chain down from it is demanded too
                    demanded.add(qid)
                    qid = via[qid]
                demanded.add(start)
                return True
            readers = [r for r in self._readers.get(qid, ()) if r not in via]
            self.preload(readers)
            for r in readers:
                if self._reads_before_hold(r, qid):
                    via[r] = qid
                    stack.append(r)
        return False

    def _reads_before_hold(self, reader: str, dep: str) -> bool:
        """Every read `reader` made before the group that reads `dep` still holds."""
        memo = self.memos.get(reader)
        if memo is None:
            return False
        for group in memo.deps:
            if any(d == dep for d, _ in group):
                return True
            for d, recorded in group:
                if isinstance(d, FileRead):
                    if self.hasher.hash(d.path) != recorded:
                        return False
                elif d not in self._reach or (d in self._resolved and d not in self.reached):
                    continue  # no change reaches it, or none did
                elif d in self.green:
                    parts = self.memos[d].parts if PartHash.part_of(recorded) is not None else None
                    if read_changed(d, recorded, self.green[d], parts=parts) is not None:
                        return False
                else:
                    return False  # not settled yet: nothing is known of it
        return False
