"""BM25 (rank-bm25) over stemmed words (snowballstemmer): what search and views on request rank by."""
from __future__ import annotations

import functools
import re

import snowballstemmer

WORD = re.compile(r"[a-z0-9]+")
STEM = snowballstemmer.stemmer("english")


@functools.lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return STEM.stemWord(word)  # pure Python and slow; a store's vocabulary is small, so memoise


def tokens(text: str) -> list[str]:
    """Words as BM25 compares them: stemmed, so "refund requests" finds "refunds requested"."""
    return [_stem(w) for w in WORD.findall(text.lower())]


def rank(documents: list[str], query: str) -> list[tuple[int, float]]:
    """(index, score) of the documents that share a word with the query, best first (ties in
    document order, so a ranking is reproducible)."""
    from rank_bm25 import BM25Okapi  # numpy with it: imported only when something is ranked

    wanted = tokens(query)
    if not documents or not wanted:
        return []
    words = [tokens(d) for d in documents]
    scores = BM25Okapi([w or ["_"] for w in words]).get_scores(wanted)
    ranked = sorted(range(len(documents)), key=lambda i: (-scores[i], i))
    query_words = set(wanted)
    return [(i, float(scores[i])) for i in ranked if scores[i] > 0 and query_words & set(words[i])]
