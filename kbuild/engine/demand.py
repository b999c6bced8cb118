"""Demand: bring one query up to date, verifying its recorded reads in order (each brought up
to date first) and running it when one changed; with cycle detection among waiting queries."""
from __future__ import annotations

import asyncio
from typing import Any

from .execute import Execute
from .hashing import FAILED, UNKNOWN, decode_value, hash_bytes
from .report import CycleError, QueryFailed
from .state import FileRead, Memo
from .verify import Change, Reason, first_changed_read, outside_reads


class Demand(Execute):
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
        reason = self.must_run.get(qid) or outside_reads(memo, self.engine.rules, self.sources, self.hasher.hash)
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
            reason = first_changed_read(group, self.hasher.hash, lambda dep: seen.get(dep) or green[dep],
                                        parts_of=self._parts_of)
            if reason is not None:
                return reason
        return None

    def _parts_of(self, qid: str) -> dict[str, str] | None:
        memo = self.memos.get(qid)  # settled: the memo of the value that stands
        return memo.parts if memo is not None else None

    async def value_of(self, qid: str) -> Any:
        """The value of a settled query, or its QueryFailed."""
        if qid in self.failed:
            return QueryFailed(qid, self.failed[qid], waiting=qid in self.waiting)
        value = self.values.get(qid)
        if value is not None or qid in self.values:
            return value
        blob = self.state.load_value(qid)
        if blob is not None and hash_bytes(blob) == self.green.get(qid):
            query = self._query_for(qid)
            value = query.rule.decode(blob) if query is not None else decode_value(blob)
            self.values[qid] = value
            return value
        # Settled from the lock on a fresh clone: the value was never stored here; run it.
        task = self.forced.get(qid)
        if task is None:
            task = asyncio.ensure_future(self._execute(qid, self.memos.get(qid), Reason.of(Change.VALUE_NOT_STORED)))
            self.forced[qid] = task
        await task
        if qid in self.failed:
            return QueryFailed(qid, self.failed[qid], waiting=qid in self.waiting)
        return self.values[qid]
