"""The answers an agent reads, as versioned JSON: `--json` on the commands and the MCP tools
build the same shapes from the same functions (docs/json.md documents each one).

Every shape carries "schema": "kbuild.NAME/VERSION". A version grows by one when a field is
removed or changes meaning; new fields may appear without a new version. Pages are named by
their path relative to the repository root (the folder of the Kbuildfile): a stable id.
Deterministic: the same store and question give the same answer, byte for byte.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .browse import Page
    from .doctor import Finding
    from ..retrieval.search import Hit, Section
    from .status import Explanation, Status

Answer = dict[str, Any]

SEARCH = "kbuild.search/2"
MISSES = "kbuild.misses/1"
CONTEXT = "kbuild.context/2"
SHOW = "kbuild.show/1"
DOCTOR = "kbuild.doctor/1"
EXPLAIN = "kbuild.explain/1"
STATUS = "kbuild.status/1"
ERROR = "kbuild.error/1"


def search_answer(query: str, project: str | None, hits: list[Hit]) -> Answer:
    return {"schema": SEARCH, "query": query, "project": project, "gap": not hits,
            "hits": [{"rank": n, "page": h.page, "score": h.score, "ranked_by": h.ranked_by,
                      "index": h.index, "line": h.line}
                     for n, h in enumerate(hits, 1)]}


def misses_answer(records: Iterable[dict[str, object]]) -> Answer:
    return {"schema": MISSES, "misses": [{"at": r["at"], "query": r["query"], "project": r["project"]} for r in records]}


def context_answer(question: str, project: str | None, budget: int, kept: list[Section],
                   summarised: list[Section], trace: list[str], text: str) -> Answer:
    def section(s: Section) -> Answer:
        return {"key": s.key, "score": s.score, "tokens": s.tokens, "pages": sorted({h.page for h in s.hits})}

    return {"schema": CONTEXT, "question": question, "project": project, "budget": budget,
            "tokens": sum(s.tokens for s in kept), "gap": not kept,
            "sections": [section(s) | {"text": s.text} for s in kept],
            "summaries": [section(s) | {"lines": [{"page": h.page, "line": h.line} for h in s.hits]}
                          for s in summarised],
            "trace": trace, "text": text}


def show_answer(page: Page) -> Answer:
    return {"schema": SHOW, "page": page.id, "parent": page.parent, "children": page.children, "text": page.text}


def doctor_answer(findings: list[Finding]) -> Answer:
    return {"schema": DOCTOR, "ok": not any(f.status == "FAIL" for f in findings),
            "findings": [{"status": f.status, "what": f.what, "fix": "" if f.status == "PASS" else f.fix}
                         for f in findings]}


def explain_answer(found: Explanation) -> Answer:
    last = found.last_run
    verdict = last.verdict if last is not None else None
    reason = found.would_run
    return {
        "schema": EXPLAIN, "query": found.query, "rule": found.rule, "up_to_date": reason is None,
        "would_run": None if reason is None else {"kind": str(reason.kind.value), "subject": reason.subject,
                                                  "sentence": reason.sentence},
        "writes": found.writes,
        "reads": [{"dep": dep, "would_run": would_run} for dep, would_run in found.reads],
        "read_by": found.read_by,
        "last_run": None if last is None else {
            "build": last.build, "reason": last.reason, "unchanged": last.unchanged,
            "verdict": None if verdict is None else {"same": verdict.same, "stage": verdict.stage,
                                                     "probability": verdict.probability, "reason": verdict.reason}},
    }


def status_answer(found: Status) -> Answer:
    return {"schema": STATUS, "up_to_date": found.up_to_date,
            "groups": [{"cause": g.cause, "queries": sorted(g.queries), "pages": g.pages} for g in found.groups],
            "new": found.new, "stale": sorted(found.stale), "estimate": found.estimate}


def error_answer(message: str, exit_code: int) -> Answer:
    return {"schema": ERROR, "error": message, "exit_code": exit_code}
