"""Retrieval over the store's index lines (the summaries), the first rung of progressive disclosure.

BM25 (rank-bm25) over stemmed words (snowballstemmer). Every lookup is logged in
.kbuild/lookups.jsonl, so `kbuild search --misses` can show what the store failed to answer.
"""
from __future__ import annotations

import datetime
import json
import re
from dataclasses import dataclass
from pathlib import Path

import snowballstemmer

WORD = re.compile(r"[a-z0-9]+")
STEM = snowballstemmer.stemmer("english")
ENTRY = re.compile(r"^- \[([^\]]+)\]\(([^)]+)\)(.*)$")


def tokens(text: str) -> list[str]:
    """Words as BM25 compares them: stemmed, so "refund requests" finds "refunds requested"."""
    return STEM.stemWords(WORD.findall(text.lower()))


@dataclass(frozen=True)
class Hit:
    score: float
    page: str  # the page the index line links to, relative to the build root
    index: str  # the index the line stands in
    line: str


def index_lines(store: Path, root: Path, project: str | None = None) -> list[tuple[str, str, str]]:
    """(index, linked page, line) for every entry line of every generated index."""
    base = store / project if project else store
    rows = []
    for index in sorted(base.rglob("index*.md")):
        if "/raw/" in index.as_posix():
            continue
        for line in index.read_text("utf-8", errors="replace").splitlines():
            match = ENTRY.match(line)
            if match:
                target = (index.parent / match.group(2)).resolve()
                rows.append((index.relative_to(root).as_posix(), target.relative_to(root.resolve()).as_posix()
                             if target.is_relative_to(root.resolve()) else match.group(2), line))
    return rows


def search(store: Path, root: Path, query: str, project: str | None = None, limit: int = 5) -> list[Hit]:
    from rank_bm25 import BM25Okapi

    rows = index_lines(store, root, project)
    wanted = tokens(query)
    if not rows or not wanted:
        return []
    scores = BM25Okapi([tokens(line) or ["_"] for _, _, line in rows]).get_scores(wanted)
    ranked = sorted(range(len(rows)), key=lambda i: (-scores[i], i))
    return [Hit(round(float(scores[i]), 3), rows[i][1], rows[i][0], rows[i][2])
            for i in ranked[:limit] if scores[i] > 0 and set(wanted) & set(tokens(rows[i][2]))]


def log_lookup(state_dir: Path, query: str, project: str | None, hits: list[Hit]) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    record = {"at": datetime.datetime.now().isoformat(timespec="seconds"), "query": query, "project": project,
              "hits": len(hits), "best": hits[0].score if hits else 0.0, "top": hits[0].page if hits else None}
    with (state_dir / "lookups.jsonl").open("a") as out:
        out.write(json.dumps(record) + "\n")


def misses(state_dir: Path) -> list[dict[str, object]]:
    path = state_dir / "lookups.jsonl"
    if not path.exists():
        return []
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in records if not r["hits"]]
