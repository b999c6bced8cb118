"""Token amplification: model input tokens of a cold build divided by the tokens of the sources.

    python benchmarks/amplification.py [--corpus ../shared/corpus]

The limit is about 1 (every source token read once). Uses the simulated model of
edit_replay.py (offline answers, one counted call per question, tokens = characters / 4) on the
newest revision of each document of the corpus, and prints the ratio per task.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from edit_replay import REPO, cold_report  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "corpus")
    args = parser.parse_args()
    if not args.corpus.is_dir():
        sys.exit(f"no corpus at {args.corpus}; pass --corpus")
    docs = {}
    for entry in sorted(args.corpus.iterdir()):
        if entry.is_dir() and sorted(entry.glob("rev-*.rst")):
            docs[entry.name] = sorted(entry.glob("rev-*.rst"))[-1].read_text()
        elif entry.suffix == ".rst":
            docs[entry.stem] = entry.read_text()
    source_tokens = sum(len(t) for t in docs.values()) // 4
    counters = cold_report({f"{name}.rst": text for name, text in docs.items()})["counters"]
    print(f"{len(docs)} documents, {source_tokens:,} source tokens")
    for name in sorted(k for k in counters if k.startswith("tokens in: ")):
        print(f"  {name[11:]:<16} {int(counters[name]):>9,} tokens in  {counters[name] / source_tokens:5.2f}x")
    print(f"  {'all':<16} {int(counters['tokens in']):>9,} tokens in  {counters['tokens in'] / source_tokens:5.2f}x")


if __name__ == "__main__":
    main()
