"""How much of a reference conversion kbuild's own converters keep, per file.

    python benchmarks/office.py [--corpus ../shared/corpus-wild/office]

For each file of CORPUS/docling/ beside its ground truth (NAME.expected.md, docling's) and each of
CORPUS/markitdown/ with an expected output (expected/STEM.md, markitdown's), kbuild.convert's text
is compared with the reference:
  words     the share of the reference's distinct words (lower-cased runs of letters and digits;
            markup and `<!-- image -->` left out) that the text holds
  headings  the reference's headings whose words stand in one of the text's headings (a heading
            may say more: "Slide 1: Sales" keeps "Sales"), of all its headings
  tables    the reference's tables of which one of the text's tables holds at least 90% of the
            words, of all its tables
The reference is a reference to compare words with, not a format to copy. Prints a Markdown table
and exits 1 when a docling file keeps less than --floor (0.9) of the words. The checkout's
kbuild.convert is measured (only the converters are needed, no install).
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kbuild.convert import ConversionError, convert  # noqa: E402

_WORD = re.compile(r"[^\W_]+")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


@dataclass(frozen=True)
class Score:
    name: str
    words: float
    headings: tuple[int, int]
    tables: tuple[int, int]


def words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(_COMMENT.sub(" ", text))}


def headings(text: str) -> list[str]:
    return [" ".join(_WORD.findall(m.group(2).lower())) for line in text.splitlines() if (m := _HEADING.match(line))]


def tables(text: str) -> list[set[str]]:
    """Each table's words: a run of lines that start with "|"."""
    found: list[set[str]] = []
    current: list[str] = []
    for line in [*text.splitlines(), ""]:
        if line.lstrip().startswith("|"):
            current.append(line)
        elif current:
            found.append(words("\n".join(current)))
            current = []
    return [t for t in found if t]


def score(name: str, text: str, reference: str) -> Score:
    wanted = words(reference)
    kept = len(wanted & words(text)) / len(wanted) if wanted else 1.0
    ours = headings(text)
    theirs = [h for h in headings(reference) if h]
    heads = sum(any(f" {h} " in f" {o} " for o in ours) for h in theirs)
    our_tables = tables(text)
    their_tables = tables(reference)
    kept_tables = sum(any(len(t & o) >= 0.9 * len(t) for o in our_tables) for t in their_tables)
    return Score(name, kept, (heads, len(theirs)), (kept_tables, len(their_tables)))


def pairs(corpus: Path) -> list[tuple[str, Path, Path]]:
    found = [("docling", f, f.with_name(f.name + ".expected.md"))
             for f in sorted((corpus / "docling").iterdir()) if not f.name.endswith(".md")]
    for expected in sorted((corpus / "markitdown" / "expected").glob("*.md")):
        found += [("markitdown", f, expected) for f in sorted((corpus / "markitdown").iterdir())
                  if f.stem == expected.stem and f.is_file()]
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "corpus-wild" / "office")
    parser.add_argument("--floor", type=float, default=0.9, help="least share of words each docling file keeps")
    args = parser.parse_args()
    if not (args.corpus / "docling").is_dir():
        print(f"no corpus at {args.corpus}; pass --corpus", file=sys.stderr)
        return 2
    print("| reference | file | words | headings | tables |")
    print("|---|---|---|---|---|")
    short = []
    results = []
    for origin, source, expected in pairs(args.corpus):
        try:
            text = convert(source.read_bytes(), source.name).text
        except ConversionError as exc:
            text = ""
            print(f"{source.name}: {exc}", file=sys.stderr)
        results.append((origin, expected, score(source.name, text, expected.read_text())))
    # markitdown's expected outputs are named by stem alone (test.md): of the files of that stem
    # (test.pdf, test.docx, ...), the one it describes is the one whose text it matches best
    best = {}
    for origin, expected, result in results:
        if best.get(expected) is None or result.words > best[expected].words:
            best[expected] = result
    for origin, expected, result in results:
        if best[expected] is not result:
            continue
        print(f"| {origin} | {result.name} | {result.words:.2f} | {result.headings[0]}/{result.headings[1]} "
              f"| {result.tables[0]}/{result.tables[1]} |")
        if origin == "docling" and result.words < args.floor:
            short.append(result.name)
    if short:
        print(f"\nunder {args.floor} of the words: {', '.join(short)}", file=sys.stderr)
    return 1 if short else 0


if __name__ == "__main__":
    sys.exit(main())
