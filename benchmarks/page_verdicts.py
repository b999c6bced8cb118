"""What recording each page's link and secret verdicts (rules/pages.py) costs a cold build.

    python benchmarks/page_verdicts.py [--sources 40] [--runs 5]

A store of --sources documents of 20 sections each (benchmarks/edit_time.py's shape), built cold
with the offline backend as a whole `kbuild -q` process, with the verdicts recorded and with
`note_page` made a no-op by the Kbuildfile; the two interleaved, medians of --runs. The saving
is `kbuild check`'s: a fresh clone scans no page whose verdict the lock holds.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from edit_time import KBUILDFILE, document  # noqa: E402

WITHOUT = "\nimport kbuild.rules.pages as _pages\n_pages.note_page = lambda *args, **kwargs: None\n"


def cold_build(sources: int, record: bool) -> float:
    root = Path(tempfile.mkdtemp())
    try:
        (root / "Kbuildfile.py").write_text(KBUILDFILE + ("" if record else WITHOUT))
        (root / "kb/p").mkdir(parents=True)
        (root / "kb/p/sources.yml").write_text("sources:\n" + "".join(f"  - id: d{i}\n    path: d{i}.md\n"
                                                                      for i in range(sources)))
        for i in range(sources):
            (root / f"d{i}.md").write_text(document(20, i))
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "kbuild", "-q"], cwd=root, check=True,
                       env={**os.environ, "OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "KBUILD_MODEL": ""})
        return time.perf_counter() - started
    finally:
        shutil.rmtree(root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", type=int, default=40)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(args.runs):
        for record in (True, False):
            times[record].append(cold_build(args.sources, record))
    with_, without = statistics.median(times[True]), statistics.median(times[False])
    print(f"cold build of {args.sources} sources: {with_:.2f} s with page verdicts, {without:.2f} s without "
          f"({with_ / without:.2f}x), medians of {args.runs}")


if __name__ == "__main__":
    main()
