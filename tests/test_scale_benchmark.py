"""benchmarks/scale.py, as docs/scale.md runs it: each measurement in its own process, on a store
it really built, so a figure in the document cannot come from a build that did nothing."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_one_small_size_measures_every_column_from_real_builds():
    result = subprocess.run([sys.executable, str(REPO / "benchmarks" / "scale.py"), "--sizes", "1000", "--json"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    header, row_line, json_line = result.stdout.splitlines()
    assert header.split("|")[0].strip() == "queries"
    row = json.loads(json_line)
    # 100 sources of 10 queries each, 1 project index, the root
    assert row["queries"] == 1002 and row["sources"] == 100
    assert row_line.split("|")[0].strip() == "1002"
    # one changed source runs it, its 4 chunks and its 4 facts; the facts' values hold, so the cutoff stops there
    assert row["edit_ran"] == 9
    # the lock names every query (a few hundred bytes each) and compresses as text does
    assert 100 * row["queries"] < row["lock_mb"] * 1e6 < 2000 * row["queries"]
    assert 0 < row["lock_gz_mb"] < row["lock_mb"]
    assert row["state_mb"] > 0
    for column in ("cold_s", "noop_s", "edit_s", "read_s", "status_s", "cold_rss", "noop_rss", "read_rss", "status_rss"):
        assert row[column] > 0, column
