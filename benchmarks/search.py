"""`kbuild search` latency over many index lines.

    python benchmarks/search.py [--lines 100000] [--runs 5]

Writes a store of generated source indexes (100 fact lines each) and times search() in-process,
median of --runs. Each search reads and stems every index line again (there is no persistent
search index yet), so this is the cost a persistent index would remove.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from installed import use_installed_kbuild  # noqa: E402

use_installed_kbuild()

from kbuild.retrieval.search import index_lines, search  # noqa: E402
from kbuild.text.ranking import rank  # noqa: E402

WORDS = ("ledger account balance transfer clearing settlement batch window audit record export report merchant "
         "refund payout reserve currency rate fee invoice schedule retry limit customer card daily").split()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    seconds, hits, parts = measure(args.lines, args.runs)
    print(f"{args.lines} index lines: search {seconds:.2f} s (median of {args.runs}); {hits} hits; of it "
          + ", ".join(f"{name} {t:.2f} s" for name, t in parts.items()))


def measure(lines_wanted: int, runs: int) -> tuple[float, int, dict[str, float]]:
    """The median time of one search over `lines_wanted` index lines, its number of hits, and the
    median time of each of its steps done on their own (reading the indexes, ranking their
    lines: stemming every line and scoring them with bm25s)."""
    rng = random.Random(5)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for n in range(lines_wanted // 100):
            folder = root / "kb" / "p" / "facts" / f"s{n}"
            folder.mkdir(parents=True)
            lines = [f"- [f{i}](f{i}.md) (lines {i}-{i + 9}): " + " ".join(rng.choice(WORDS) for _ in range(20)) + "."
                     for i in range(100)]
            (folder / "index.md").write_text("# Source\n\n" + "\n".join(lines) + "\n")
        query = "how long may a customer wait for a refund payout"
        times: list[float] = []
        parts: dict[str, list[float]] = {"reading indexes": [], "ranking lines": []}
        for _ in range(runs):
            t0 = time.perf_counter()
            hits = search(root / "kb", root, query, limit=5)
            t1 = time.perf_counter()
            rows = index_lines(root / "kb", root)
            t2 = time.perf_counter()
            rank([line for _, _, line in rows], query)
            t3 = time.perf_counter()
            times.append(t1 - t0)
            for name, t in zip(parts, (t2 - t1, t3 - t2)):
                parts[name].append(t)
    return statistics.median(times), len(hits), {name: statistics.median(ts) for name, ts in parts.items()}


if __name__ == "__main__":
    main()
