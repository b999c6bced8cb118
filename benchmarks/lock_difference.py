"""Finding what a pull's lock changed of the lock it replaces, as the build after a pull does:
`lockfile.entries_that_differ` (both sorted locks walked side by side, a stretch compared as
bytes at a time) against splitting both into their entries (`lockfile.lock_entries`) and
comparing them one by one, which the build did before.

    python benchmarks/lock_difference.py [--entries 35000] [--changed 20] [--runs 7]

The locks are rendered by kbuild from memos shaped like a store's (a rule, a key, a
fingerprint, outputs and a dozen reads each, about 800 bytes an entry, as the 4,132-fact store
of benchmarks/commands.py has), the second with --changed entries' hashes changed, spread
over the lock. Medians of --runs, the two interleaved; the script stops if they disagree.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from installed import use_installed_kbuild  # noqa: E402

use_installed_kbuild()

from kbuild.engine.lockfile import entries_that_differ, lock_entries, render_lock  # noqa: E402
from kbuild.engine.state import Memo  # noqa: E402


def memo(n: int, version: int) -> Memo:
    qid = f'fact("p","doc-{n // 20}","part-{n}")'
    reads = [[[f'chunk("p","doc-{n // 20}","part-{n}")', f"{n:032x}"]],
             [[f"rewrite-{n}-{r}", f"{n * 31 + r + version:032x}"] for r in range(11)]]
    return Memo(qid, "fact", ["p", f"doc-{n // 20}", f"part-{n}"], "f" * 32, reads, f"{n + version:032x}",
                {f"kb/p/facts/doc-{n // 20}/part-{n}.md": f"{n:032x}"}, {}, {})


def by_splitting(old: bytes, new: bytes) -> tuple[dict[str, bytes], set[str]]:
    was, now = lock_entries(old), lock_entries(new)
    assert was is not None and now is not None
    return {q: e for q, e in now.items() if was.get(q) != e}, was.keys() - now.keys()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=35_000)
    parser.add_argument("--changed", type=int, default=20)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    changed = {n * args.entries // args.changed for n in range(args.changed)} if args.changed else set()
    old = render_lock({m.id: m for m in (memo(n, 0) for n in range(args.entries))})
    new = render_lock({m.id: m for m in (memo(n, 1 if n in changed else 0) for n in range(args.entries))})
    took: dict[str, list[float]] = {"walked": [], "split": []}
    for _ in range(args.runs):
        for name, find in (("walked", entries_that_differ), ("split", by_splitting)):
            started = time.perf_counter()
            found = find(old, new)
            took[name].append(time.perf_counter() - started)
            if found != by_splitting(old, new):
                sys.exit(f"{name} found other entries than splitting both locks")
    differ = len(by_splitting(old, new)[0])
    print(f"{args.entries:,} entries ({len(new) / 1e6:.1f} MB), {differ} differ: "
          f"walked {statistics.median(took['walked']) * 1000:.1f} ms, "
          f"split {statistics.median(took['split']) * 1000:.1f} ms (medians of {args.runs})")


if __name__ == "__main__":
    main()
