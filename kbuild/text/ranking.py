"""BM25 (rank-bm25) over stemmed words (snowballstemmer): what search and views on request rank by."""
from __future__ import annotations

import functools
import math
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


# --------------------------------------------------------------------------- the persisted index
#
# A hand-written inverted index (BM25 as rank-bm25 scores it, k1 1.2, b 0.75). Measured by
# benchmarks/retrieval.py at 100,000 sections it is slower than bm25s (194 ms a query against
# 1.6 ms; load 177 ms against 14 ms), so it is replaced by bm25s in the next commit.

K1, B = 1.2, 0.75
STOP = frozenset("""a an and are as at be been but by can could did do does doing for from had has have
how i if in into is it its may me might my of on or our shall should so than that the their them then
there these they this those to us was we were what when where which while who whom why will with
would you your yours""".split())  # words a question is made of that say nothing of its subject

# Common abbreviations and the words they stand for, so a question in the short form finds a
# text that spells it out (and the other way round). A document's own "Foo Bar (FB)"
# definitions are added to these when its sections are indexed (`defined_abbreviations`).
ABBREVIATIONS = {
    "stdlib": "standard library", "env": "environment", "var": "variable", "vars": "variables",
    "cli": "command line", "kwarg": "keyword argument", "kwargs": "keyword arguments",
    "arg": "argument", "args": "arguments", "param": "parameter", "params": "parameters",
    "func": "function", "fn": "function", "repl": "interactive interpreter", "config": "configuration",
    "docs": "documentation", "doc": "documentation", "dir": "directory", "repo": "repository",
    "db": "database", "auth": "authentication", "api": "interface", "impl": "implementation",
    "perf": "performance", "deps": "dependencies", "dep": "dependency", "init": "initialisation",
    "charset": "encoding", "len": "length", "max": "maximum", "min": "minimum", "num": "number",
    "str": "string", "int": "integer", "dict": "dictionary", "obj": "object", "msg": "message",
    "err": "error", "exc": "exception", "py": "python", "ts": "timestamp", "tz": "timezone",
}
DEFINED = re.compile(r"\b((?:[A-Z][\w-]*[ -]){1,5}[A-Z][\w-]*|(?:[a-z][\w-]* ){1,5}[a-z][\w-]*) \(([A-Z][A-Za-z]{1,7})\)")


def defined_abbreviations(text: str) -> dict[str, str]:
    """The abbreviations a text defines, "Service Level Agreement (SLA)": each with the words
    it stands for, when the initials of the last words spell it."""
    found = {}
    for words, short in DEFINED.findall(text):
        parts = re.findall(r"[A-Za-z0-9]+", words)
        letters = short.lower()
        for n in range(len(parts), 0, -1):
            tail = parts[-n:]
            if "".join(p[0].lower() for p in tail) == letters:
                found[letters] = " ".join(tail).lower()
                break
    return found


def query_terms(query: str, abbreviations: dict[str, str] | None = None) -> dict[str, float]:
    """The stemmed words of a question with their weights: words that say nothing of its subject
    dropped (unless nothing else is left), each abbreviation expanded to what it stands for
    (and a spelled-out term to its abbreviation), at a lower weight than the words typed."""
    words = WORD.findall(query.lower())
    table = {**ABBREVIATIONS, **(abbreviations or {})}
    content = [w for w in words if w not in STOP] or words
    weights: dict[str, float] = {}
    for w in content:
        weights[_stem(w)] = weights.get(_stem(w), 0.0) + 1.0
        if w in table:
            for t in tokens(table[w]):
                weights.setdefault(t, 0.6)
    joined = " ".join(content)
    for short, long in table.items():
        if len(long.split()) > 1 and long in joined:
            weights.setdefault(_stem(short), 0.6)
    return weights


class InvertedIndex:
    """BM25 over documents given as term counts; postings kept as one string per term
    ("doc:count doc:count"), so loading the index from JSON does not parse what no query asks for."""

    def __init__(self, lengths: list[int], postings: dict[str, str]) -> None:
        self.lengths = lengths
        self.postings = postings
        self.average = (sum(lengths) / len(lengths)) if lengths else 0.0
        self._parsed: dict[str, list[tuple[int, int]]] = {}

    @classmethod
    def build(cls, documents: list[dict[str, int]]) -> InvertedIndex:
        lists: dict[str, list[str]] = {}
        for n, counts in enumerate(documents):
            for term in sorted(counts):
                lists.setdefault(term, []).append(f"{n}:{counts[term]}")
        return cls([sum(d.values()) for d in documents], {t: " ".join(p) for t, p in sorted(lists.items())})

    def _list(self, term: str) -> list[tuple[int, int]]:
        got = self._parsed.get(term)
        if got is None:
            raw = self.postings.get(term, "")
            got = self._parsed[term] = [(int(d), int(c)) for d, _, c in (p.partition(":") for p in raw.split())]
        return got

    def scores(self, weights: dict[str, float]) -> dict[int, float]:
        total = len(self.lengths)
        found: dict[int, float] = {}
        for term, weight in sorted(weights.items()):
            postings = self._list(term)
            if not postings:
                continue
            idf = math.log(1 + (total - len(postings) + 0.5) / (len(postings) + 0.5))
            for doc, count in postings:
                norm = K1 * (1 - B + B * self.lengths[doc] / (self.average or 1))
                found[doc] = found.get(doc, 0.0) + weight * idf * count * (K1 + 1) / (count + norm)
        return found

    def explain(self, doc: int, weights: dict[str, float]) -> list[tuple[str, float]]:
        """Each word of `weights` that `doc` holds, with its share of the doc's score, largest first."""
        total = len(self.lengths)
        shares = []
        for term, weight in sorted(weights.items()):
            postings = self._list(term)
            count = next((c for d, c in postings if d == doc), 0)
            if count:
                idf = math.log(1 + (total - len(postings) + 0.5) / (len(postings) + 0.5))
                norm = K1 * (1 - B + B * self.lengths[doc] / (self.average or 1))
                shares.append((term, weight * idf * count * (K1 + 1) / (count + norm)))
        return sorted(shares, key=lambda s: (-s[1], s[0]))
