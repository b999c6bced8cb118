"""What a note costs the build: learning one, confirming it, forgetting it, in a store of N sources.

    python benchmarks/learning.py                 # 10 and 50 sources
    python benchmarks/learning.py --sources 200

Offline backend (no model), each step a `kbuild` process as a user runs it. For each step it
prints the queries the build after it ran and reused and its wall time: a note is one source
more, so what it costs should not grow with the store.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from installed import use_installed_kbuild  # noqa: E402

use_installed_kbuild()

DOC = """# Service {n}

Service {n} accepts card payments from customers in the euro area.

## Refunds

Refunds for service {n} SHALL be requested within {days} days of the payment.

## Reports

Service {n} sends a monthly report to the finance team.
"""
DELTA = {"schema": "kbuild.delta/1", "project": "shop", "actions": [{
    "action": "add", "note": "refund-days", "base_revision": 0, "title": "Refund payout time",
    "text": "Refunds are paid back to the card within 3 working days of the approval.",
    "provenance": {"by": "benchmark", "origin": "agent", "session": "s-1"}}]}
SUMMARY = re.compile(r"(\d+) ran, (\d+) reused")


def kbuild(root: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "kbuild", "-C", str(root), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"kbuild {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def timed_build(root: Path) -> dict[str, float]:
    start = time.perf_counter()
    out = kbuild(root)
    took = time.perf_counter() - start
    found = SUMMARY.search(out)
    assert found, out
    return {"ran": int(found.group(1)), "reused": int(found.group(2)), "build_s": took}


def measure(sources: int) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        kbuild(root, "init", str(root))
        (root / "docs").mkdir()
        for n in range(sources):
            (root / "docs" / f"service-{n}.md").write_text(DOC.format(n=n, days=30 + n))
            kbuild(root, "add", "shop", f"docs/service-{n}.md")
        kbuild(root)
        (root / "delta.json").write_text(json.dumps(DELTA))
        results = {}
        kbuild(root, "learn", "delta.json")
        results["learn"] = timed_build(root)
        kbuild(root, "confirm", "refund-days", "--by", "benchmark")
        results["confirm"] = timed_build(root)
        start = time.perf_counter()
        out = kbuild(root, "forget", "refund-days")  # builds itself
        found = SUMMARY.search(out)
        assert found, out
        results["forget"] = {"ran": int(found.group(1)), "reused": int(found.group(2)),
                             "build_s": time.perf_counter() - start}
        return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sources", type=int, nargs="*", default=[10, 50])
    args = parser.parse_args()
    print("| sources | step | queries ran | reused | wall time of the build |")
    print("|---:|---|---:|---:|---:|")
    for n in args.sources:
        for step, r in measure(n).items():
            print(f"| {n} | {step} | {r['ran']:.0f} | {r['reused']:.0f} | {r['build_s']:.2f} s |")


if __name__ == "__main__":
    main()
