"""The search index against bm25s: load and query times over a synthetic store of sections.

    python benchmarks/retrieval.py [SECTIONS]

Sections of ~120 words drawn from a Zipf vocabulary of 30,000 words (a real store's shape: a
few words everywhere, most rare); queries of 8 words. Reports, for kbuild's hand-written
inverted index (kbuild/text/ranking.py, persisted as JSON) and for bm25s (if installed, saved
and loaded memory-mapped): the time to build, to load from disk, the first query after loading
and the mean of the next 50. 
"""
from __future__ import annotations

import json
import math
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path


WORDS, LENGTH, QUERY = 30_000, 120, 8
K1, B = 1.2, 0.75


class InvertedIndex:  # the hand-written candidate, kept here to be measured
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


def corpus(n: int, rng: random.Random) -> list[list[str]]:
    weights = [1 / (r + 1) for r in range(WORDS)]
    vocab = [f"w{r}" for r in range(WORDS)]
    return [rng.choices(vocab, weights, k=LENGTH) for _ in range(n)]


def main(n: int) -> None:
    rng = random.Random(19)
    docs = corpus(n, rng)
    queries = [rng.sample(rng.choice(docs), QUERY) for _ in range(51)]
    print(f"{n:,} sections of {LENGTH} words, queries of {QUERY} words")
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        index = InvertedIndex.build([dict(Counter(d)) for d in docs])
        path = Path(tmp) / "index.json"
        path.write_text(json.dumps({"lengths": index.lengths, "postings": index.postings}))
        built = time.perf_counter() - t
        t = time.perf_counter()
        data = json.loads(path.read_text())
        loaded = InvertedIndex(data["lengths"], data["postings"])
        load = time.perf_counter() - t
        t = time.perf_counter()
        loaded.scores(dict.fromkeys(queries[0], 1.0))
        first = time.perf_counter() - t
        t = time.perf_counter()
        for q in queries[1:]:
            found = loaded.scores(dict.fromkeys(q, 1.0))
            sorted(found, key=found.__getitem__, reverse=True)[:40]
        rest = (time.perf_counter() - t) / 50
        print(f"inverted index  build {built:7.2f} s  load {load * 1000:8.1f} ms  first query {first * 1000:7.1f} ms  "
              f"next {rest * 1000:7.1f} ms  ({path.stat().st_size / 1e6:.0f} MB)")
        try:
            import bm25s
        except ImportError:
            print("bm25s           not installed")
            return
        t = time.perf_counter()
        retriever = bm25s.BM25(k1=1.2, b=0.75)
        retriever.index(bm25s.tokenization.Tokenized(
            ids=[[int(w[1:]) for w in d] for d in docs], vocab={f"w{r}": r for r in range(WORDS)}), show_progress=False)
        retriever.save(Path(tmp) / "bm25s")
        built = time.perf_counter() - t
        t = time.perf_counter()
        again = bm25s.BM25.load(Path(tmp) / "bm25s", mmap=True)
        load = time.perf_counter() - t
        t = time.perf_counter()
        again.retrieve([queries[0]], k=40, show_progress=False)
        first = time.perf_counter() - t
        t = time.perf_counter()
        for q in queries[1:]:
            again.retrieve([q], k=40, show_progress=False)
        rest = (time.perf_counter() - t) / 50
        print(f"bm25s           build {built:7.2f} s  load {load * 1000:8.1f} ms  first query {first * 1000:7.1f} ms  "
              f"next {rest * 1000:7.1f} ms")
        # kbuild's own path: kb/PROJECT/search-index/ as rules/search_index.py writes it, read
        # as `kbuild search` reads it (sections.json, one section a line, and the bm25s files).
        from kbuild.retrieval.search import SearchIndex
        from kbuild.text.ranking import build_index, segment
        from kbuild.rules.search_index import render_sections, section_line

        folder = Path(tmp) / "search-index"
        folder.mkdir()
        t = time.perf_counter()
        for name, data in build_index([segment([dict(Counter(d)) for d in docs])]).items():
            (folder / name).write_bytes(data)
        sections = [{"kind": "section", "page": f"kb/p/facts/s/f{n // 10}.md", "crumb": ["Title", f"Section {n}"],
                     "line": " ".join(d[:20]), "text": "kb/p/facts/s/text.md", "start": n, "end": n, "tokens": 160,
                     "source_index": "kb/p/facts/s/index.md"} for n, d in enumerate(docs)]
        (folder / "sections.json").write_text(render_sections([section_line(s) for s in sections], {}))
        built = time.perf_counter() - t
        t = time.perf_counter()
        index = SearchIndex(folder)
        load = time.perf_counter() - t
        timed = []
        for q in queries[:11]:
            t = time.perf_counter()
            index.ranked(" ".join(q))
            timed.append(time.perf_counter() - t)
        print(f"kbuild's index  build {built:7.2f} s  load {load * 1000:8.1f} ms  first query {timed[0] * 1000:7.1f} ms  "
              f"next {sum(timed[1:]) / 10 * 1000:7.1f} ms  (sections.json {(folder / 'sections.json').stat().st_size / 1e6:.0f} MB)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
