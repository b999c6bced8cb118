"""How much of a build Python's cyclic collector takes: a cold build and a one-sentence edit.

    python benchmarks/collector.py [--chunks 2000] [--facts 5000]

The stores are benchmarks/edit_time.py's (offline backend): a document of --chunks chunks, a
project of --facts facts. Each build is `kbuild -q` run inside a process of its own, timed
around the command with every collection timed by `gc.callbacks`; what it prints is the build's
wall time, the time in collections, and the full (generation 2) collections among them.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from edit_time import write_store  # noqa: E402
from installed import use_installed_kbuild  # noqa: E402


def child(root: str) -> None:
    """One `kbuild -q` in this process; its times as JSON."""
    use_installed_kbuild()
    from kbuild.cli import main

    spent = {0: 0.0, 1: 0.0, 2: 0.0}
    full = [0]
    started = [0.0]

    def timed(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            spent[info["generation"]] += time.perf_counter() - started[0]
            full[0] += info["generation"] == 2

    gc.callbacks.append(timed)
    t0 = time.perf_counter()
    try:
        main(["-C", root, "-q"], standalone_mode=False)
    except SystemExit as exc:
        if exc.code:
            raise
    print(json.dumps({"build_s": time.perf_counter() - t0, "gc_s": sum(spent.values()), "full": full[0],
                      "full_s": spent[2]}))


def build(root: Path) -> dict[str, float]:
    done = subprocess.run([sys.executable, __file__, "--child", str(root)], capture_output=True, text=True,
                          env={**os.environ, "OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "KBUILD_MODEL": ""})
    if done.returncode != 0:
        raise SystemExit(f"kbuild failed in {root}: {done.stdout}{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


def measure(documents: int, sections: int) -> tuple[dict[str, float], dict[str, float]]:
    """(cold build, one-sentence edit) of a store of `documents` documents of `sections`."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_store(root, documents, sections)
        cold = build(root)
        target = root / "d0.md"
        part = sections // 2
        target.write_text(target.read_text().replace(f"The limit of part {part} is", f"The limit of part {part} was"))
        return cold, build(root)


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        return child(sys.argv[2])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, nargs="*", default=[2000])
    parser.add_argument("--facts", type=int, nargs="*", default=[5000])
    args = parser.parse_args()
    stores = [(f"document of {n} chunks", 1, n) for n in args.chunks]
    stores += [(f"project of {n} facts", max(1, n // 20), 20) for n in args.facts]
    print("| store | build | wall | in collections | full collections |")
    print("|---|---|---|---|---|")
    for name, documents, sections in stores:
        for what, r in zip(("cold", "one-sentence edit"), measure(documents, sections)):
            print(f"| {name} | {what} | {r['build_s']:.2f} s | {r['gc_s']:.2f} s | {r['full']:.0f}, "
                  f"{r['full_s']:.2f} s |", flush=True)


if __name__ == "__main__":
    main()
