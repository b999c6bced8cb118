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


def ratios(corpus: Path) -> tuple[int, dict[str, int]]:
    """The corpus's source tokens, and the model input tokens of a cold build per task ("all": in all)."""
    docs = {}
    for entry in sorted(corpus.iterdir()):
        if entry.is_dir() and sorted(entry.glob("rev-*.rst")):
            docs[entry.name] = sorted(entry.glob("rev-*.rst"))[-1].read_text()
        elif entry.suffix == ".rst":
            docs[entry.stem] = entry.read_text()
    source_tokens = sum(len(t) for t in docs.values()) // 4
    counters = cold_report({f"{name}.rst": text for name, text in docs.items()})["counters"]
    tokens = {name[11:]: int(v) for name, v in counters.items() if name.startswith("tokens in: ")}
    tokens["all"] = int(counters["tokens in"])
    return source_tokens, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "corpus")
    args = parser.parse_args()
    if not args.corpus.is_dir():
        sys.exit(f"no corpus at {args.corpus}; pass --corpus")
    source_tokens, tokens = ratios(args.corpus)
    print(f"{source_tokens:,} source tokens")
    for name, n in sorted(tokens.items(), key=lambda kv: kv[0] == "all"):
        print(f"  {name:<16} {n:>9,} tokens in  {n / source_tokens:5.2f}x")


if __name__ == "__main__":
    main()
