"""`kbuild watch` latency: from a source saved to the start of its rebuild.

    python benchmarks/watch.py [--saves 10] [--debounce 50]

Runs `kbuild -v watch` on a small store in a subprocess, saves a source --saves times (waiting
for each rebuild to finish), and prints the median time from the save to the rebuild's start,
and that time beyond the 50 ms of quiet that ends a burst of edits.
"""
from __future__ import annotations

import argparse
import queue
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from installed import use_installed_kbuild  # noqa: E402

use_installed_kbuild()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--saves", type=int, default=10)
    parser.add_argument("--debounce", type=int, default=50)
    args = parser.parse_args()
    median = measure(args.saves, args.debounce)
    print(f"save to rebuild start: median {median * 1000:.0f} ms over {args.saves} saves "
          f"({median * 1000 - args.debounce:.0f} ms beyond the {args.debounce} ms of quiet that ends a burst; "
          "--debounce caps how long a burst may run)")


def measure(saves: int, debounce: int) -> float:
    """The median seconds from a save to the start of its rebuild."""
    kbuild = [sys.executable, "-m", "kbuild"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        subprocess.run([*kbuild, "init", "."], cwd=root, check=True, capture_output=True)
        (root / "notes.md").write_text("# Notes\n\nThe shop opens at nine.\n")
        subprocess.run([*kbuild, "add", "shop", "notes.md"], cwd=root, check=True, capture_output=True)
        # SIGINT as a terminal sends it, even when this benchmark was started where it is ignored
        # (a background job of a script), which the watcher would inherit.
        watcher = subprocess.Popen([*kbuild, "-v", "watch", "--debounce", str(debounce)], cwd=root,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in watcher.stdout], daemon=True).start()  # type: ignore[union-attr]

        def wait_for(words: str) -> str:
            while True:
                line = lines.get(timeout=60)
                if words in line:
                    return line

        wait_for("watching")
        latencies = []
        for n in range(saves):
            saved = time.time()
            (root / "notes.md").write_text(f"# Notes\n\nThe shop opens at {n}.\n")
            started = float(wait_for("rebuilding after").rsplit(" at ", 1)[1])
            latencies.append(started - saved)
            wait_for("changed:")
            time.sleep(0.3)
        watcher.send_signal(signal.SIGINT)
        watcher.wait(timeout=30)
    return statistics.median(latencies)


if __name__ == "__main__":
    main()
