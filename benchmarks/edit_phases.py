"""Where a one-sentence edit spends its time, rule by rule, in one `kbuild -q` process.

    python benchmarks/edit_phases.py [--chunks 2000] [--facts] [--runs 5] [--top 15]

The stores are benchmarks/edit_time.py's (offline backend): a document of --chunks chunks, and a
project of --facts facts. After a cold build, each run edits one sentence and times the next
build in a new process: each rule's own steps summed over its queries (the time its coroutines
run, with the value encoded and saved, other rules' steps taken out), the load of what the
edit reaches (the reach and what lies behind its gates), and the whole build. Medians of
--runs, the --top largest. benchmarks/edit_time.py times the whole process beside a smaller
store; this says which rules make the difference.
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
from installed import use_installed_kbuild  # noqa: E402

use_installed_kbuild()

from edit_time import write_store  # noqa: E402

STEPS = r"""
import collections, json, runpy, sys, time
from kbuild.engine import execute, graphload

own = collections.Counter()
nested = []  # time of the steps of rules run inside the step being timed


class Timed:
    # a rule's coroutine, each of its steps timed, less the steps of rules run within it
    def __init__(self, coro, name):
        self.coro, self.name = coro, name

    def __await__(self):
        value, error = None, None
        while True:
            started = time.perf_counter()
            nested.append(0.0)
            try:
                step = self.coro.throw(error) if error is not None else self.coro.send(value)
            except StopIteration as done:
                self._took(started)
                return done.value
            except BaseException:
                self._took(started)
                raise
            self._took(started)
            try:
                value, error = (yield step), None
            except BaseException as exc:
                value, error = None, exc

    def _took(self, started):
        inner, took = nested.pop(), time.perf_counter() - started
        own[self.name] += took - inner
        if nested:
            nested[-1] += took


run_rule = execute.Execute.run


async def timed_rule(self, qid, memo, reason, reads):
    query = self.query_for(qid)
    return await Timed(run_rule(self, qid, memo, reason, reads), f"rule {query.rule.name if query else '?'}")


load_reached = graphload.GraphLoading.load_reached


def timed_load(self, *args):
    started = time.perf_counter()
    try:
        return load_reached(self, *args)
    finally:
        own["the reach and what lies behind its gates"] += time.perf_counter() - started


execute.Execute.run = timed_rule
graphload.GraphLoading.load_reached = timed_load
sys.argv = ["kbuild", "-q"]
started = time.perf_counter()
try:
    runpy.run_module("kbuild", run_name="__main__")
except SystemExit as exc:
    if exc.code:
        raise
own["the whole build, after Python starts"] = time.perf_counter() - started
print(json.dumps(own))
"""


def measure(root: Path, runs: int) -> list[dict[str, float]]:
    subprocess.run([sys.executable, "-m", "kbuild", "-q"], cwd=root, check=True, capture_output=True)
    timed = []
    for run in range(runs):
        target = root / "d0.md"
        part = (run * 7) % 20
        text = target.read_text()
        was, now = f"The limit of part {part} is", f"The limit of part {part} was"
        target.write_text(text.replace(was, now) if was in text else text.replace(now, was))
        done = subprocess.run([sys.executable, "-c", STEPS], cwd=root, check=True, capture_output=True, text=True)
        timed.append(json.loads(done.stdout.splitlines()[-1]))
    return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, nargs="*", default=[2000])
    parser.add_argument("--facts", type=int, nargs="*", default=[])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    stores = [(f"document of {n} chunks", 1, n) for n in args.chunks]
    stores += [(f"project of {n} facts", max(1, n // 20), 20) for n in args.facts]
    for name, documents, sections in stores:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "store"
            write_store(root, documents, sections)
            timed = measure(root, args.runs)
        steps = {step for run in timed for step in run}
        medians = {step: statistics.median(run.get(step, 0.0) for run in timed) for step in steps}
        print(f"A one-sentence edit in a {name}, medians of {args.runs} ({sys.executable}):")
        print("| step | ms |")
        print("|---|---|")
        for step in sorted(medians, key=lambda s: -medians[s])[:args.top]:
            print(f"| {step} | {medians[step] * 1000:.1f} |", flush=True)


if __name__ == "__main__":
    main()
