"""Recall at a token budget: does the context `kbuild context` composes hold the answer?

A questions file (JSON) lists questions, each with a regex of its answer and optionally the page
that must hold it. For each budget the share of questions whose answer is in the composed
context (matched case-insensitively, white space collapsed to one space, since a wrapped line
of the Original and a joined one of the Rewritten must match alike); each miss lists what was
chosen instead. `kbuild eval` prints it; tests/test_eval.py holds the floor the golden set reaches.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .search import compose, render_context

if TYPE_CHECKING:
    from .embedding import QuestionEmbedder

BUDGETS = (2500, 5000, 10000, 15000)
EVAL = "kbuild.eval/1"


@dataclass(frozen=True)
class Question:
    q: str
    answer: str  # a regex
    page: str | None = None  # a page (path from the repository root) the context must draw on
    source: str | None = None  # which source states it (for a reader of the misses)


@dataclass
class Miss:
    question: Question
    chosen: list[str]  # the sections kept, best first
    tokens: int


@dataclass
class BudgetResult:
    budget: int
    found: int = 0
    asked: int = 0
    tokens: list[int] = field(default_factory=list)  # tokens each composed context used
    misses: list[Miss] = field(default_factory=list)

    @property
    def recall(self) -> float:
        return self.found / self.asked if self.asked else 0.0


def load_questions(path: Path) -> list[Question]:
    data = json.loads(path.read_text("utf-8"))
    rows = data["questions"] if isinstance(data, dict) else data
    questions = []
    for row in rows:
        re.compile(row["answer"])  # a wrong regex fails here, with its text in the error
        questions.append(Question(row["q"], row["answer"], row.get("page"), row.get("source")))
    return questions


def answered(text: str, question: Question, pages: set[str]) -> bool:
    flat = " ".join(text.split())
    if not re.search(question.answer, flat, re.I):
        return False
    return question.page is None or any(p == question.page or p.startswith(question.page.rstrip("/") + "/")
                                        for p in pages)


def evaluate(store: Path, root: Path, questions: list[Question], budgets: tuple[int, ...] = BUDGETS,
             project: str | None = None, embedder: QuestionEmbedder | None = None) -> list[BudgetResult]:
    from ..text.tokens import estimate_tokens

    results = []
    for budget in budgets:
        result = BudgetResult(budget)
        for question in questions:
            kept, summarised, _ = compose(store, root, question.q, budget, project, embedder=embedder)
            text = render_context(question.q, kept, summarised)
            result.asked += 1
            result.tokens.append(estimate_tokens(text))
            pages = {h.page for s in kept for h in s.hits}
            if answered(text, question, pages):
                result.found += 1
            else:
                result.misses.append(Miss(question, [s.key for s in kept], estimate_tokens(text)))
        results.append(result)
    return results


def render_report(results: list[BudgetResult], misses: bool = True) -> str:
    lines = ["| budget (tokens) | recall | answered | most tokens printed |", "|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r.budget:,} | {r.recall:.2f} | {r.found}/{r.asked} | {max(r.tokens, default=0):,} |")
    if misses:
        for r in results:
            for m in r.misses:
                lines.append(f"\nmissed at {r.budget:,}: {m.question.q!r} (answer /{m.question.answer}/"
                             + (f" in {m.question.source}" if m.question.source else "") + ")")
                lines += [f"    chose {key}" for key in m.chosen[:5]] or ["    chose nothing"]
    return "\n".join(lines) + "\n"


def eval_answer(results: list[BudgetResult]) -> dict[str, Any]:
    return {"schema": EVAL, "budgets": [
        {"budget": r.budget, "recall": round(r.recall, 4), "answered": r.found, "asked": r.asked,
         "max_tokens": max(r.tokens, default=0),
         "misses": [{"question": m.question.q, "answer": m.question.answer, "source": m.question.source,
                     "chosen": m.chosen, "tokens": m.tokens} for m in r.misses]} for r in results]}
