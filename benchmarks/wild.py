"""Documents as people write them: a project of every document of ../shared/corpus-wild, built
offline by the installed kbuild (and, with --against, by another kbuild, in the same run).

    python benchmarks/wild.py [--against OTHER_PYTHON] [--corpus ../shared/corpus-wild]

Every document file of the folder is added (the revisions, the reference conversions and its
README left out), then one build from nothing. Reported per kbuild: sources, sources built (every
page of it written), sources with a failed page (office formats among them, which need `kbuild[office]`),
pages with live HTML outside code, links that lead to no file, and the build's wall time.
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from installed import use_installed_kbuild  # noqa: E402

use_installed_kbuild()

from kbuild.checks.links import broken_links  # noqa: E402
from kbuild.text.markdown import live_html  # noqa: E402

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent.parent / "shared" / "corpus-wild"
DOCUMENTS = {".md", ".html", ".xml", ".pdf", ".docx", ".pptx", ".xlsx", ".xls", ".epub", ".ipynb", ".msg"}
OFFICE = {".docx", ".pptx", ".xlsx", ".xls", ".msg"}
# "failed: wild/SOURCE/FACT: ..." or "failed: reading("wild","SOURCE","FACT"): ..."
FAILED = re.compile(r'^failed: (?:[\w-]+/([\w.-]+)|\w+\("[\w-]+","([\w.-]+)")', re.M)


def documents(corpus: Path) -> list[Path]:
    return sorted(p for p in corpus.rglob("*") if p.suffix in DOCUMENTS and "revisions" not in p.parts
                  and "expected" not in p.parts and not p.name.endswith(".expected.md") and p.name != "README.md")


def source_id(path: Path, corpus: Path) -> str:
    """The file's place in the corpus as an id: `office/markitdown/test.pdf` is office-markitdown-test-pdf."""
    return re.sub(r"[^a-z0-9]+", "-", path.relative_to(corpus).as_posix().lower())[-60:].strip("-")


def measure(python: str, corpus: Path) -> dict[str, object]:
    kbuild = [python, "-m", "kbuild"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        subprocess.run([*kbuild, "init", str(root)], cwd=root, check=True, capture_output=True)
        found = documents(corpus)
        ids = {}
        for path in found:  # copied into the project, as a user keeps their documents
            copy = root / "docs" / path.relative_to(corpus)
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, copy)
            ids[source_id(path, corpus)] = path
            subprocess.run([*kbuild, "add", "wild", str(copy.relative_to(root)), "--id", source_id(path, corpus)],
                           cwd=root, check=True, capture_output=True)
        started = time.perf_counter()
        build = subprocess.run(kbuild, cwd=root, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        failed = {a or b for a, b in FAILED.findall(build.stdout + build.stderr)}
        # a failure names the source's id, or the query's first key (a fact's source)
        failed = {s for s in ids if any(f == s or f.startswith(s) for f in failed)}
        pages = [p for p in (root / "kb").rglob("*.md") if "/raw/" not in p.as_posix()]
        tags = sum(1 for p in pages if live_html(p.read_text()))
        dangling = sum(len(broken_links(p, root / "kb")) for p in pages)
    return {"sources": len(found), "built": len(found) - len(failed), "failed": len(failed),
            "office_failed": sum(1 for s in failed if ids[s].suffix in OFFICE),
            "pages_with_tags": tags, "dangling_links": dangling, "pages": len(pages), "seconds": seconds,
            "exit": build.returncode}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--against", metavar="PYTHON", help="also build with the kbuild of this Python")
    args = parser.parse_args()
    if not args.corpus.is_dir():
        sys.exit(f"{args.corpus} is not there; pass --corpus FOLDER")
    pythons = {"this kbuild": sys.executable, **({f"against ({args.against})": args.against} if args.against else {})}
    print(f"| kbuild | sources | built | failed (office) | pages with live HTML | dangling links | pages | build s |")
    print("|---|---|---|---|---|---|---|---|")
    for label, python in pythons.items():
        r = measure(python, args.corpus)
        print(f"| {label} | {r['sources']} | {r['built']} | {r['failed']} ({r['office_failed']}) | "
              f"{r['pages_with_tags']} | {r['dangling_links']} | {r['pages']} | {r['seconds']:.1f} |")


if __name__ == "__main__":
    main()
