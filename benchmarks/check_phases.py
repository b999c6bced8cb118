"""Where a fresh clone's `kbuild check` spends its time, step by step, in one fresh process.

    python benchmarks/check_phases.py [--facts 4940] [--runs 3]

The store is made as benchmarks/commands.py makes it (offline backend, PEP 747 revisions) and
cloned; each run is a new process on the clone (no .kbuild/) that times: running the Kbuildfile,
reading the lock, reading every page once, verifying every query, and the checks on the pages
(links, grounding, orphans, notes). Medians of --runs. The whole command, beside `git status`,
is benchmarks/commands.py.
"""
from __future__ import annotations

import argparse
import json
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
store.check_store(engine, spec.application, False)
took["the rest: the lock taken in, links, grounding, orphans, notes"] = time.perf_counter() - started - took["lock"] - took["pages and verification"]
print(json.dumps(took))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=4940)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store, clone = Path(tmp) / "store", Path(tmp) / "clone"
        store.mkdir()
        facts = make_store(store, args.facts)
        subprocess.run(["git", "clone", "-q", str(store), str(clone)], check=True)
        runs = [json.loads(subprocess.run([sys.executable, "-c", STEPS], cwd=clone, check=True, capture_output=True,
                                          text=True).stdout) for _ in range(args.runs)]
    print(f"`kbuild check` on a fresh clone of {facts} facts, medians of {args.runs}:")
    for step in runs[0]:
        print(f"  {step}: {statistics.median(r[step] for r in runs):.3f} s")


if __name__ == "__main__":
    main()
