"""The same-meaning classifier on labelled real edits: precision and recall of "same".

    python benchmarks/meaning.py

The pairs are tests/data/meaning-pairs.json (how they were made: tests/data/README.md). A false
"same" leaves a stale page standing, so precision must be 1.0; recall is the cutoff it buys.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from kbuild.checks.meaning import classify_text

PAIRS = Path(__file__).resolve().parents[1] / "tests" / "data" / "meaning-pairs.json"


def scores(pairs: list[dict] | None = None) -> dict[str, float]:
    """Precision and recall of "same" over labelled pairs (all of tests/data/meaning-pairs.json by default)."""
    pairs = json.loads(PAIRS.read_text()) if pairs is None else pairs
    said = [classify_text(p["old"], p["new"]) for p in pairs]
    tp = sum(1 for p, d in zip(pairs, said) if d.same and p["same"])
    fp = sum(1 for p, d in zip(pairs, said) if d.same and not p["same"])
    fn = sum(1 for p, d in zip(pairs, said) if not d.same and p["same"])
    return {"pairs": len(pairs), "same": tp + fn, "cut off": tp, "false same": fp,
            "precision": tp / (tp + fp) if tp + fp else 1.0, "recall": tp / (tp + fn) if tp + fn else 1.0}


def main() -> None:
    pairs = json.loads(PAIRS.read_text())
    real = [p for p in pairs if not p.get("constructed")]
    for name, subset in (("real edits", real), ("all pairs (real + constructed)", pairs)):
        got = scores(subset)
        print(f"{name}: {got['pairs']} pairs, {got['same']} labelled same: precision {got['precision']:.2f} "
              f"({got['false same']} false same), recall {got['recall']:.2f} ({got['cut off']} cut off)")
    said = [classify_text(p["old"], p["new"]) for p in pairs]
    print("decided by stage: " + ", ".join(f"{s} {n}" for s, n in sorted(Counter(d.stage for d in said).items())))
    for p, d in zip(pairs, said):
        if p["same"] and not d.same:
            print(f"  missed: {p['doc']} {p['revision']} ({p['why']}): {d.stage}: {d.reason}")


if __name__ == "__main__":
    main()
