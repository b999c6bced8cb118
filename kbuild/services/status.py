"""What is stale and why: `kbuild status`, `kbuild explain` and the estimate a dry run ends with.

Read-only: everything here reads the recorded graph (local state, or the lock on a fresh clone)
and the files; nothing runs and nothing is written.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..engine import Change, Engine, FileRead, Memo, Query, Reason, Rule, to_graph
from ..store.localstate import LocalState
from ..model import Backend
from ..model.calllog import CallLog
from ..store.reports import LastRun, last_run


@dataclass(frozen=True)
class StaleGroup:
    cause: str  # what changed, as a person reads it
    queries: list[str]  # the queries stale because of it
    pages: list[str]  # the Markdown pages they wrote


@dataclass(frozen=True)
class Status:
    groups: list[StaleGroup]  # by cause, sorted
    new: list[str]  # never built: a target, or a query a recorded one read (it failed then)
    stale: list[str]
    estimate: str

    @property
    def up_to_date(self) -> bool:
        return not self.stale and not self.new

    def as_json(self) -> dict[str, object]:
        return {"causes": {g.cause: sorted(g.queries) for g in self.groups}, "new": self.new}


def status(engine: Engine, targets: list[Query]) -> Status:
    inspection = engine.inspect()
    stale, memos = inspection.stale, inspection.memos
    by_cause: dict[str, list[str]] = {}
    first: set[str] = set()  # the causes that are hand edits: listed before the rest, as a build refuses them
    for qid, (_, cause) in stale.items():
        reason = stale[cause][0]
        by_rule = reason.kind in (Change.RULE_CHANGED, Change.RULE_GONE)  # one group for all a rule's queries
        if reason.kind is Change.OUTPUT_EDITED and is_hand_edit(engine, memos[cause], reason.subject):
            name = f"{reason.subject}: edited by hand (a build refuses to overwrite it without --force)"
            first.add(name)
        else:
            name = reason.sentence if by_rule else f"{cause}: {reason.sentence}"
        by_cause.setdefault(name, []).append(qid)
    groups = [StaleGroup(cause, queries, sorted(p for q in queries for p in memos[q].outputs if p.endswith(".md")))
              for cause, queries in sorted(by_cause.items(), key=lambda item: (item[0] not in first, item[0]))]
    # From the same reading of the graph as the stale set, rather than a dry run that would load it again
    read = {dep for memo in memos.values() for group in memo.deps for dep, _ in group if not isinstance(dep, FileRead)}
    new = sorted(q for q in {t.id for t in targets} | read if q not in memos)
    return Status(groups, new, list(stale), estimate(engine, [memos[q].rule for q in stale]))


def is_hand_edit(engine: Engine, memo: Memo, path: str) -> bool:
    """Whether an output that differs from its memo is a person's edit, which a build refuses to
    overwrite (kbuild.store.handedits): there, not written by a merge, without conflict markers."""
    from ..engine.lockmerge import STALE_FINGERPRINT
    from ..store.handedits import has_conflict_markers

    try:
        data = (engine.root / path).read_bytes()
    except OSError:
        return False  # missing: nothing to lose
    return memo.fingerprint != STALE_FINGERPRINT and not has_conflict_markers(data)


def asks_a_model(rule: Rule) -> bool:
    """Whether a rule's queries may cost a model call: it reads a backend that asks one (the
    offline backend answers by code)."""
    if "backend" not in rule.settings:
        return False
    backend = getattr(rule.configuration, "backend", None)  # a Kbuildfile's own rule may mean another thing by it
    return backend.asks_model if isinstance(backend, Backend) else True


def estimate(engine: Engine, rules: list[str]) -> str:
    """At most how many model calls and tokens rebuilding queries of these rules costs: every
    query of a rule that asks the model, at the average size of the calls logged so far."""
    calls = sum(1 for name in rules if (rule := engine.rules.get(name)) is not None and asks_a_model(rule))
    if not calls:
        return "model calls: none expected"
    log = LocalState(engine.state_dir).call_log
    per_call = CallLog.for_root(engine.state_dir).average_tokens() if log.exists() else None
    size = (f", about {int(per_call[0] * calls):,} tokens in and {int(per_call[1] * calls):,} out at the average "
            "of the calls logged so far" if per_call else "")
    return f"model calls: at most {calls} (fewer where the call cache has the answer or a cutoff stops the climb){size}"


def dry_run_estimate(engine: Engine) -> str:
    """The estimate for everything a build would have to check again."""
    inspection = engine.inspect()
    return estimate(engine, [inspection.memos[q].rule for q in inspection.stale])


def find_query(memos: Mapping[str, Memo], what: str) -> str | None:
    """The query `what` names: its id as `kbuild graph` prints it, or a file it wrote."""
    return what if what in memos else next((q for q, m in memos.items() if what in m.outputs), None)


@dataclass(frozen=True)
class Explanation:
    query: str
    rule: str
    would_run: Reason | None  # None: up to date
    writes: list[str]
    reads: list[tuple[str, bool]]  # in the order read, and whether a build would run it
    read_by: list[str]
    last_run: LastRun | None


def explain(engine: Engine, targets: list[Query], what: str) -> Explanation | None:
    """Why the query `what` names would rebuild, what it read and what reads it; None when it
    names no recorded query."""
    memos = engine.memos()
    qid = find_query(memos, what)
    if qid is None:
        return None
    plan = engine.plan(targets)
    memo = memos[qid]
    graph = to_graph(memos, files=False)
    return Explanation(
        query=qid,
        rule=memo.rule,
        would_run=plan.get(qid),
        writes=sorted(memo.outputs),
        reads=[(str(dep), bool(plan.get(dep))) for group in memo.deps for dep, _ in group],
        read_by=sorted(graph.predecessors(qid)) if qid in graph else [],
        last_run=last_run(LocalState(engine.state_dir), qid),
    )
