"""Cold-build scheduling: how close independent model calls come to the ideal, in flight at once.

    python benchmarks/scheduling.py [--chunks 1000] [--latency 0.02]

A model double sleeps a fixed latency per call (no CPU). A cold build of --chunks queries, each
making one call, is timed at 1, 4 and 16 calls in flight, against the ideal
max(critical path, calls x latency / in flight). Then, at the most calls in flight, where the
rest goes: how many calls were in flight on average once they began, when the first began, how
late a sleep ended, how long the build went on after the last call (its commit and lock),
kbuild's CPU per query, and a plain asyncio semaphore over the same sleeps (the floor of this
model double).
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from installed import use_installed_kbuild  # noqa: E402

use_installed_kbuild()

from kbuild.engine import Engine, rule  # noqa: E402

LATENCY = [0.02]
CALLS: list[tuple[float, float]] = []  # (start, end) of each call to the model double
BUILD_ENDED = [0.0]  # when the last measured build returned


@rule
async def chunk(ctx, n):
    async def model():
        started = time.perf_counter()
        await asyncio.sleep(LATENCY[0])
        CALLS.append((started, time.perf_counter()))
        return {"text": f"answer {n}"}

    return (await ctx.call({"prompt": n}, model))["text"]


@rule
async def everything(ctx, count):
    return len(await ctx.query_all([chunk(n) for n in range(count)]))


def measure(chunks: int, latency: float, in_flight: int, memory: bool = False) -> tuple[float, float]:
    """(wall time, ideal time) of a cold build of `chunks` calls, `in_flight` at once. With
    `memory`, the store and its call cache are on tmpfs: the scheduler without the disk (on these
    machines creating a cache file costs from 0.03 to 0.5 ms, as other work loads the disk)."""
    LATENCY[0] = latency
    with tempfile.TemporaryDirectory(dir="/dev/shm" if memory and Path("/dev/shm").is_dir() else None) as tmp:
        engine = Engine(tmp, [chunk, everything], max_calls=in_flight)
        t0 = time.perf_counter()
        report = engine.build([everything(chunks)])
        BUILD_ENDED[0] = time.perf_counter()
        took = BUILD_ENDED[0] - t0
        assert report.ok and report.calls == chunks
    return took, max(latency, chunks * latency / in_flight)


def breakdown(chunks: int, latency: float, in_flight: int, memory: bool = True) -> dict[str, float]:
    """Where a cold build's time goes beyond the ideal (store on tmpfs unless `memory` is False,
    so the disk is out of it)."""
    CALLS.clear()
    cpu = time.process_time()
    started = time.perf_counter()
    took, ideal = measure(chunks, latency, in_flight, memory=memory)
    cpu = time.process_time() - cpu
    begins, ends = sorted(s for s, _ in CALLS), sorted(e for _, e in CALLS)
    span = ends[-1] - begins[0]
    busy = sum(e - s for s, e in CALLS)
    return {"took": took, "ideal": ideal, "in_flight": busy / span, "first_call_s": begins[0] - started,
            "end_after_last_call_s": BUILD_ENDED[0] - ends[-1],
            "late_ms": 1000 * (busy / len(CALLS) - latency), "cpu_ms_per_query": 1000 * cpu / chunks,
            "plain_asyncio": ideal / plain_asyncio(chunks, latency, in_flight)}


def plain_asyncio(calls: int, latency: float, in_flight: int) -> float:
    """The wall time of the same sleeps under an asyncio semaphore, with no build around them."""
    async def run() -> float:
        limit = asyncio.Semaphore(in_flight)

        async def one() -> None:
            async with limit:
                await asyncio.sleep(latency)

        t0 = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(calls)))
        return time.perf_counter() - t0

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.02)
    args = parser.parse_args()
    print(f"{args.chunks} calls of {args.latency * 1000:.0f} ms")
    for in_flight in (1, 4, 16):
        for memory in (False, True):
            took, ideal = measure(args.chunks, args.latency, in_flight, memory)
            print(f"  {in_flight:>2} in flight, store on {'tmpfs' if memory else 'disk '}: {took:.2f} s, "
                  f"ideal {ideal:.2f} s, {100 * ideal / took:.0f}% of ideal")
    b = breakdown(args.chunks, args.latency, 16)
    print(f"at 16 in flight (tmpfs): {100 * b['ideal'] / b['took']:.0f}% of ideal; {b['in_flight']:.1f} calls in "
          f"flight on average once they began; the first began {1000 * b['first_call_s']:.0f} ms in; the build ended "
          f"{1000 * b['end_after_last_call_s']:.0f} ms after the last call; a call ended "
          f"{b['late_ms']:.1f} ms late on average; {b['cpu_ms_per_query']:.2f} ms of CPU a query; a plain asyncio "
          f"semaphore over the same sleeps: {100 * b['plain_asyncio']:.0f}% of ideal")
    tails = [1000 * breakdown(args.chunks, args.latency, 16, memory=False)["end_after_last_call_s"] for _ in range(3)]
    print(f"at 16 in flight (disk): the build ended {statistics.median(tails):.0f} ms after the last call "
          f"(median of 3)")


if __name__ == "__main__":
    main()
