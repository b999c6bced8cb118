"""Create-pipeline throughput with the offline backend on the real documents of ../shared/corpus.

    python benchmarks/create.py [--corpus ../shared/corpus] [--runs 3]

Builds a fresh store from every document of the corpus (the newest revision of each PEP that
has revisions), in one process per run, and prints chunks (facts) per second and the time of a
no-op build after it. Then replays the revisions of each PEP in order, one build per revision,
and prints per revision how many facts changed what they say (Original or Rewritten; a fact that
only moved changes its first line, "text.md lines ...", and costs no model call) against how many
facts the document has: the blast radius of real edits.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from click.testing import CliRunner

from kbuild.cli import main as cli

REPO = Path(__file__).resolve().parents[1]


def kbuild(root: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["-C", str(root), *args])
    if result.exit_code != 0:
        raise SystemExit(f"kbuild {' '.join(args)} failed:\n{result.output}")
    return result.output


def documents(corpus: Path) -> dict[str, Path]:
    docs = {}
    for entry in sorted(corpus.iterdir()):
        if entry.is_dir():
            revisions = sorted(entry.glob("rev-*.rst"))
            if revisions:
                docs[entry.name] = revisions[-1]
        elif entry.suffix == ".rst":
            docs[entry.stem] = entry
    return docs


def fact_pages(root: Path) -> dict[str, str]:
    """Each fact page without its first line: what it says, not the lines where it stands."""
    return {p.relative_to(root).as_posix(): p.read_text().split("\n", 1)[1] for p in (root / "kb").rglob("*.md")
            if "/facts/" in p.as_posix() and p.name not in ("index.md", "text.md")
            and p.read_text().startswith("Source: ")}


def throughput(corpus: Path, runs: int) -> dict[str, float]:
    """A cold build of the corpus's documents and a no-op build after it, medians of `runs`."""
    docs = documents(corpus)
    rows = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            kbuild(root, "init", str(root))
            for name, path in docs.items():
                shutil.copy(path, root / f"{name}.rst")
                kbuild(root, "add", "corpus", f"{name}.rst")
            t0 = time.perf_counter()
            kbuild(root)
            cold = time.perf_counter() - t0
            chunks = len(fact_pages(root))
            t0 = time.perf_counter()
            kbuild(root)
            noop = time.perf_counter() - t0
            rows.append((cold, chunks, noop))
    cold = statistics.median(r[0] for r in rows)
    chunks = rows[0][1]
    size = sum(p.stat().st_size for p in docs.values())
    noop = statistics.median(r[2] for r in rows)
    print(f"create: {len(docs)} documents, {size / 1024:.0f} KiB, {chunks} facts; cold build {cold:.2f} s "
          f"= {chunks / cold:.1f} chunks/s; no-op build {noop:.3f} s (median of {runs}, in-process, offline backend)")
    return {"documents": len(docs), "kib": size / 1024, "facts": chunks, "cold_s": cold, "noop_s": noop}


def replay(corpus: Path) -> None:
    for folder in sorted(p for p in corpus.iterdir() if p.is_dir()):
        revisions = sorted(folder.glob("rev-*.rst"))
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            kbuild(root, "init", str(root))
            source = root / f"{folder.name}.rst"
            shutil.copy(revisions[0], source)
            kbuild(root, "add", "corpus", source.name)
            kbuild(root)
            before = fact_pages(root)
            changed_counts = []
            for rev in revisions[1:]:
                shutil.copy(rev, source)
                kbuild(root)
                after = fact_pages(root)
                changed = sum(1 for k in after if before.get(k) != after[k]) + sum(1 for k in before if k not in after)
                changed_counts.append((rev.stem, changed, len(after)))
                before = after
            print(f"{folder.name}: " + ", ".join(f"{r[1]}/{r[2]}" for r in changed_counts))
            total_changed = sum(r[1] for r in changed_counts)
            total = sum(r[2] for r in changed_counts)
            print(f"  {len(changed_counts)} revisions: {total_changed} facts rewritten of {total} "
                  f"({100 * total_changed / total:.0f}%; re-processing whole documents would rewrite 100%)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "corpus")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if not args.corpus.is_dir():
        sys.exit(f"no corpus at {args.corpus}; pass --corpus")
    throughput(args.corpus, args.runs)
    replay(args.corpus)


if __name__ == "__main__":
    main()
