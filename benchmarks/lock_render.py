"""How long writing a whole lock takes (the end of every cold build, and of a build after a pull),
and making the state's rows of the same memos (each saved memo makes one).

    python benchmarks/lock_render.py [--entries 35000] [--reads 6] [--runs 5] [--against PYTHON]

The entries are made up with the shape of a 5,000-fact store's (35,515 entries, 6.2 reads each):
a query id, a key, a fingerprint and hash, one output, a note on one entry in three, and
--reads reads. Each run is a fresh process that renders the lock of these entries once; what is
printed is the median of --runs. With --against, another install's kbuild renders the same
entries, its runs interleaved with this one's, so both see the same machine, and the two locks'
bytes are compared.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path


CHILD = r"""
import hashlib, sys, time
entries, reads = int(sys.argv[1]), int(sys.argv[2])
from kbuild.engine.lockfile import render_lock
from kbuild.engine.state import FileRead, Memo
memos = {}
for n in range(entries):
    qid = f'fact("p", "d{n // 7}", "section {n} \u2014 limits")'
    deps = [[(FileRead.of(f"d{n // 7}.md"), f"{n:032x}")], [(f'chunk("p", {n}, {k})', f"{n + k:032x}") for k in range(reads - 1)]]
    memos[qid] = Memo(qid, "fact", ["p", f"d{n // 7}", n], "f" * 32, deps, f"{n:032x}",
                      {f"kb/p/facts/{n}.md": f"{n:032x}"}, {"kind": "fact"} if n % 3 == 0 else {}, {})
started = time.perf_counter()
data = render_lock(memos)
rendered = time.perf_counter()
rows = [m.to_row() for m in memos.values()]
print(rendered - started, time.perf_counter() - rendered, len(data), hashlib.sha256(data).hexdigest())
"""


def render_time(python: str, entries: int, reads: int) -> tuple[float, float, int, str]:
    """(seconds rendering the lock, seconds making the rows, its size, hash of its bytes) in a
    fresh process of `python`."""
    done = subprocess.run([python, "-c", CHILD, str(entries), str(reads)], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parent)  # not the checkout: the install's kbuild
    if done.returncode != 0:
        raise SystemExit(f"{python} could not render a lock: {done.stderr.strip().splitlines()[-1:]}")
    lock, rows, size, digest = done.stdout.split()
    return float(lock), float(rows), int(size), digest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=35_000)
    parser.add_argument("--reads", type=int, default=6)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--against", metavar="PYTHON", help="also time the kbuild of this Python, interleaved")
    args = parser.parse_args()
    pythons = [sys.executable, *([args.against] if args.against else [])]
    times: dict[str, list[float]] = {p: [] for p in pythons}
    row_times: dict[str, list[float]] = {p: [] for p in pythons}
    sizes: dict[str, int] = {}
    digests: set[str] = set()
    for _ in range(args.runs):
        for python in pythons:
            seconds, rows, sizes[python], digest = render_time(python, args.entries, args.reads)
            times[python].append(seconds)
            row_times[python].append(rows)
            digests.add(digest)
    for python in pythons:
        who = f" ({python})" if args.against else ""
        print(f"a lock of {args.entries:,} entries ({sizes[python] / 1e6:.1f} MB){who}: "
              f"{statistics.median(times[python]):.3f} s, its state rows {statistics.median(row_times[python]):.3f} s "
              f"(medians of {args.runs})")
    if args.against:  # a faster render that wrote other bytes would show in every store's git diff
        print("the same bytes" if len(digests) == 1 else "the locks differ")


if __name__ == "__main__":
    main()
