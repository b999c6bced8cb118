"""Where one machine stops: the engine's time, memory, state and lock against the graph's size.

    python benchmarks/scale.py                          # 10k, 100k and 1M queries, both lock layouts
    python benchmarks/scale.py --sizes 10000 100000 300000 --layouts split

A store-shaped graph built by the engine alone (the rules are trivial, so every figure is
kbuild's own): each source file is read by one query, cut into CHUNKS chunks; each fact reads
two neighbouring chunks (fan-in 2); a per-source summary reads the source's facts; a per-project
index reads PER_PROJECT summaries; one root reads the indexes. That is 2 + CHUNKS + FACTS
queries a source, so N queries are N / (2 + CHUNKS + FACTS) sources.

Every measurement is its own process, so its peak RSS (VmHWM) is its own: the cold build,
a no-op build, a build after one source changed, and on a fresh clone (the lock and the files,
no .kbuild/) the reading of the lock alone and the whole `kbuild status` path (engine.inspect).
Sizes: state.db, the lock's files (kbuild.lock alone, or beside a file per project in
kbuild.lock.d/ with `--layouts split`), the largest of them compressed by zlib at git's default
level (what a git object of it weighs), and the bytes of lock files a one-source edit rewrote. Times are wall clock on whatever else the machine is running: the load
average is printed beside them.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from installed import use_installed_kbuild  # noqa: E402
from memory import peak_rss_mb  # noqa: E402

use_installed_kbuild()

from kbuild.engine import Engine, rule  # noqa: E402

CHUNKS = 4
FACTS = 4
PER_PROJECT = 100
PER_SOURCE = 2 + CHUNKS + FACTS


def project_of(i: int) -> str:
    """Each query's key starts with its project, as the knowledge base's do: the shard of a split lock."""
    return f"p{i // PER_PROJECT}"


@rule
async def source(ctx, p, i):
    return ctx.read_text(f"src/{i // 1000}/{i}.txt")


@rule
async def chunk(ctx, p, i, k):
    text = await ctx.query(source(p, i))
    return f"{k}:{text[:30]}"


@rule
async def fact(ctx, p, i, k):
    pair = await ctx.query_all([chunk(p, i, k), chunk(p, i, (k + 1) % CHUNKS)])
    return f"fact {k} of {i}: {len(''.join(pair))}"


@rule
async def summary(ctx, p, i):
    return "|".join(await ctx.query_all([fact(p, i, k) for k in range(FACTS)]))[:60]


@rule
async def project(ctx, p, count):
    n = int(p[1:])
    members = range(n * PER_PROJECT, min(count, (n + 1) * PER_PROJECT))
    return len("".join(await ctx.query_all([summary(p, i) for i in members])))


@rule
async def everything(ctx, count):
    projects = (count + PER_PROJECT - 1) // PER_PROJECT
    return sum(await ctx.query_all([project(f"p{n}", count) for n in range(projects)]))


RULES = [source, chunk, fact, summary, project, everything]


def sources_for(queries: int) -> int:
    return max(1, queries // PER_SOURCE)


def write_sources(top: Path, which: range | list[int], tag: str) -> None:
    for i in which:
        path = top / "src" / str(i // 1000) / f"{i}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"source {i} {tag}\n")


def child_build(top: Path, count: int, split: int) -> None:
    t0 = time.perf_counter()
    report = Engine(top, RULES, split_lock=bool(split)).build([everything(count)])
    seconds = time.perf_counter() - t0
    assert report.ok, list(report.failed.items())[:3]
    print(json.dumps({"s": seconds, "rss_mb": peak_rss_mb(), "ran": len(report.executed)}))


def child_read_lock(top: Path, split: int) -> None:
    t0 = time.perf_counter()
    count = sum(len(memos) for _, memos in Engine(top, RULES, split_lock=bool(split)).lock.read())
    print(json.dumps({"s": time.perf_counter() - t0, "rss_mb": peak_rss_mb(), "ran": count}))


def child_status(top: Path, split: int) -> None:
    t0 = time.perf_counter()
    inspection = Engine(top, RULES, split_lock=bool(split)).inspect()
    assert not inspection.stale, "a fresh clone of an up-to-date store should have nothing stale"
    print(json.dumps({"s": time.perf_counter() - t0, "rss_mb": peak_rss_mb(), "ran": len(inspection.memos)}))


CHILDREN = {"--build": child_build, "--read-lock": child_read_lock, "--status": child_status}


def run_child(kind: str, top: Path, *args: object) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, kind, str(top), *map(str, args)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def lock_files(top: Path) -> list[Path]:
    return [top / "kbuild.lock", *sorted((top / "kbuild.lock.d").glob("*.lock"))]


def measure(queries: int, split: bool) -> dict[str, float]:
    count, flag = sources_for(queries), int(split)
    with tempfile.TemporaryDirectory() as tmp:
        top = Path(tmp) / "store"
        write_sources(top, range(count), "v0")
        load = os.getloadavg()[0]
        cold = run_child("--build", top, count, flag)
        time.sleep(2.1)  # past the stat cache's racy window, as files are in life
        run_child("--build", top, count, flag)  # settles the stat cache
        noop = run_child("--build", top, count, flag)
        assert noop["ran"] == 0, "the no-op build ran something"
        before = {f: f.read_bytes() for f in lock_files(top)}
        write_sources(top, [count // 2], "v1")
        edit = run_child("--build", top, count, flag)
        locks = {f: f.read_bytes() for f in lock_files(top)}
        rewritten = sum(len(data) for f, data in locks.items() if before.get(f) != data)
        largest = max(locks.values(), key=len)
        state_mb = sum(p.stat().st_size for p in (top / ".kbuild").glob("state.db*")) / 1e6
        # a fresh clone: the committed files, no local state
        clone = Path(tmp) / "clone"
        shutil.copytree(top, clone, ignore=shutil.ignore_patterns(".kbuild"))
        read = run_child("--read-lock", clone, flag)
        status = run_child("--status", clone, flag)
    actual = 1 + (count + PER_PROJECT - 1) // PER_PROJECT + count * PER_SOURCE
    assert read["ran"] == status["ran"] == actual, "the fresh clone did not see the whole graph in the lock"
    return {"queries": actual, "sources": count, "load": load, "cold_s": cold["s"], "cold_rss": cold["rss_mb"],
            "noop_s": noop["s"], "noop_rss": noop["rss_mb"], "edit_s": edit["s"], "edit_ran": edit["ran"],
            "edit_rss": edit["rss_mb"], "state_mb": state_mb, "files": len(locks),
            "lock_mb": sum(map(len, locks.values())) / 1e6, "largest_mb": len(largest) / 1e6,
            "largest_gz_mb": len(zlib.compress(largest, 6)) / 1e6, "rewritten_mb": rewritten / 1e6,
            "read_s": read["s"], "read_rss": read["rss_mb"], "status_s": status["s"], "status_rss": status["rss_mb"]}


COLUMNS = [("queries", "queries", "{:>9}"), ("load", "load", "{:>4.1f}"), ("cold_s", "cold s", "{:>7.1f}"),
           ("cold_rss", "cold RSS MB", "{:>11.0f}"), ("noop_s", "no-op s", "{:>7.2f}"),
           ("noop_rss", "no-op RSS MB", "{:>12.0f}"), ("edit_s", "1-edit s", "{:>8.2f}"),
           ("edit_ran", "ran", "{:>4}"), ("edit_rss", "1-edit RSS MB", "{:>13.0f}"),
           ("rewritten_mb", "1-edit lock written MB", "{:>22.2f}"),
           ("state_mb", "state.db MB", "{:>11.1f}"), ("files", "lock files", "{:>10}"),
           ("lock_mb", "lock MB", "{:>7.1f}"), ("largest_mb", "largest file MB", "{:>15.2f}"),
           ("largest_gz_mb", "largest in git (zlib) MB", "{:>24.2f}"), ("read_s", "read lock s", "{:>11.2f}"),
           ("read_rss", "read lock RSS MB", "{:>16.0f}"), ("status_s", "clone status s", "{:>14.2f}"),
           ("status_rss", "clone status RSS MB", "{:>19.0f}")]


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in CHILDREN:
        CHILDREN[sys.argv[1]](Path(sys.argv[2]), *map(int, sys.argv[3:]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000],
                        help="graph sizes in queries")
    parser.add_argument("--layouts", nargs="+", choices=["one", "split"], default=["one", "split"],
                        help="the lock as one file (kbuild.lock), split per project (kbuild.lock.d/), or both")
    parser.add_argument("--json", action="store_true", help="also print each row as JSON")
    args = parser.parse_args()
    columns = [("layout", "layout", "{:>6}"), *COLUMNS]
    widths = [max(len(title), len(fmt.format(0))) for _, title, fmt in columns]
    print(" | ".join(title.rjust(w) for (_, title, _), w in zip(columns, widths)), flush=True)
    for size, layout in ((size, layout) for size in args.sizes for layout in args.layouts):
        row = {"layout": layout, **measure(size, layout == "split")}
        print(" | ".join(fmt.format(row[key]).rjust(w) for (key, _, fmt), w in zip(columns, widths)), flush=True)
        if args.json:
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
