"""Retrieval over the store's index lines (the summaries), the first rung of progressive disclosure.

BM25 (rank-bm25) over stemmed words (snowballstemmer). Every lookup is logged in
.kbuild/lookups.jsonl, so `kbuild search --misses` can show what the store failed to answer.
"""
from __future__ import annotations

import datetime
import json
import os
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .text.ranking import rank
from .text.tokens import estimate_tokens
from .store.pages import rewritten_part

if TYPE_CHECKING:
    from .buildfile import Buildfile

ENTRY = re.compile(r"^- \[([^\]]+)\]\(([^)]+)\)(.*)$")


@dataclass(frozen=True)
class Hit:
    score: float
    page: str  # the page the index line links to, relative to the build root
    index: str  # the index the line stands in
    line: str


def store_folder(spec: Buildfile) -> Path:
    """Where the index pages are: the knowledge base's store, or kb/ as `kbuild init` makes it."""
    return spec.root / (spec.application.store.root if spec.application is not None else "kb")


def index_lines(store: Path, root: Path, project: str | None = None) -> list[tuple[str, str, str]]:
    """(index, linked page, line) for every entry line of every generated index."""
    base = store / project if project else store
    rows = []
    for index in sorted(base.rglob("index*.md")):
        if "/raw/" in index.as_posix():
            continue
        # Paths as strings, relative to the root once per index: pathlib and relpath per line
        # were three quarters of a search over 100,000 lines.
        name = index.relative_to(root).as_posix()
        folder = os.path.dirname(name)
        for line in index.read_text("utf-8", errors="replace").splitlines():
            match = ENTRY.match(line)
            if match:
                rows.append((name, posixpath.normpath(posixpath.join(folder, match.group(2))), line))
    return rows


def search(store: Path, root: Path, query: str, project: str | None = None, limit: int = 5) -> list[Hit]:
    rows = index_lines(store, root, project)
    ranked = rank([line for _, _, line in rows], query)
    return [Hit(round(score, 3), rows[i][1], rows[i][0], rows[i][2]) for i, score in ranked[:limit]]


def log_lookup(log: Path, query: str, project: str | None, hits: list[Hit]) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    record = {"at": datetime.datetime.now().isoformat(timespec="seconds"), "query": query, "project": project,
              "hits": len(hits), "best": hits[0].score if hits else 0.0, "top": hits[0].page if hits else None}
    with log.open("a") as out:
        out.write(json.dumps(record) + "\n")


def misses(log: Path) -> list[dict[str, object]]:
    if not log.exists():
        return []
    records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [r for r in records if not r["hits"]]


@dataclass
class Section:
    key: str  # source index and heading: what the facts have in common
    score: float
    hits: list[Hit]
    text: str = ""
    tokens: int = 0


def compose(store: Path, root: Path, question: str, budget: int, project: str | None = None,
            candidates: int = 40) -> tuple[list[Section], list[Section], list[str]]:
    """A context for an agent: the facts that match, grouped into sections by source and heading,
    sections ranked, kept whole until the budget is spent (the section that crosses it is the
    only overflow), the rest as their one-line summaries. Deterministic. Returns (kept, summarised,
    trace lines)."""
    hits = [h for h in search(store, root, question, project, candidates) if "/facts/" in h.page
            and not h.page.endswith("/index.md")]
    sections: dict[str, Section] = {}
    for hit in hits:
        slug = Path(hit.page).stem
        heading = re.sub(r"-\d+$", "", slug)  # a section's chunks share the heading's slug
        key = f"{hit.index} § {heading}"
        section = sections.setdefault(key, Section(key, 0.0, []))
        section.hits.append(hit)
        section.score = max(section.score, hit.score)
    ranked = sorted(sections.values(), key=lambda s: (-s.score, s.key))
    kept: list[Section] = []
    summarised: list[Section] = []
    used = 0
    trace = []
    for section in ranked:
        pages = sorted({h.page for h in section.hits})
        section.text = "\n\n".join(_rewritten(root / p, p) for p in pages)
        section.tokens = estimate_tokens(section.text)
        if used < budget:
            kept.append(section)
            used += section.tokens
            trace.append(f"kept   {section.score:6.2f} {section.tokens:6} tokens  {section.key}")
        else:
            summarised.append(section)
            trace.append(f"summed {section.score:6.2f} {section.tokens:6} tokens  {section.key} (over the budget)")
    trace.append(f"{used} tokens kept of a budget of {budget}")
    return kept, summarised, trace


def _rewritten(page: Path, rel: str) -> str:
    body = rewritten_part(page.read_text("utf-8", errors="replace"))
    return f"From [{rel}]({rel}):\n\n{body}"


def render_context(question: str, kept: list[Section], summarised: list[Section]) -> str:
    """The context `compose` chose, as Markdown: what `kbuild context` prints and the MCP tool answers."""
    if not kept:
        return (f"# Context: {question}\n\nNothing in the store speaks to this: a gap. "
                "Add a source that does (`kbuild add`), rather than guessing.\n")
    parts = [f"# Context: {question}\n\n"] + [section.text + "\n\n" for section in kept]
    if summarised:
        parts.append("## Also relevant (summaries)\n\n")
        parts += [hit.line + "\n" for section in summarised for hit in section.hits]
    return "".join(parts)
