"""What a check record written by every build would cost it, and save each fresh clone's check
(docs/design.md, decision 14: why `kbuild check --record` writes kbuild.checked, not the build).

    python benchmarks/check_record.py [--facts 100 5000] [--runs 5]

A project of --facts facts (benchmarks/edit_time.py's shape) is built cold with the offline
backend. Then, medians of --runs:
- gather: what a build would add at its end to write the record: every memo's notes (the
  pages' link and secret verdicts, the grounding verdicts) read from the local state and parsed;
- verify: what a fresh clone's check would do instead of running the Kbuildfile and reading the
  lock: read and hash every file the clean summary names (the files read and the pages written);
- edit: a one-sentence edit as a whole `kbuild -q` process, for scale.
"""
from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from installed import use_installed_kbuild  # noqa: E402

use_installed_kbuild()

import xxhash  # noqa: E402

from edit_time import kbuild, write_store  # noqa: E402


def gather(root: Path) -> float:
    """Read and parse every memo's notes from a fresh connection to the state."""
    started = time.perf_counter()
    db = sqlite3.connect(root / ".kbuild" / "state.db")
    try:
        rows = db.execute("SELECT outputs, notes FROM memo WHERE notes != '{}'").fetchall()
        found = [(json.loads(outputs), json.loads(notes)) for outputs, notes in rows]
    finally:
        db.close()
    assert found
    return time.perf_counter() - started


def verify(root: Path) -> tuple[float, int]:
    """Read and hash every file the clean summary names; (seconds, how many files)."""
    db = sqlite3.connect(root / ".kbuild" / "state.db")
    try:
        summary = json.loads(db.execute("SELECT v FROM meta WHERE k='clean'").fetchone()[0])
    finally:
        db.close()
    paths = [*summary["files"], *summary["outputs"]]
    started = time.perf_counter()
    for path in paths:
        xxhash.xxh3_128_hexdigest((root / path).read_bytes())
    return time.perf_counter() - started, len(paths)


def edit(root: Path, run: int) -> float:
    target = root / "d0.md"
    part = run % 20
    text = target.read_text()
    was, now = f"The limit of part {part} is", f"The limit of part {part} was"
    target.write_text(text.replace(was, now) if was in text else text.replace(now, was))
    return kbuild(sys.executable, root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, nargs="+", default=[100, 5000])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print("| store | gather (each build) | verify (each fresh clone's check) | one-sentence edit |")
    print("|---|---|---|---|")
    for facts in args.facts:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "store"
            write_store(root, max(1, facts // 20), 20)
            kbuild(sys.executable, root)
            edits = [edit(root, run) for run in range(args.runs)]  # the state as edits leave it
            gathers = [gather(root) for _ in range(args.runs)]
            verified = [verify(root) for _ in range(args.runs)]
            files = verified[0][1]
            print(f"| project of {facts} facts | {statistics.median(gathers) * 1000:.0f} ms | "
                  f"{statistics.median(v[0] for v in verified) * 1000:.0f} ms for {files} files | "
                  f"{statistics.median(edits):.2f} s |", flush=True)


if __name__ == "__main__":
    main()
