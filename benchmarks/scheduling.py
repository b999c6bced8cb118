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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.02)
    args = parser.parse_args()
    LATENCY[0] = args.latency
    print(f"{args.chunks} calls of {args.latency * 1000:.0f} ms")
    for in_flight in (1, 4, 16):
        with tempfile.TemporaryDirectory() as tmp:
            engine = Engine(tmp, [chunk, everything], max_calls=in_flight)
            t0 = time.perf_counter()
            report = engine.build([everything(args.chunks)])
            took = time.perf_counter() - t0
            assert report.ok and report.calls == args.chunks
        ideal = max(args.latency, args.chunks * args.latency / in_flight)
        print(f"  {in_flight:>2} in flight: {took:.2f} s, ideal {ideal:.2f} s, {100 * ideal / took:.0f}% of ideal")


if __name__ == "__main__":
    main()
