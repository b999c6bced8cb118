"""Writing the search index's bm25s files from the sections' term counts, as every edit does:
kbuild's `build_index` (the scores computed in NumPy through bm25s's `build_index_from_ids`)
against bm25s's own index over the same words spelled out as token lists; and the whole of
what `search_index` does with its sources' stored sections (read them, sections.json, the
bm25s files), with NumPy and bm25s imported already.

    python benchmarks/index_build.py [--chunks 2000] [--facts N] [--runs 7]

The sections are a real store's: edit_time.py's document of --chunks chunks (or its project of
--facts facts), built with the offline backend by the installed kbuild, its term counts read
from the search sections the build stored. Medians of --runs, interleaved; the script stops if
build_index and bm25s do not write the same bytes. Run it with another install's Python to
time that kbuild's index on its own store.
"""
from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from installed import use_installed_kbuild  # noqa: E402

use_installed_kbuild()

from edit_time import kbuild, write_store  # noqa: E402


def stock(documents: list[dict[str, int]]) -> dict[str, bytes]:
    """The files bm25s writes itself for these term counts, each term spelled out as often as
    it occurs (what build_index did before it scored the counts)."""
    import bm25s
    from bm25s.tokenization import Tokenized

    from kbuild.text.ranking import B, K1, saved_files

    vocabulary = {term: n for n, term in enumerate(sorted({t for d in documents for t in d}))}
    retriever = bm25s.BM25(k1=K1, b=B)
    retriever.index(Tokenized(ids=[[vocabulary[t] for t in sorted(d) for _ in range(d[t])] for d in documents],
                              vocab=vocabulary), show_progress=False, leave_progress=False)
    return saved_files(retriever)  # its vocabulary spelled as build_index spells it


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--facts", type=int, help="a project of this many facts instead of a document")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    from kbuild.engine.hashing import decode_value
    from kbuild.rules import search_index
    from kbuild.rules.search_index import SourceSections
    from kbuild.text.ranking import build_index, unpacked

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_store(root, *((max(1, args.facts // 20), 20) if args.facts else (1, args.chunks)))
        kbuild(sys.executable, root)
        with sqlite3.connect(root / ".kbuild/state.db") as db:
            stored = [decode_value(blob) for (blob,) in db.execute(
                "SELECT value FROM memo WHERE rule = 'source_sections' AND value IS NOT NULL ORDER BY id")]
    segments = [segment for joined in stored for segment in SourceSections.of(joined).segments]

    def whole_index() -> None:  # search_index's own work, once its sources' sections are read
        made = [SourceSections.of(joined) for joined in stored]
        if hasattr(search_index, "index_files"):
            search_index.index_files(made)
            return
        # an install from before index_files (2634ca6 and older): the rule's steps as it took them
        search_index.render_sections([line for found in made for line in found.lines],
                                     {short: long for found in made for short, long in found.abbreviations.items()})
        build_index([segment for found in made for segment in found.segments])

    documents = []
    for found in segments:
        start, postings, counts = 0, unpacked(found["postings"]), unpacked(found["counts"])
        for length in unpacked(found["lengths"]):
            places = range(start, start + length)
            documents.append({found["terms"][postings[n]]: counts[n] for n in places})
            start += length
    if stock(documents) != build_index(segments):
        raise SystemExit("build_index and bm25s wrote different files")
    times: dict[str, list[float]] = {"kbuild build_index": [], "bm25s over token lists": [],
                                     "search_index from stored sections": []}
    for _ in range(args.runs):
        for name, make in (("kbuild build_index", lambda: build_index(segments)),
                           ("bm25s over token lists", lambda: stock(documents)),
                           ("search_index from stored sections", whole_index)):
            started = time.perf_counter()
            make()
            times[name].append(time.perf_counter() - started)
    size = f"{args.facts} facts" if args.facts else f"{args.chunks} chunks"
    print(f"the bm25s files of {len(documents)} sections ({size}, {len(stored)} sources), medians of {args.runs}:")
    for name, timed in times.items():
        print(f"  {name}: {statistics.median(timed) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
