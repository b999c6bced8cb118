"""After `git pull`: the cost of a build when 1% of the inputs changed, against the store's size.

    python benchmarks/pull.py [--queries 1000 10000 100000]

The synthetic graph of noop.py (10% of the queries read a file). After a cold build, 1% of the
input files change; a build in a fresh process then runs what they reach. Prints the build's
wall time (kbuild's own time: the rules are trivial), the queries it ran, and the time per
changed input. Growth with the store's size, at a fixed share of changes, is what a build that
walks the whole recorded graph costs; a build that walked only from the changed inputs would grow
with the changes alone.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import noop  # noqa: E402


def child(root: Path, queries: int, inputs: int) -> None:
    targets = noop.shape(queries, inputs)
    t0 = time.perf_counter()
    report = noop.Engine(root, [noop.leaf, noop.inner]).build(targets)
    print(json.dumps({"build_s": time.perf_counter() - t0, "ran": len(report.executed)}))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, nargs="*", default=[1000, 10000, 100000])
    args = parser.parse_args()
    print(f"{'queries':>8} {'changed files':>13} {'build s':>8} {'queries ran':>11} {'ms per changed file':>19}")
    for queries in args.queries:
        inputs = queries // 10
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            noop.make_inputs(root, inputs)
            subprocess.run([sys.executable, noop.__file__, "--cold", str(root), str(queries), str(inputs)], check=True,
                           capture_output=True)
            time.sleep(2.1)
            subprocess.run([sys.executable, __file__, "--child", str(root), str(queries), str(inputs)], check=True,
                           capture_output=True)  # settle the stat cache
            changed = max(1, inputs // 100)
            for i in range(0, inputs, inputs // changed)[:changed]:
                (root / "in" / str(i // 1000) / f"{i}.txt").write_text(f"input {i} changed upstream\n")
            out = subprocess.run([sys.executable, __file__, "--child", str(root), str(queries), str(inputs)], check=True,
                                 capture_output=True, text=True).stdout
            result = json.loads(out)
            print(f"{queries:>8} {changed:>13} {result['build_s']:>8.3f} {result['ran']:>11} "
                  f"{1000 * result['build_s'] / changed:>19.1f}", flush=True)


if __name__ == "__main__":
    main()
