"""Execute: run a query's rule, backdate its value when it is the same as before, write its
outputs, record its memo."""
from __future__ import annotations

import sqlite3
import traceback
from dataclasses import dataclass
from typing import Literal

from .buildstate import BuildState
from .context import Context, Reads
from .cutoff import judge
from .files import PathEscapesRoot
from .hashing import FAILED, NotAnObject, encode_value, encode_with_parts, hash_bytes, part_hashes
from .outputs import Outputs
from .report import CallDeferred, CycleError, Problem, QueryFailed
from .rule import Query
from .state import DepGroup, FileRead, Memo, flat
from .verify import Reason

Cut = Literal["exact", "hook"]


@dataclass
class Value:
    """What a run produced: the encoded value, its hash and part hashes, and how it was cut off."""

    blob: bytes
    digest: str
    parts: dict[str, str]
    cut: Cut | None = None


class Execute:
    """Runs rules; holds what failed runs read and what re-run queries stopped reading."""

    def __init__(self, db: BuildState, outputs: Outputs) -> None:
        self.db, self.outputs = db, outputs
        self.attempted: dict[str, list[DepGroup]] = {}  # the reads of queries that failed, up to their failure
        self.dropped: set[str] = set()  # queries that re-run queries read before and no longer do

    def query_for(self, qid: str) -> Query | None:
        known = self.db.queries.get(qid)
        if known is not None:
            return known
        memo = self.db.memos.get(qid)
        if memo is None:
            return None
        r = self.db.engine.rules.get(memo.rule)
        return Query(r, tuple(memo.key)) if r else None

    async def run(self, qid: str, memo: Memo | None, reason: Reason, reads: Reads) -> str:
        """Run `qid`'s rule, its reads answered by `reads`; the hash its readers see."""
        query = self.query_for(qid)
        if query is None:
            return self.fail(qid, reason.sentence, None)
        if self.db.stopped is not None:  # no more model calls or writes: the build is ending
            return self.fail(qid, f"not run: {self.db.stopped}", None)
        ctx = Context(reads, query)
        self.db.report.reasons[qid] = reason.sentence
        self.db.emit("run", qid)
        value = await self._compute(qid, query, ctx)
        if isinstance(value, str):
            return value
        if memo is not None:
            value = await self._backdate(qid, query, ctx, memo, value)
            if isinstance(value, str):
                return value
        return self._record(qid, query, ctx, memo, value)

    async def _compute(self, qid: str, query: Query, ctx: Context) -> Value | str:
        """The rule's value, encoded; or FAILED, the query failed (or waits)."""
        rule = query.rule
        try:
            try:
                result = await rule.fn(ctx, *query.key)
                blob, parts = encode_with_parts(result) if rule.parts else (encode_value(result), {})
            except BaseException:
                # what a failed query read before it failed is still reached: garbage collection
                # must not take the outputs under a query that failed on its first build
                self.attempted[qid] = ctx.deps
                raise
        except CycleError as exc:
            return self.fail(qid, str(exc), exc)
        except CallDeferred as exc:
            return self.wait(qid, str(exc), exc)
        except QueryFailed as exc:
            if exc.waiting:
                return self.wait(qid, f"needs {exc.query_id}, which waits", exc)
            return self.fail(qid, f"needs {exc.query_id}, which failed", exc)
        except (Problem, NotAnObject) as exc:
            return self.fail(qid, str(exc), exc)
        except Exception as exc:  # a rule's bug or bad input: this query fails, others go on
            # ... unless it is a full disk (a cache entry, a log) or a damaged state: that stops the build
            self.db.stop(exc, f"writing {exc.filename}" if getattr(exc, "filename", None) else f"while building {qid}")
            return self.fail(qid, f"{type(exc).__name__}: {exc}", exc)
        return Value(blob, hash_bytes(blob), parts)

    async def _backdate(self, qid: str, query: Query, ctx: Context, memo: Memo, value: Value) -> Value | str:
        """The value readers see: the old one when the new is the same (early cutoff), exactly or
        as the rule's cutoff hook judges; or FAILED, the hook failed."""
        if value.digest == memo.hash:
            value.cut = "exact"
            return value
        rule = query.rule
        if rule.cutoff is None or not self.db.engine.cutoff_hooks or not self.outputs.intact(memo):
            return value
        old_blob = self.db.state.load_value(qid)
        if old_blob is None or hash_bytes(old_blob) != memo.hash:
            return value
        try:
            verdict = await judge(rule.cutoff, ctx, rule.decode(old_blob), rule.decode(value.blob))
        except CallDeferred as exc:
            return self.wait(qid, str(exc), exc)
        except Exception as exc:
            return self.fail(qid, f"its cutoff hook raised {type(exc).__name__}: {exc}", exc)
        if verdict.decision is not None:
            self.db.report.decisions[qid] = verdict.decision
        if not verdict.same:
            return value
        # the old value stands, with its part hashes
        return Value(old_blob, memo.hash, part_hashes(old_blob) if rule.parts else value.parts, "hook")

    def _record(self, qid: str, query: Query, ctx: Context, memo: Memo | None, value: Value) -> str:
        """Write the outputs and save the memo: the query is settled with `value`."""
        db, rule, kept = self.db, query.rule, value.cut == "hook" and memo is not None
        try:
            # backdated by the hook: the old value stands, and so do its files
            outputs = memo.outputs if kept and memo is not None else self.outputs.write(
                ctx.outputs, memo.outputs if memo else {})
        except PathEscapesRoot as exc:  # a folder on its way became a symlink out of the store
            return self.fail(qid, str(exc), exc)
        except OSError as exc:
            db.stop(exc, f"writing {exc.filename}")
            return self.fail(qid, f"cannot write its output: {exc}", exc)
        notes = memo.notes if kept and memo is not None else ctx.notes
        new = Memo(qid, rule.name, list(query.key), rule.fingerprint_with(db.sources), ctx.deps, value.digest,
                   outputs, notes, value.parts)
        if memo is not None:
            db.replaced.setdefault(qid, memo)
            self.dropped |= {d for d, _ in flat(memo.deps) if not isinstance(d, FileRead)} - {d for d, _ in flat(new.deps)}
        db.memos[qid] = new
        try:
            db.state.save_memo(new, value.blob)
        except sqlite3.Error as exc:
            if not db.stop(exc, "writing the local state .kbuild/state.db"):
                raise
            return self.fail(qid, str(exc), exc)
        if rule.parts:  # read in parts: a reader decodes its entry alone (Demand.stored_part)
            db.part_blobs[qid] = (value.blob, sorted(new.parts), None)
        else:
            db.values[qid] = rule.decode(value.blob)
        db.changed.add(qid)
        db.green[qid] = value.digest
        db.report.executed.append(qid)
        if value.cut:
            db.report.cutoff[qid] = value.cut
        db.emit("done", qid)
        try:
            db.maybe_commit()
        except sqlite3.Error as exc:
            if not db.stop(exc, "writing the local state .kbuild/state.db"):
                raise
        return value.digest

    def wait(self, qid: str, message: str, exc: BaseException) -> str:
        """Left for a later build: failed for this one (its readers cannot go on), recorded as
        waiting, so the report tells it apart from a failure and the next build runs it."""
        self.db.waiting.add(qid)
        return self.fail(qid, message, exc)

    def fail(self, qid: str, message: str, exc: BaseException | None) -> str:
        self.db.failed[qid] = message
        if exc is not None:
            self.db.report.errors[qid] = exc
            exc.__kbuild_traceback__ = traceback.format_exc()  # type: ignore[attr-defined]
        self.db.emit("fail", qid)
        return FAILED
