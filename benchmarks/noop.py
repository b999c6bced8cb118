"""No-op build cost: `kbuild` when nothing changed, over synthetic graphs.

    python benchmarks/noop.py                 # 1k, 10k and 100k queries (10% of them read a file)
    python benchmarks/noop.py --queries 100000 --runs 5

For each size it builds the graph once (cold), then times no-op builds, each in a fresh process
(so nothing is warm in memory but the OS page cache, as after `git pull`), and prints the median
wall time of the build call, the time to load the recorded graph, the whole process's wall time
(Python start-up and imports included) and its peak RSS.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from installed import use_installed_kbuild  # noqa: E402
from memory import peak_rss_mb  # noqa: E402

use_installed_kbuild()

from kbuild.engine import Engine, rule  # noqa: E402

FANIN = 3


@rule
async def leaf(ctx, i):
    return len(ctx.read(f"in/{i // 1000}/{i}.txt"))


@rule
async def inner(ctx, j, reads):
    values = await ctx.query_all([leaf(-1 - r) if r < 0 else inner(*SHAPE[r]) for r in reads])
    return sum(values) % 1000


SHAPE: dict[int, tuple[int, tuple[int, ...]]] = {}


def shape(queries: int, inputs: int) -> list:
    """`inputs` leaves reading one file each; the rest read FANIN earlier queries at random
    (a leaf is named by a negative number, -1 - i, in an inner query's key)."""
    rng = random.Random(1)
    SHAPE.clear()
    targets = [leaf(i) for i in range(inputs)]
    for j in range(inputs, queries):
        reads = tuple(
            -1 - rng.randrange(inputs) if rng.random() < 0.5 or j == inputs else rng.randrange(inputs, j)
            for _ in range(FANIN)
        )
        SHAPE[j] = (j, reads)
        targets.append(inner(j, reads))
    return targets


def make_inputs(root: Path, inputs: int) -> None:
    for i in range(inputs):
        path = root / "in" / str(i // 1000) / f"{i}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"input {i}\n")


def child(root: Path, queries: int, inputs: int) -> None:
    """One no-op build in this process; print its measurements as JSON."""
    started = time.perf_counter()
    targets = shape(queries, inputs)
    engine = Engine(root, [leaf, inner])
    t0 = time.perf_counter()
    report = engine.build(targets)
    build = time.perf_counter() - t0
    assert report.executed == [], "the no-op build ran something"
    rss_mb = peak_rss_mb()
    print(json.dumps({"build_s": build, "rss_mb": rss_mb, "in_process_s": time.perf_counter() - started}))


def load_child(root: Path) -> None:
    """Load the whole recorded graph, as a build does when something changed."""
    from kbuild.engine.build import Build
    from kbuild.engine.state import State

    engine = Engine(root, [leaf, inner])
    t0 = time.perf_counter()
    build = Build(engine, State(root / ".kbuild" / "state.db"), False, None)
    build.graph.load_graph()
    print(json.dumps({"load_s": time.perf_counter() - t0, "memos": len(build.db.memos)}))


def run_size(queries: int, runs: int) -> dict[str, float]:
    inputs = max(1, queries // 10)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_inputs(root, inputs)
        t0 = time.perf_counter()
        cold = subprocess.run([sys.executable, __file__, "--cold", str(root), str(queries), str(inputs)],
                              check=True, capture_output=True, text=True)
        cold_s = time.perf_counter() - t0
        cold_rss_mb = json.loads(cold.stdout)["rss_mb"]
        time.sleep(2.1)  # let the files age past the stat cache's racy window, as they would in life
        subprocess.run([sys.executable, __file__, "--child", str(root), str(queries), str(inputs)],
                       check=True, capture_output=True)  # records the stat cache
        samples = []
        for _ in range(runs):
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, __file__, "--child", str(root), str(queries), str(inputs)],
                                 check=True, capture_output=True, text=True)
            sample = json.loads(out.stdout)
            sample["process_s"] = time.perf_counter() - t0
            samples.append(sample)
        loads = [json.loads(subprocess.run([sys.executable, __file__, "--load", str(root), "0", "0"], check=True,
                                           capture_output=True, text=True).stdout)["load_s"] for _ in range(runs)]
        git_s = time_git_status(root, runs)
    result = {k: statistics.median(s[k] for s in samples) for k in samples[0]}
    result.update(queries=queries, inputs=inputs, cold_s=cold_s, cold_rss_mb=cold_rss_mb, git_status_s=git_s,
                  load_s=statistics.median(loads))
    return result


def time_git_status(root: Path, runs: int) -> float:
    """`git status` on the same tree (inputs, lock, state), the anchor the no-op is compared to."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@b"}
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "x"], cwd=root, check=True, env=env)
    subprocess.run(["git", "status", "--porcelain"], cwd=root, check=True, capture_output=True)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(["git", "status", "--porcelain"], cwd=root, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in ("--child", "--cold", "--load"):
        root, queries, inputs = Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
        if sys.argv[1] == "--load":
            load_child(root)
        elif sys.argv[1] == "--cold":
            targets = shape(queries, inputs)
            report = Engine(root, [leaf, inner]).build(targets)
            assert report.ok, list(report.failed.items())[:3]
            print(json.dumps({"rss_mb": peak_rss_mb()}))
        else:
            child(root, queries, inputs)
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, nargs="*", default=[1000, 10000, 100000])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"{'queries':>8} {'inputs':>7} {'cold s':>7} {'no-op s':>8} {'graph load s':>12} {'process s':>9} "
          f"{'git status s':>12} {'no-op/git':>9} {'no-op RSS MB':>12} {'cold RSS MB':>11}")
    for n in args.queries:
        r = run_size(n, args.runs)
        print(f"{r['queries']:>8} {r['inputs']:>7} {r['cold_s']:>7.1f} {r['build_s']:>8.3f} {r['load_s']:>12.3f} "
              f"{r['process_s']:>9.3f} {r['git_status_s']:>12.3f} {r['build_s'] / r['git_status_s']:>9.1f} "
              f"{r['rss_mb']:>12.0f} {r['cold_rss_mb']:>11.0f}", flush=True)


if __name__ == "__main__":
    main()
