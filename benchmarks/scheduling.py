"""Cold-build scheduling: how close independent model calls come to the ideal, in flight at once.

    python benchmarks/scheduling.py [--chunks 1000] [--latency 0.02]

A model double sleeps a fixed latency per call (no CPU). A cold build of --chunks queries, each
making one call, is timed at 1, 4 and 16 calls in flight, against the ideal
max(critical path, calls x latency / in flight).
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kbuild.engine import Engine, rule  # noqa: E402

LATENCY = [0.02]


@rule
async def chunk(ctx, n):
    async def model():
        await asyncio.sleep(LATENCY[0])
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
        took = time.perf_counter() - t0
        assert report.ok and report.calls == chunks
    return took, max(latency, chunks * latency / in_flight)


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


if __name__ == "__main__":
    main()
