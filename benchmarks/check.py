"""`kbuild check` on a store of about 10,000 facts, against `git status` on the same tree.

    python benchmarks/check.py [--facts 10000] [--runs 3]

Builds (offline backend) a store from sources of generated prose cut into small facts, writes
kbuild.checked (`kbuild check --record`), commits it all to a git repository, then times, in one
run, medians of --runs, interleaved: the whole `kbuild check --full` in a fresh process (no
.kbuild/, as on a CI clone), `kbuild check` as the record answers it, `git status --porcelain`,
and the first `git status` in a fresh clone of the store, which reads every file that the
checkout wrote within its index's own second (racily clean, to git), as a CI runner's does.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Installed kbuild runs from compiled bytecode (pip compiles it at install); this machine's
# environment turns bytecode caching off, which would add about a second of compiling to every
# fresh process measured here.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

WORDS = ("ledger account balance transfer clearing settlement batch window audit record export report merchant "
         "refund payout reserve currency rate fee invoice schedule retry limit").split()


def run(cmd: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if result.returncode not in (0,):
        raise SystemExit(f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--facts", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    r = measure(args.facts, args.runs)
    print(f"{r['facts']} facts, {r['queries']} queries, {r['files']} files; cold build {r['cold_s']:.1f} s; kbuild check --full "
          f"{r['check_s']:.2f} s (fresh process, no .kbuild/); kbuild check with kbuild.checked {r['recorded_s']:.3f} s; "
          f"git status {r['git_s']:.3f} s; ratios {r['check_s'] / r['git_s']:.0f}x and {r['recorded_s'] / r['git_s']:.1f}x; "
          f"the first git status in a fresh clone {r['first_git_s']:.3f} s (median of {args.runs})")


def measure(wanted_facts: int, runs: int) -> dict[str, float]:
    rng = random.Random(3)
    kbuild = [sys.executable, "-m", "kbuild"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        run([*kbuild, "init", "."], root)
        kbuildfile = root / "Kbuildfile.py"
        kbuildfile.write_text(kbuildfile.read_text().replace("floor_tokens=2000, cap_tokens=4000",
                                                             "floor_tokens=30, cap_tokens=60"))
        sources = 20
        for n in range(sources):
            paragraphs = []
            for p in range(wanted_facts // sources):
                sentence = " ".join(rng.choice(WORDS) for _ in range(14)).capitalize() + "."
                paragraphs.append((f"## Part {p}\n\n" if p % 25 == 0 else "") + sentence + " " + sentence.lower())
            (root / f"doc{n}.md").write_text(f"# Document {n}\n\n" + "\n\n".join(paragraphs) + "\n")
            run([*kbuild, "add", "bench", f"doc{n}.md"], root)
        t0 = time.perf_counter()
        run([*kbuild], root)
        cold = time.perf_counter() - t0
        facts = sum(1 for p in (root / "kb").rglob("*.md") if p.read_text().startswith("Source: "))
        queries = len(json.loads((root / "kbuild.lock").read_bytes())["queries"])
        run([*kbuild, "check", "--record"], root)
        for cmd in (["git", "init", "-q"], ["git", "add", "-A"],
                    ["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "store"]):
            subprocess.run(cmd, cwd=root, check=True)
        shutil.rmtree(root / ".kbuild")
        said = subprocess.run([*kbuild, "doctor"], cwd=root, capture_output=True, text=True).stdout
        if "kbuild.checked is of these files" not in said:  # else both figures would be of the whole check
            raise SystemExit(f"kbuild.checked does not hold in the store measured:\n{said}")
        run(["git", "status", "--porcelain"], root)  # warm the page cache for both alike
        checks, recorded, gits, firsts = [], [], [], []
        for n in range(runs):
            checks.append(run([*kbuild, "check", "--full"], root))
            recorded.append(run([*kbuild, "check"], root))
            gits.append(run(["git", "status", "--porcelain"], root))
            with tempfile.TemporaryDirectory() as other:  # outside the store's work tree
                clone = Path(other) / "clone"
                subprocess.run(["git", "clone", "-q", str(root), str(clone)], check=True)
                firsts.append(run(["git", "status", "--porcelain"], clone))
        files = sum(1 for p in root.rglob("*") if p.is_file() and ".git/" not in p.as_posix())
        return {"facts": facts, "queries": queries, "files": files, "cold_s": cold, "check_s": statistics.median(checks),
                "recorded_s": statistics.median(recorded), "first_git_s": statistics.median(firsts), "git_s": statistics.median(gits)}


if __name__ == "__main__":
    main()
