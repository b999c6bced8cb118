"""Where a fresh clone's `kbuild check` spends its time, step by step, in one fresh process.

    python benchmarks/check_phases.py [--facts 4940] [--runs 3] [--against OTHER_PYTHON]

The store is made as benchmarks/commands.py makes it (offline backend, PEP 747 revisions) and
cloned; each run is a new process on the clone (no .kbuild/) that times: running the Kbuildfile,
reading the lock, reading every page once, verifying every query, and the checks on the pages
(links, grounding, orphans, notes). Medians of --runs. --against times another Python's kbuild
too, interleaved, on a copy of the store it built again itself and its own clone (its rules may
differ). The whole command, beside `git status`, is benchmarks/commands.py.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from commands import make_store  # noqa: E402  (it also turns bytecode caching back on)

STEPS = r"""
import json, time
t0 = time.perf_counter()
from pathlib import Path
from kbuild import buildfile
import kbuild.engine.lockfiles as lockfiles, kbuild.engine.staleness as staleness
from kbuild.checks import store
spec = buildfile.load(buildfile.find(Path(".").resolve()))
engine = spec.engine()
took = {"Kbuildfile": time.perf_counter() - t0}

def timed(name, fn):
    def run(*args, **kwargs):
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            took[name] = took.get(name, 0.0) + time.perf_counter() - started
    return run

lockfiles.read_lock = timed("lock", lockfiles.read_lock)  # each lock file, whole or split
staleness._inspect = timed("pages and verification", staleness._inspect)
started = time.perf_counter()
store.check_store(engine, spec.application)
took["the rest: the lock taken in, links, grounding, orphans, notes"] = time.perf_counter() - started - took["lock"] - took["pages and verification"]
print(json.dumps(took))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=4940)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--against", metavar="PYTHON", help="also time the kbuild of this Python, interleaved")
    args = parser.parse_args()
    pythons = [sys.executable, *([args.against] if args.against else [])]
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        store.mkdir()
        facts = make_store(store, args.facts)
        clones = []
        for n, python in enumerate(pythons):
            own = Path(tmp) / f"store{n}"
            shutil.copytree(store, own, symlinks=True)
            for cmd in ([python, "-m", "kbuild", "-q"], ["git", "add", "-A"],
                        ["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "--allow-empty", "-m", "b"],
                        ["git", "clone", "-q", str(own), str(Path(tmp) / f"clone{n}")]):
                subprocess.run(cmd, cwd=own, check=True, capture_output=True)
            clones.append(Path(tmp) / f"clone{n}")
        runs: list[list[dict[str, float]]] = [[] for _ in pythons]
        for _ in range(args.runs):
            for n, python in enumerate(pythons):
                runs[n].append(json.loads(subprocess.run([python, "-c", STEPS], cwd=clones[n], check=True,
                                                         capture_output=True, text=True).stdout))
    for python, timed in zip(pythons, runs):
        print(f"`kbuild check` on a fresh clone of {facts} facts, medians of {args.runs} ({python}):")
        for step in timed[0]:
            print(f"  {step}: {statistics.median(r[step] for r in timed):.3f} s")


if __name__ == "__main__":
    main()
