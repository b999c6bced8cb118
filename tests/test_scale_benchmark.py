"""benchmarks/scale.py, as docs/scale.md runs it: each measurement in its own process, on a store
it really built, so a figure in the document cannot come from a build that did nothing."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # real builds of the scale benchmark, each in its own process
REPO = Path(__file__).resolve().parent.parent


def test_one_small_size_measures_every_column_from_real_builds_in_both_layouts():
    result = subprocess.run([sys.executable, str(REPO / "benchmarks" / "scale.py"), "--sizes", "2000", "--json"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    header, one_line, one_json, split_line, split_json = result.stdout.splitlines()
    assert [c.strip() for c in header.split("|")[:2]] == ["layout", "queries"]
    one, split = json.loads(one_json), json.loads(split_json)
    for row, line in ((one, one_line), (split, split_line)):
        # 200 sources of 10 queries each, 2 project indexes, the root
        assert row["queries"] == 2003 and row["sources"] == 200
        assert line.split("|")[1].strip() == "2003"
        # one changed source runs it, its 4 chunks and its 4 facts; the facts' values hold, so the cutoff stops there
        assert row["edit_ran"] == 9
        # the lock names every query (a few hundred bytes each) and compresses as text does
        assert 100 * row["queries"] < row["lock_mb"] * 1e6 < 2000 * row["queries"]
        assert 0 < row["largest_gz_mb"] < row["largest_mb"] <= row["lock_mb"]
        assert row["state_mb"] > 0
        for column in ("cold_s", "noop_s", "edit_s", "read_s", "status_s", "cold_rss", "noop_rss", "read_rss",
                       "status_rss", "rewritten_mb"):
            assert row[column] > 0, column
    assert one["layout"] == "one" and one["files"] == 1 and one["largest_mb"] == one["lock_mb"]
    assert one["rewritten_mb"] == one["lock_mb"]  # one file: an edit writes all of it again
    # split: kbuild.lock (the root) and a file per project; an edit writes its project's file and the root's
    assert split["layout"] == "split" and split["files"] == 3
    assert split["largest_mb"] < 0.6 * split["lock_mb"] and split["rewritten_mb"] < 0.6 * split["lock_mb"]
