"""Execute: run a query's rule, write its outputs, record its memo."""
from __future__ import annotations

import sqlite3
import traceback
from typing import Literal

from .context import Context
from .files import PathEscapesRoot
from .cutoff import judge
from .hashing import FAILED, NotAnObject, encode_value, encode_with_parts, hash_bytes, part_hashes
from .outputs import Outputs
from .report import CallDeferred, CycleError, Problem, QueryFailed
from .rule import Query
from .state import FileRead, Memo, flat
from .verify import Reason


class Execute(Outputs):
    def _query_for(self, qid: str) -> Query | None:
        known = self.queries.get(qid)
        if known is not None:
            return known
        memo = self.memos.get(qid)
        if memo is None:
            return None
        r = self.engine.rules.get(memo.rule)
        return Query(r, tuple(memo.key)) if r else None

    async def _execute(self, qid: str, memo: Memo | None, reason: Reason) -> str:
        query = self._query_for(qid)
        if query is None:
            return self._fail(qid, reason.sentence, None)
        if self.stopped is not None:  # no more model calls or writes: the build is ending
            return self._fail(qid, f"not run: {self.stopped}", None)
        rule = query.rule
        ctx = Context(self, query)
        self.report.reasons[qid] = reason.sentence
        self._emit("run", qid)
        try:
            try:
                value = await rule.fn(ctx, *query.key)
                blob, parts = encode_with_parts(value) if rule.parts else (encode_value(value), {})
            except BaseException:
                # what a failed query read before it failed is still reached: garbage collection
                # must not take the outputs under a query that failed on its first build
                self.attempted[qid] = ctx.deps
                raise
        except CycleError as exc:
            return self._fail(qid, str(exc), exc)
        except CallDeferred as exc:
            return self._wait(qid, str(exc), exc)
        except QueryFailed as exc:
            if exc.waiting:
                return self._wait(qid, f"needs {exc.query_id}, which waits", exc)
            return self._fail(qid, f"needs {exc.query_id}, which failed", exc)
        except (Problem, NotAnObject) as exc:
            return self._fail(qid, str(exc), exc)
        except Exception as exc:  # a rule's bug or bad input: this query fails, others go on
            # ... unless it is a full disk (a cache entry, a log) or a damaged state: that stops the build
            self.stop(exc, f"writing {exc.filename}" if getattr(exc, "filename", None) else f"while building {qid}")
            return self._fail(qid, f"{type(exc).__name__}: {exc}", exc)
        digest = hash_bytes(blob)
        cut: Literal["exact", "hook"] | None = None
        outputs_intact = memo is not None and self._outputs_intact(memo)
        if memo is not None and digest == memo.hash:
            cut = "exact"
        elif memo is not None and rule.cutoff is not None and outputs_intact and self.engine.cutoff_hooks:
            old_blob = self.state.load_value(qid)
            if old_blob is not None and hash_bytes(old_blob) == memo.hash:
                try:
                    verdict = await judge(rule.cutoff, ctx, rule.decode(old_blob), rule.decode(blob))
                except CallDeferred as exc:
                    return self._wait(qid, str(exc), exc)
                except Exception as exc:
                    return self._fail(qid, f"its cutoff hook raised {type(exc).__name__}: {exc}", exc)
                if verdict.decision is not None:
                    self.report.decisions[qid] = verdict.decision
                if verdict.same:
                    cut, blob, digest = "hook", old_blob, memo.hash  # backdated: the old value stands
        try:
            if cut == "hook" and memo is not None:
                outputs = memo.outputs  # the old value stands, and so do its files
            else:
                outputs = self._write_outputs(ctx.outputs, memo.outputs if memo else {})
        except PathEscapesRoot as exc:  # a folder on its way became a symlink out of the store
            return self._fail(qid, str(exc), exc)
        except OSError as exc:
            self.stop(exc, f"writing {exc.filename}")
            return self._fail(qid, f"cannot write its output: {exc}", exc)
        notes = memo.notes if cut == "hook" and memo is not None else ctx.notes
        if cut == "hook" and rule.parts:
            parts = part_hashes(blob)  # of the old value, which stands
        new = Memo(qid, rule.name, list(query.key), rule.fingerprint_with(self.sources), ctx.deps, digest, outputs,
                   notes, parts)
        if memo is not None:
            self.replaced.setdefault(qid, memo)
            self.dropped |= {d for d, _ in flat(memo.deps) if not isinstance(d, FileRead)} - {d for d, _ in flat(new.deps)}
        self.memos[qid] = new
        try:
            self.state.save_memo(new, blob)
        except sqlite3.Error as exc:
            if not self.stop(exc, "writing the local state .kbuild/state.db"):
                raise
            return self._fail(qid, str(exc), exc)
        if rule.parts:  # read in parts: a reader decodes its entry alone (Demand.stored_part)
            self.part_blobs[qid] = (blob, sorted(new.parts), None)
        else:
            self.values[qid] = rule.decode(blob)
        self.changed.add(qid)
        self.green[qid] = digest
        self.report.executed.append(qid)
        if cut:
            self.report.cutoff[qid] = cut
        self._emit("done", qid)
        try:
            self._maybe_commit()
        except sqlite3.Error as exc:
            if not self.stop(exc, "writing the local state .kbuild/state.db"):
                raise
        return digest

    def _wait(self, qid: str, message: str, exc: BaseException) -> str:
        """Left for a later build: failed for this one (its readers cannot go on), recorded as
        waiting, so the report tells it apart from a failure and the next build runs it."""
        self.waiting.add(qid)
        return self._fail(qid, message, exc)

    def _fail(self, qid: str, message: str, exc: BaseException | None) -> str:
        self.failed[qid] = message
        if exc is not None:
            self.report.errors[qid] = exc
            exc.__kbuild_traceback__ = traceback.format_exc()  # type: ignore[attr-defined]
        self._emit("fail", qid)
        return FAILED
