"""Do fact names hold still across real revisions? And are facts the promised size?

    python benchmarks/name_stability.py [--corpus ../shared/corpus]

Fact names are link targets: a name that changes breaks every link to it. For each document
with a revision history in the corpus (PEP 810: 26 revisions, PEP 747: 21), every revision is
sliced (floor/cap 2000/4000, the default, and 500/1000, for more facts) and named with
`fact_names`, and for each pair of consecutive revisions the share of the older one's names
that the newer one still has is counted. A name that disappears at one revision and returns at
a later one (a link broken in between, for nothing) is counted apart. Sizes: the median fact
in tokens, and how many facts are under the floor in documents that are not. Last, every file of
the corpus converted to text.md as a store converts it, at the default floor and cap: sizes, and
names that are "opening" where a heading stands, hold markup or end on a cut word.

Skips (exit 0) when the corpus is not there.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kbuild.text.slicing import Chunk, fact_names, slice_text

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
SETTINGS = ((2000, 4000), (500, 1000))

Namer = Callable[[str, int, int], tuple[list[Chunk], list[str]]]


def current(text: str, floor: int, cap: int) -> tuple[list[Chunk], list[str]]:
    chunks = slice_text(text, floor, cap)
    return chunks, fact_names(chunks)


@dataclass(frozen=True)
class Stability:
    document: str
    floor: int
    cap: int
    revisions: int
    facts: float  # per revision, mean
    kept: int  # names of a revision that the next one still has, summed over pairs
    named: int  # names of the older revision, summed over pairs
    returned: int  # names gone at one revision and back at a later one
    median_tokens: float
    under_floor: float  # share of facts under the floor (documents over the floor only)

    @property
    def survival(self) -> float:
        return self.kept / self.named if self.named else 1.0


def measure(document: str, revisions: list[str], floor: int, cap: int, namer: Namer = current) -> Stability:
    named: list[set[str]] = []
    sizes: list[int] = []
    small = 0
    for text in revisions:
        chunks, names = namer(text, floor, cap)
        named.append(set(names))
        sizes += [c.tokens for c in chunks]
        if sum(c.tokens for c in chunks) >= floor:
            small += sum(c.tokens < floor for c in chunks)
    kept = sum(len(a & b) for a, b in zip(named, named[1:]))
    total = sum(len(a) for a in named[:-1])
    returned = 0
    for i in range(1, len(named) - 1):
        gone = named[i - 1] - named[i]
        returned += len(gone & set().union(*named[i + 1:]))
    return Stability(document, floor, cap, len(revisions), statistics.mean(len(n) for n in named), kept, total,
                     returned, statistics.median(sizes), small / len(sizes))


def histories(corpus: Path) -> dict[str, list[str]]:
    return {folder.name: [p.read_text("utf-8") for p in sorted(folder.glob("rev-*.rst"))]
            for folder in sorted(corpus.iterdir()) if folder.is_dir() and any(folder.glob("rev-*.rst"))}


def table(results: list[Stability]) -> str:
    lines = ["| document | floor/cap | revisions | facts per revision | names kept per revision | "
             "gone and back | median tokens | under the floor |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r.document} | {r.floor}/{r.cap} | {r.revisions} | {r.facts:.1f} | "
                     f"{r.survival:.1%} ({r.kept}/{r.named}) | {r.returned} | {r.median_tokens:.0f} | "
                     f"{r.under_floor:.0%} |")
    return "\n".join(lines)


def run(corpus: Path, namer: Namer = current) -> list[Stability]:
    return [measure(name, revisions, floor, cap, namer)
            for name, revisions in histories(corpus).items() for floor, cap in SETTINGS]


def names_report(corpus: Path, floor: int = 2000, cap: int = 4000) -> str:
    """Every file of the corpus as the converter writes its text.md, sliced and named as a store
    names its facts: sizes, and what a name must not be (the issue's counts)."""
    import re

    from kbuild.convert import convert
    from kbuild.text.slugs import slug

    files = sorted(corpus.glob("*.rst")) + sorted(corpus.glob("*/rev-*.rst"))
    sizes: list[int] = []
    under = whole_small = opening = markup = cut = several = 0
    for path in files:
        text = convert(path.read_bytes(), path.name).text
        chunks = slice_text(text, floor, cap)
        small_source = sum(c.tokens for c in chunks) < floor
        for c, name in zip(chunks, fact_names(chunks, reserved={"index", "text", "pages", "figures"})):
            sizes.append(c.tokens)
            if c.tokens < floor:
                whole_small += small_source
                under += not small_source
            opening += bool(re.fullmatch(r"opening(-\d+)?", name)) and bool(c.headings or c.covers)
            markup += bool(re.search(r"a-name|div-class|href|mdash|amp|nbsp", name))
            words = {w for h in c.covers for w in slug(h, 10**6).split("-")}
            last = re.sub(r"-\d+$", "", name).split("-")[-1]
            cut += not name.startswith("opening") and last not in words
            several += len(c.covers) > 1
    return (f"{len(files)} files as text.md, {floor}/{cap}: {len(sizes)} facts, median {statistics.median(sizes):.0f} "
            f"tokens; under the floor: {under} in sources over it, {whole_small} in sources under it; "
            f"named opening where a heading stands: {opening}; markup in a name: {markup}; cut mid-word: {cut}; "
            f"covering several headings: {several}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    args = parser.parse_args()
    if not args.corpus.is_dir():
        print(f"skipped: no corpus at {args.corpus}")
        return 0
    print(table(run(args.corpus)))
    print(names_report(args.corpus))
    return 0


if __name__ == "__main__":
    sys.exit(main())
