"""After `git pull`: the cost of a build that takes in a few changed sources, against the store's size.

    python benchmarks/pull.py                      # the curve: store size x changed sources
    python benchmarks/pull.py --pages 10000 --changed 10 --profile /tmp/pull.prof

A store-shaped graph, as a knowledge base has: each source is read by one query, cut into 8
chunks, summarised; every 100 sources have an index and one root reads the indexes (10 queries a
source). After a cold build, some source files change; a build in a fresh process then takes
them in. The rules are trivial, so the build's time is kbuild's own. Medians of --runs builds;
each run changes the files again. Beside it, a no-op build of the same store: a stat of every
file, the floor any build pays, as `git status` does.
"""
from __future__ import annotations

import argparse
import cProfile
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from installed import use_installed_kbuild  # noqa: E402

use_installed_kbuild()

from kbuild.engine import Engine, rule  # noqa: E402

CHUNKS = 8
PER_INDEX = 100


@rule
async def source(ctx, i):
    return ctx.read_text(f"src/{i // 1000}/{i}.txt")


@rule
async def chunk(ctx, i, k):
    text = await ctx.query(source(i))
    return f"{k}:{len(text)}:{text[:20]}"


@rule
async def summary(ctx, i):
    return "|".join(await ctx.query_all([chunk(i, k) for k in range(CHUNKS)]))[:40]


@rule
async def index(ctx, b, count):
    return len("".join(await ctx.query_all([summary(i) for i in range(b * PER_INDEX, min(count, (b + 1) * PER_INDEX))])))


@rule
async def root(ctx, count):
    return sum(await ctx.query_all([index(b, count) for b in range((count + PER_INDEX - 1) // PER_INDEX)]))


RULES = [source, chunk, summary, index, root]


def sources_for(pages: int) -> int:
    return max(1, pages // (CHUNKS + 2))


def write_sources(top: Path, count: int, tag: str, which: range | list[int]) -> None:
    for i in which:
        path = top / "src" / str(i // 1000) / f"{i}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"source {i} {tag}\n")


def child(top: Path, count: int, profile: str | None) -> None:
    engine = Engine(top, RULES)
    profiler = cProfile.Profile() if profile else None
    t0 = time.perf_counter()
    if profiler:
        profiler.enable()
    report = engine.build([root(count)])
    if profiler:
        profiler.disable()
        profiler.dump_stats(profile)
    assert report.ok, list(report.failed.items())[:3]
    print(json.dumps({"build_s": time.perf_counter() - t0, "ran": len(report.executed)}))


def measure(pages: int, changed: int, runs: int, profile: str | None = None) -> dict[str, float]:
    count = sources_for(pages)
    with tempfile.TemporaryDirectory() as tmp:
        top = Path(tmp)
        write_sources(top, count, "v0", range(count))
        run = [sys.executable, __file__, "--child", str(top), str(count)]
        subprocess.run(run, check=True, capture_output=True)  # the cold build
        time.sleep(2.1)  # past the stat cache's racy window
        subprocess.run(run, check=True, capture_output=True)  # settles the stat cache
        noops = [json.loads(subprocess.run(run, check=True, capture_output=True, text=True).stdout)["build_s"]
                 for _ in range(runs)]
        step = max(1, count // changed)
        samples = []
        for n in range(runs):
            write_sources(top, count, f"v{n + 1}", list(range(0, count, step))[:changed])
            out = subprocess.run(run + ([profile] if profile else []), check=True, capture_output=True, text=True)
            samples.append(json.loads(out.stdout))
        lock_mb = (top / "kbuild.lock").stat().st_size / 1e6
    return {"lock_mb": lock_mb, "pages": count * (CHUNKS + 2), "changed": changed,
            "build_s": statistics.median(s["build_s"] for s in samples), "noop_s": statistics.median(noops),
            "ran": statistics.median(s["ran"] for s in samples)}


CURVE = [(1_000, 10), (10_000, 10), (100_000, 10), (10_000, 1), (10_000, 100)]


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else None)
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, help="one store size (default: the whole curve)")
    parser.add_argument("--changed", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile", help="write a cProfile of the (last) changed build here")
    args = parser.parse_args()
    points = [(args.pages, args.changed)] if args.pages else CURVE
    print(f"{'pages':>8} {'changed sources':>15} {'queries ran':>11} {'build s':>8} {'no-op s':>8} "
          f"{'beyond the no-op, ms per changed source':>40} {'lock MB':>8}")
    for pages, changed in points:
        r = measure(pages, changed, args.runs, args.profile)
        print(f"{r['pages']:>8} {changed:>15} {r['ran']:>11.0f} {r['build_s']:>8.3f} {r['noop_s']:>8.3f} "
              f"{1000 * (r['build_s'] - r['noop_s']) / changed:>40.1f} {r['lock_mb']:>8.1f}", flush=True)


if __name__ == "__main__":
    main()
