"""What a one-sentence edit costs in wall time, as a user feels it, as documents and projects grow.

    python benchmarks/edit_time.py [--chunks 20 200 2000] [--facts 100 1000] [--runs 3] [--against PYTHON]
                                   [--edited 1] [--colds 1]

Offline backend, each build a whole `kbuild -q` process. A document of N chunks is N sections in
chapters of 20, cut one fact each (floor and cap small); a project of N facts is N/20 such documents of 20. After
a cold build, one sentence of one section is edited and the next build timed (median of
`--runs` edits, each a different sentence; the first of them also on its own). The aim (issue 16): the largest at most 1.5x the
smallest, since the edit reaches one fact, one summary and the pages above them. --against
also times another Python's kbuild (an install of the commit before a change) on its own copy
of each store, the same edits interleaved with this one's, as rows of their own. --edited K
changes a sentence in each of K documents of a project at every edit, as a pull that brings K
edited sources does; --colds N times N cold builds of fresh stores, in turns, and shows their
median (a single cold build moves by 10-15% here). The stores are all built first and then
edited in rounds, each round every store once, so that the ratio of the largest edit to the
smallest, printed last, is of edits timed side by side.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import shutil
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from installed import use_installed_kbuild  # noqa: E402

use_installed_kbuild()

KBUILDFILE = """from pathlib import Path
from kbuild.rules import knowledge_base

kb = knowledge_base(Path(__file__).parent, floor_tokens=20, cap_tokens=60)
RULES = kb.rules
targets = kb.targets
before_build = kb.before_build
"""


def document(sections: int, seed: int) -> str:
    """A standard's shape: a title, chapters of 20 sections, a rule or two in each."""
    parts = [f"# Document {seed}\n\n"]
    for n in range(sections):
        if n % 20 == 0:
            parts.append(f"## Chapter {n // 20 + 1}\n\n")
        parts.append(f"### Part {seed} {n}\n\nThe limit of part {n} is {n + 3} items. Each item waits {n % 7 + 1} "
                     f"seconds before it is sent again.\n\n")
    return "".join(parts)


def write_store(root: Path, documents: int, sections: int) -> None:
    """A project of `documents` documents of `sections` sections each, not yet built."""
    (root / "kb/p").mkdir(parents=True)
    (root / "Kbuildfile.py").write_text(KBUILDFILE)
    (root / "kb/p/sources.yml").write_text("sources:\n" + "".join(f"  - id: d{n}\n    path: d{n}.md\n"
                                                                  for n in range(documents)))
    for n in range(documents):
        (root / f"d{n}.md").write_text(document(sections, n))


def kbuild(python: str, root: Path, *args: str) -> float:
    started = time.perf_counter()
    done = subprocess.run([python, "-m", "kbuild", "-q", *args], cwd=root, capture_output=True, text=True,
                          env={**os.environ, "OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "KBUILD_MODEL": ""})
    if done.returncode != 0:
        raise SystemExit(f"kbuild failed in {root}: {done.stdout}{done.stderr}")
    return time.perf_counter() - started


def _turn(count: int, turn: int) -> list[int]:
    """The order the Pythons take in a turn: reversed every other turn, since the first build of
    a turn is the slower here (a cold build of 5,000 facts by about 0.5 s, whichever kbuild it
    is: `--chunks --facts 5000 --runs 1 --colds 3` before the order alternated)."""
    order = list(range(count))
    return order[::-1] if turn % 2 else order


def measure(stores: list[tuple[int, int]], runs: int, pythons: list[str], edited: int = 1,
            colds: int = 1) -> list[list[tuple[float, float, float]]]:
    """For each store (documents, sections), for each of `pythons`, each on its own copy:
    (median cold build, first edit, median edit). The edits go in rounds: each round edits every
    store once with each Python, so that the machine's load, which moves by a tenth and more over
    minutes here, weighs on every size alike and the ratio of two sizes holds within a run. The
    first edit after a cold build is also the first to look behind the gates it reaches
    (docs/engine.md, step 2), which the later ones find kept in the state. Each edit changes one
    sentence in each of `edited` documents (a pull that brings several edited sources); each of
    `colds` cold builds is of a fresh store, in turns with the other Pythons' (who goes first
    alternates, turn by turn and store by store)."""
    with tempfile.TemporaryDirectory() as tmp:
        cold_times = [[[] for _ in pythons] for _ in stores]
        roots: list[list[Path]] = []
        for number, (documents, sections) in enumerate(stores):
            for build in range(colds):
                built = [Path(tmp) / f"{number}-{build}-{n}" for n in range(len(pythons))]
                for root in built:
                    write_store(root, documents, sections)
                for n in _turn(len(pythons), number + build):
                    cold_times[number][n].append(kbuild(pythons[n], built[n]))
                if build < colds - 1:
                    for root in built:
                        shutil.rmtree(root)
            roots.append(built)
        times: list[list[list[float]]] = [[[] for _ in pythons] for _ in stores]
        for run in range(runs):
            for number, ((documents, sections), built, timings) in enumerate(zip(stores, roots, times)):
                part = (run * 7) % sections
                for n in _turn(len(pythons), number + run):
                    for document in range(min(edited, documents)):
                        target = built[n] / f"d{document}.md"
                        target.write_text(target.read_text().replace(f"The limit of part {part} is",
                                                                     f"The limit of part {part} was"))
                    timings[n].append(kbuild(pythons[n], built[n]))
        return [[(statistics.median(cold), timed[0], statistics.median(timed)) for cold, timed in zip(colds_of, timings)]
                for colds_of, timings in zip(cold_times, times)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, nargs="*", default=[20, 200, 2000])
    parser.add_argument("--facts", type=int, nargs="*", default=[100, 1000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--against", metavar="PYTHON", help="also time the kbuild of this Python, interleaved")
    parser.add_argument("--edited", type=int, default=1, help="documents each edit changes (a project's)")
    parser.add_argument("--colds", type=int, default=1, help="cold builds of fresh stores, in turns (the median)")
    args = parser.parse_args()
    pythons = [sys.executable, *([args.against] if args.against else [])]
    kinds = [("document", f"document of {n} chunks", 1, n) for n in sorted(args.chunks)]
    kinds += [("project", f"project of {n} facts", max(1, n // 20), 20) for n in sorted(args.facts)]
    measured = measure([(documents, sections) for _, _, documents, sections in kinds], args.runs, pythons,
                       args.edited, args.colds)
    print("| store | cold build | first edit | one-sentence edit (median) |")
    print("|---|---|---|---|")
    for (_, name, _, _), rows in zip(kinds, measured):
        for python, (cold, first, edit) in zip(pythons, rows):
            who = f" ({python})" if args.against else ""
            print(f"| {name}{who} | {cold:.2f} s | {first:.2f} s | {edit:.2f} s |")
    for n, python in enumerate(pythons):  # the aim of issue 16: the largest edit at most 1.5x the smallest
        ratios = []
        for kind in ("document", "project"):
            edits = [rows[n][2] for (k, _, _, _), rows in zip(kinds, measured) if k == kind]
            if len(edits) > 1:
                ratios.append(f"{kind}s {edits[-1] / edits[0]:.2f}x")
        if ratios:
            who = f" ({python})" if args.against else ""
            print(f"largest edit over smallest{who}: {', '.join(ratios)}")


if __name__ == "__main__":
    main()
