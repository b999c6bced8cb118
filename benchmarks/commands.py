"""Whole commands as a user feels them: `kbuild` no-op, `kbuild check` on a fresh clone,
`kbuild status`, `--help` and `--version`, against `git status` and ninja on the same tree.

    python benchmarks/commands.py [--facts 130 1040 4940] [--runs 7]

Each store is built (offline backend) from real documents, the revisions of PEP 747 in
tests/data/pep-0747 (copied under new names until the store holds about --facts facts), and
committed to a git repository. ninja (`pip install ninja`) gets an equivalent `build.ninja`
generated from kbuild.lock: one edge per query, from the files it reads and the outputs (or
stamps) of the queries it reads, to its outputs (or a stamp). Every figure is the median of
--runs whole processes, the commands interleaved so a busy machine slows them alike; ratios are
within one run.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Installed kbuild runs from compiled bytecode (pip compiles it at install); this machine's
# environment turns bytecode caching off, which would add about a second to every process.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

DOCUMENTS = Path(__file__).resolve().parents[1] / "tests" / "data" / "pep-0747"
KBUILD = [sys.executable, "-m", "kbuild"]
FACTS_PER_DOCUMENT = 17  # a revision of PEP 747 cut at floor 300, cap 600 tokens


def run(cmd: list[str], cwd: Path, ok: tuple[int, ...] = (0,)) -> float:
    t0 = time.perf_counter()
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if result.returncode not in ok:
        raise RuntimeError(f"{' '.join(cmd)} exited {result.returncode}: {(result.stdout + result.stderr)[-1500:]}")
    return elapsed


def make_store(root: Path, facts: int) -> int:
    run([*KBUILD, "init", "."], root)
    kbuildfile = root / "Kbuildfile.py"
    kbuildfile.write_text(kbuildfile.read_text().replace("floor_tokens=2000, cap_tokens=4000",
                                                         "floor_tokens=300, cap_tokens=600"))
    revisions = sorted(DOCUMENTS.glob("*.rst"))
    (root / "docs").mkdir()
    for n in range(max(1, round(facts / FACTS_PER_DOCUMENT))):
        name = f"docs/pep-0747-{n:04d}.rst"
        shutil.copy(revisions[n % len(revisions)], root / name)
    # one sources.yml written at once: `kbuild add` per document would dominate the setup
    entries = "".join(f"  - id: pep-0747-{n:04d}\n    path: docs/pep-0747-{n:04d}.rst\n"
                      for n in range(max(1, round(facts / FACTS_PER_DOCUMENT))))
    (root / "kb/standards").mkdir(parents=True)
    (root / "kb/standards/sources.yml").write_text(f"title: Standards\nsources:\n{entries}")
    run(KBUILD, root)
    built = sum(1 for p in (root / "kb").rglob("*.md") if p.read_text(errors="replace").startswith("Source: "))
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"],
                ["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "store"]):
        subprocess.run(cmd, cwd=root, check=True)
    return built


def write_ninja(root: Path) -> Path:
    """An equivalent build.ninja: the lock's graph, one edge per query, in a folder of its own."""
    lock = json.loads((root / "kbuild.lock").read_text())["queries"]
    folder = root.parent / (root.name + "-ninja")
    folder.mkdir()
    stamps = {qid: f"stamps/{n}" for n, qid in enumerate(lock)}

    def node(qid: str) -> list[str]:
        outputs = lock[qid]["outputs"]
        return [f"../{root.name}/{p}" for p in outputs] if outputs else [stamps[qid]]

    def esc(path: str) -> str:
        return path.replace("$", "$$").replace(" ", "$ ").replace(":", "$:")

    lines = ["rule touch", "  command = touch $out", ""]
    for qid, entry in lock.items():
        inputs = []
        for group in entry["deps"]:
            for dep, _ in group:
                inputs += [f"../{root.name}/{dep[5:]}"] if dep.startswith("file:") else node(dep) if dep in lock else []
        lines.append(f"build {' '.join(map(esc, node(qid)))}: touch {' '.join(map(esc, dict.fromkeys(inputs)))}")
    (folder / "stamps").mkdir()
    (folder / "build.ninja").write_text("\n".join(lines) + "\n")
    run(["ninja", "-d", "keepdepfile"], folder)  # the first build stamps; outputs exist already
    run(["ninja"], folder)
    return folder


def measure(facts: int, runs: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "store"
        root.mkdir()
        built = make_store(root, facts)
        ninja = write_ninja(root) if shutil.which("ninja") else None
        clone = Path(tmp) / "clone"
        subprocess.run(["git", "clone", "-q", str(root), str(clone)], check=True)
        commands: dict[str, tuple[list[str], Path, tuple[int, ...]]] = {
            "kbuild no-op": (KBUILD, root, (0,)),
            "git status": (["git", "status", "--porcelain"], root, (0,)),
            "kbuild status": ([*KBUILD, "status"], root, (0, 1)),
            "kbuild --help": ([*KBUILD, "--help"], root, (0,)),
            "kbuild --version": ([*KBUILD, "--version"], root, (0, 2)),
        }
        if ninja:
            commands["ninja no-op"] = (["ninja"], ninja, (0,))
        times: dict[str, list[float]] = {name: [] for name in [*commands, "kbuild check (fresh clone)"]}
        for _ in range(runs):
            for name, (cmd, cwd, ok) in commands.items():
                times[name].append(run(cmd, cwd, ok))
            shutil.rmtree(clone / ".kbuild", ignore_errors=True)  # as on a CI runner: no state, no cache
            times["kbuild check (fresh clone)"].append(run([*KBUILD, "check"], clone))
        return {"facts": built, **{name: statistics.median(t) for name, t in times.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--facts", type=int, nargs="+", default=[130, 1040, 4940])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    print("| store | `kbuild` no-op | `git status` | ninja no-op | `kbuild check` (fresh clone) | `kbuild status` "
          "| `--help` | `--version` |")
    print("|---|---|---|---|---|---|---|---|")
    for facts in args.facts:
        r = measure(facts, args.runs)
        git = r["git status"]

        def cell(name: str) -> str:
            return f"{r[name]:.3f} s ({r[name] / git:.0f}×)" if name in r else "n/a"

        print(f"| {r['facts']:,} facts | {cell('kbuild no-op')} | {git:.3f} s | {cell('ninja no-op')} "
              f"| {cell('kbuild check (fresh clone)')} | {cell('kbuild status')} | {r['kbuild --help']:.3f} s "
              f"| {r['kbuild --version']:.3f} s |", flush=True)


if __name__ == "__main__":
    main()
