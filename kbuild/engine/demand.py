"""Demand: bring one query up to date, verifying its recorded reads in order (each brought up
to date first) and running it when one changed; with cycle detection among waiting queries.

Verification is synchronous: a query being verified is a frame, suspended while a read it
verifies waits for a query that runs, and resumed when that one settles. Only running a rule
is a task. After an edit, most of what an edit reaches verifies without running, and a task
each (two turns of the event loop, a wake-up per reader) was most of the time of such a build:
23,600 queries checked after one sentence edited in a source of 2,000 chunks.
"""
from __future__ import annotations

import asyncio
import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .buildstate import BuildState
from .execute import Execute
from .graphload import GraphLoading
from .hashing import FAILED, UNKNOWN, decode_value, hash_bytes, part_bytes, part_places
from .report import CycleError, QueryFailed
from .scan import Scan
from .state import FileRead, Memo, PartHash
from .verify import Change, Reason, ValuesNow, outside_reads, walk_reads


@dataclass(eq=False)
class Frame:
    """One query being brought up to date: the group of reads it is verifying, how many of
    that group's queries it still waits for, and who waits for it."""

    qid: str
    memo: Memo | None
    group: int = 0
    blocked: int = 0
    result: str | None = None  # the hash its readers see, once settled
    error: BaseException | None = None  # a running rule raised past the engine: it fails the build
    readers: list[Frame] = field(default_factory=list)  # frames waiting for this one
    future: asyncio.Future[str] | None = None  # made only when a task awaits it
    probing: bool = False  # verifying one read behind a gate first, so the others can wait for it


class Demand:
    """Brings queries up to date: the frames being verified, and the rules running."""

    def __init__(self, db: BuildState, graph: GraphLoading, scan: Scan, execute: Execute) -> None:
        self.db, self.graph, self.scan, self.execute = db, graph, scan, execute
        self.frames: dict[str, Frame] = {}  # queries being brought up to date, and those settled so
        self.ready: list[Frame] = []  # frames that can go on
        self.draining = False
        self.running: set[asyncio.Task[str]] = set()  # rules running, held so none is collected
        self.forced: dict[str, asyncio.Task[str]] = {}
        self.waits: dict[str, set[str]] = {}
        # a read's hash now is the one its query was brought up to date to: a group is walked
        # once every query it reads is settled
        self.now = ValuesNow(db.hasher.hash, self._hash_now, self._parts_of)

    async def demand(self, qid: str, requester: str | None) -> str:
        """Bring one query up to date and return the hash its readers see."""
        return (await self.demand_all([qid], requester))[0]

    async def demand_all(self, qids: Sequence[str], requester: str | None) -> list[str]:
        """Bring queries up to date together and return the hash readers see of each. Each is
        started at once, not as a task: a cold build's root reads every query, and a task per
        read delayed the first model call by a turn of the event loop over all of them."""
        hashes: list[str | None] = []
        pending: dict[str, asyncio.Future[str]] = {}
        for qid in qids:
            got = self._begin(qid, requester)
            if isinstance(got, str):
                hashes.append(got)
            else:
                hashes.append(None)
                pending[qid] = got
        if not pending:
            return hashes  # type: ignore[return-value]
        waiting = None if requester is None else self.waits.setdefault(requester, set())
        if waiting is not None:
            waiting.update(pending)
        try:
            if len(pending) == 1:
                results = [await next(iter(pending.values()))]
            else:
                results = await asyncio.gather(*pending.values())
        finally:
            if waiting is not None:
                waiting.difference_update(pending)
        found = dict(zip(pending, results))
        return [found[qid] if known is None else known for qid, known in zip(qids, hashes)]

    def _begin(self, qid: str, requester: str | None) -> str | asyncio.Future[str]:
        """The hash readers see of a settled query, or a future for it, its frame started."""
        settled = self.db.green.get(qid)
        if settled is not None:
            return settled
        if qid in self.db.failed:
            return FAILED
        frame = self.frames.get(qid)
        if frame is None:
            frame = self._start(qid)
        elif frame.result is None and requester is not None and (cycle := self._cycle_path(qid, requester)) is not None:
            raise CycleError(cycle)
        if frame.result is not None or frame.error is not None:
            return self._outcome(frame)
        if frame.future is None:
            frame.future = asyncio.get_running_loop().create_future()
        return frame.future

    @staticmethod
    def _outcome(frame: Frame) -> str:
        if frame.error is not None:
            raise frame.error
        assert frame.result is not None
        return frame.result

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
        return self.db.green.get(qid) or FAILED

    # -- verification, without tasks ------------------------------------------------------

    def _start(self, qid: str) -> Frame:
        frame = Frame(qid, self.db.memos.get(qid))
        self.frames[qid] = frame
        self.ready.append(frame)
        self._drain()
        return frame

    def _drain(self) -> None:
        """Advance every frame that can go on. Re-entered from a settling frame's readers, it
        returns at once: the outer loop takes them."""
        if self.draining:
            return
        self.draining = True
        try:
            ready = self.ready
            while ready:
                self._advance(ready.pop())
        finally:
            self.draining = False

    def _advance(self, frame: Frame) -> None:
        qid, memo = frame.qid, frame.memo
        graph = self.graph
        if frame.group == 0 and frame.blocked == 0:
            if graph.reached is not None and qid not in graph.reached and memo is not None:
                gates = graph.behind_open_gate(qid)  # a change let through a gate puts it in the reach
                if qid not in graph.reached:
                    if not gates:
                        self.db.green[qid] = memo.hash  # no change reaches it: settled as recorded
                        return self._settle(frame, memo.hash)
                    if self._wait_for_gates(frame, gates):
                        return  # resumed when they are settled, and looked at again
                # behind a gate no one is settling yet, or in the reach: verified as reached queries are
            if memo is None and qid not in self.db.queries:
                # Read by a query in an earlier build, never built since (it failed): only a reader
                # running again can say whether it is still wanted, and with which rule.
                return self._settle(frame, UNKNOWN)
            reason = self.scan.must_run.get(qid) or outside_reads(memo, self.db.engine.rules, self.db.sources, self.db.hasher.hash)
            if reason is not None:
                return self._run(frame, reason)
        assert memo is not None
        green, failed, frames = self.db.green, self.db.failed, self.frames
        groups = memo.deps
        while frame.group < len(groups):
            group = groups[frame.group]
            if frame.blocked == 0:
                probe = None
                for dep, recorded in group:
                    if isinstance(dep, FileRead) or dep in green or dep in failed:
                        continue
                    if dep in graph.behind_gates and dep not in graph.reached and dep not in frames:
                        gates = graph.behind_open_gate(dep)
                        if not gates and dep not in graph.reached and PartHash.part_of(recorded) is None:
                            green[dep] = recorded  # behind gates that let no change through
                            continue
                        if gates and self._wait_for_gates(frame, gates):
                            continue
                        if gates and not frame.probing:
                            # No one settles its gates yet. Verified one by one, each read would
                            # load and check its memo; so the first is verified alone (it comes
                            # to a gate), then the others are looked at again (once per group).
                            if probe is None:
                                probe = dep
                            continue
                    other = frames.get(dep)
                    if other is None:
                        other = Frame(dep, self.db.memos.get(dep))
                        frames[dep] = other
                        self.ready.append(other)
                    elif other.result is not None or other.error is not None:
                        continue
                    elif dep in self.waits.get(qid, ()):
                        continue  # the same query read twice in one group (two of its parts)
                    elif (cycle := self._cycle_path(dep, qid)) is not None:
                        self._unblock(frame)
                        exc = CycleError(cycle)
                        return self._settle(frame, self.execute.fail(qid, str(exc), exc))
                    other.readers.append(frame)
                    self.waits.setdefault(qid, set()).add(dep)
                    frame.blocked += 1
                if probe is not None:
                    frame.probing = True
                    other = Frame(probe, self.db.memos.get(probe))
                    frames[probe] = other
                    self.ready.append(other)
                    other.readers.append(frame)
                    self.waits.setdefault(qid, set()).add(probe)
                    frame.blocked += 1
                if frame.blocked:
                    return  # resumed when the last of them settles
            reason = walk_reads((group,), self.now).changed
            if reason is not None:
                return self._run(frame, reason)
            frame.group += 1
            frame.probing = False
        self.db.green[qid] = memo.hash
        self._settle(frame, memo.hash)

    def _wait_for_gates(self, frame: Frame, gates: list[str]) -> bool:
        """Make `frame` wait for the gates it or a read of it lies behind, if each is being
        settled already: waiting starts nothing a clean build would not. False if one is not."""
        others = [self.frames.get(g) for g in gates]
        if any(o is None or o.result is not None or o.error is not None for o in others):
            return False
        waiting = self.waits.setdefault(frame.qid, set())
        new = [o for o in others if o is not None and o.qid not in waiting]
        if any(self._cycle_path(o.qid, frame.qid) is not None for o in new):
            return False
        for other in new:
            other.readers.append(frame)
            waiting.add(other.qid)
            frame.blocked += 1
        return True

    def _unblock(self, frame: Frame) -> None:
        """Stop waiting for the group's queries (a cycle failed this frame)."""
        for dep in self.waits.pop(frame.qid, ()):
            other = self.frames.get(dep)
            if other is not None and frame in other.readers:
                other.readers.remove(frame)
        frame.blocked = 0

    def _hash_now(self, qid: str) -> str:
        settled = self.db.green.get(qid)
        if settled is not None:
            return settled
        frame = self.frames.get(qid)
        if frame is not None and frame.result is not None:
            return frame.result  # UNKNOWN, for a query nobody can build
        return FAILED

    def _run(self, frame: Frame, reason: Reason) -> None:
        task = asyncio.ensure_future(self.execute.run(frame.qid, frame.memo, reason, self))
        self.running.add(task)
        task.add_done_callback(lambda t: self._ran(frame, t))

    def _ran(self, frame: Frame, task: asyncio.Task[str]) -> None:
        self.running.discard(task)
        if task.cancelled():
            self._settle(frame, None, asyncio.CancelledError())
        elif (exc := task.exception()) is not None:
            self._settle(frame, None, exc)
        else:
            self._settle(frame, task.result())
        self._drain()

    def _settle(self, frame: Frame, result: str | None, error: BaseException | None = None) -> None:
        """The frame's query is settled (or its rule raised past the engine): wake its readers."""
        frame.result, frame.error = result, error
        if frame.future is not None and not frame.future.done():
            if isinstance(error, asyncio.CancelledError):
                frame.future.cancel()
            elif error is not None:
                frame.future.set_exception(error)
            else:
                frame.future.set_result(result)  # type: ignore[arg-type]
        for reader in frame.readers:
            waiting = self.waits.get(reader.qid)
            if waiting is not None:
                waiting.discard(frame.qid)
            if error is not None and reader.error is None:
                reader.blocked = 0
                self._settle(reader, None, error)
                continue
            reader.blocked -= 1
            if reader.blocked == 0:
                self.ready.append(reader)
        frame.readers = []

    def _parts_of(self, qid: str) -> dict[str, str] | None:
        memo = self.db.memos.get(qid)  # settled: the memo of the value that stands
        return memo.parts if memo is not None else None

    def stored_values(self, qids: Sequence[str]) -> dict[str, Any]:
        """The values of those settled `qids` known or stored here (a failed one as its
        QueryFailed), with one read of the state for all; the others must run (`value_of`)."""
        found: dict[str, Any] = {}
        unknown = []
        for qid in qids:
            if qid in self.db.failed:
                found[qid] = QueryFailed(qid, self.db.failed[qid], waiting=qid in self.db.waiting)
            elif qid in self.db.values:
                found[qid] = self.db.values[qid]
            else:
                unknown.append(qid)
        stored = self.db.state.load_values(unknown)
        # a value is decoded by its rule, which a query met only as a recorded read (settled as
        # recorded, its memo not loaded) names in its memo: those memos are loaded together
        self.db.memos.update(self.db.state.load_memos(
            [q for q in stored if q not in self.db.queries and not dict.__contains__(self.db.memos, q)]))
        for qid, blob in stored.items():
            if hash_bytes(blob) == self.db.green.get(qid):
                query = self.execute.query_for(qid)
                found[qid] = self.db.values[qid] = query.rule.decode(blob) if query is not None else decode_value(blob)
        return found

    def stored_part(self, qid: str, part: str) -> tuple[Any] | None:
        """(one entry of a settled query's stored value,), read from the entry's bytes alone; None
        when the whole value must be read (it failed, is decoded already, is not stored here, or
        the entry cannot be told from its bytes: hashing.part_bytes). A value of thousands of
        entries, of which a build after an edit reads a few, is not decoded whole for them."""
        if qid in self.db.failed or qid in self.db.values:
            return None
        memo = self.db.memos.get(qid)
        if memo is None:  # settled as recorded: its memo was not loaded
            memo = self.db.state.load_memos([qid]).get(qid)
            if memo is None:
                return None
            self.db.memos[qid] = memo
        if not memo.parts:
            return None
        if part not in memo.parts:
            return (None,)
        found = self.db.part_blobs.get(qid)  # the value this build made, or one read before
        if found is None:
            blob = self.db.state.load_value(qid)
            if blob is None or hash_bytes(blob) != self.db.green.get(qid) or blob[:2] != b"j{":
                return None
            found = self.db.part_blobs[qid] = (blob, sorted(memo.parts), None)
        blob, names, places = found
        if places is None:  # found once per value, in one pass: a cold build reads each of its parts
            places = part_places(blob, names)
            self.db.part_blobs[qid] = (blob, names, places)
        entry = part_bytes(blob, places, bisect.bisect_left(names, part), memo.parts[part])
        return None if entry is None else (decode_value(b"j" + entry),)

    async def value_of(self, qid: str) -> Any:
        """The value of a settled query, or its QueryFailed."""
        found = self.stored_values([qid])
        if qid in found:
            return found[qid]
        # Settled from the lock on a fresh clone: the value was never stored here; run it. Or
        # it has no memo at all (it failed, and was read as failed): it is new.
        task = self.forced.get(qid)
        if task is None:
            memo = self.db.memos.get(qid)
            why = Reason.of(Change.VALUE_NOT_STORED if memo is not None else Change.NEVER_BUILT)
            task = asyncio.ensure_future(self.execute.run(qid, memo, why, self))
            self.forced[qid] = task
        await task
        if qid in self.db.failed:
            return QueryFailed(qid, self.db.failed[qid], waiting=qid in self.db.waiting)
        return self.db.values[qid] if qid in self.db.values else self.stored_values([qid])[qid]
