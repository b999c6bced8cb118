"""`python -m benchmarks`: one failing figure does not lose the others' numbers."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

SCRIPT = """
import sys
import benchmarks.__main__ as table

def broken(quick):
    raise SystemExit("kbuild add failed:\\nsome output | with a bar")

table.FIGURES = {"broken": broken, "fine": lambda quick: {"Fine": [("what", "result", "aim")]}}
sys.argv = ["benchmarks", "--only", *sys.argv[2:], "--out", sys.argv[1]]
table.main()
"""


def test_a_figure_that_exits_is_a_failed_row_and_the_table_is_printed(tmp_path):
    page = tmp_path / "benchmarks.md"
    result = subprocess.run([sys.executable, "-c", SCRIPT, page, "broken", "fine"], capture_output=True, text=True,
                            cwd=REPO)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "| figure | measured | result | aim or anchor |"
    assert "| broken | failed | SystemExit: kbuild add failed: some output \\| with a bar |  |" in lines
    assert "| Fine | what | result | aim |" in lines
    assert "| Fine | what | result | aim |" in page.read_text()


def test_a_run_rewrites_only_the_figures_it_ran_under_their_command_and_machine(tmp_path):
    """docs/benchmarks.md holds tables measured by hand beside the generated ones: a run of one
    figure must keep them and the other figures' blocks, and say how and where it measured."""
    page = tmp_path / "benchmarks.md"
    page.write_text("# Benchmarks\n\nA table measured by hand.\n\n<!-- figure broken -->\nold\n<!-- end broken -->\n"
                    "\nBetween the figures.\n\n<!-- figure fine -->\nold fine\n<!-- end fine -->\n")
    result = subprocess.run([sys.executable, "-c", SCRIPT, page, "fine"], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr
    text = page.read_text()
    assert "A table measured by hand." in text and "Between the figures." in text
    assert "<!-- figure broken -->\nold\n<!-- end broken -->" in text and "old fine" not in text
    block = text.split("<!-- figure fine -->", 1)[1].split("<!-- end fine -->", 1)[0]
    assert "`python -m benchmarks --only fine`" in block and "CPUs, Python " in block
    assert "| Fine | what | result | aim |" in block


def test_the_check_breakdown_runs_on_a_small_store():
    """benchmarks/check_phases.py times steps by patching kbuild's own functions: it must follow
    their names (the lock split once left it patching a function that was gone)."""
    result = subprocess.run([sys.executable, "benchmarks/check_phases.py", "--facts", "17", "--runs", "1"],
                            capture_output=True, text=True, cwd=REPO, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    for step in ("Kbuildfile:", "lock:", "pages and verification:", "the rest:"):
        assert step in result.stdout


def test_the_edit_phases_time_each_rule_of_an_edit():
    """benchmarks/edit_phases.py times rules by patching the engine's own functions: it must
    follow their names, and an edit must run the rules it names."""
    result = subprocess.run([sys.executable, "benchmarks/edit_phases.py", "--chunks", "20", "--runs", "1",
                             "--top", "40"], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    for step in ("| the whole build, after Python starts |", "| rule text |", "| rule search_index |"):
        assert step in result.stdout


@pytest.mark.slow
def test_the_edit_time_a_b_times_both_kbuilds_on_their_own_stores():
    """--against is how a change to the edit path is measured (this kbuild and the one before,
    interleaved): a row each, and for each the ratio of its largest edit to its smallest, which
    is issue 16's aim."""
    result = subprocess.run([sys.executable, "benchmarks/edit_time.py", "--chunks", "40", "20", "--facts", "--runs", "1",
                             "--against", sys.executable], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = [line for line in result.stdout.splitlines() if line.startswith("| document of 20 chunks")]
    assert len(rows) == 2 and all(f"({sys.executable})" in row for row in rows)
    ratios = [line for line in result.stdout.splitlines() if line.startswith("largest edit over smallest")]
    assert len(ratios) == 2 and all(re.search(r"documents \d+\.\d\dx$", line) for line in ratios)


def test_the_edit_time_takes_several_edited_sources_and_several_cold_builds():
    """--edited is a pull that brings several edited sources; --colds a cold build timed in turns."""
    result = subprocess.run([sys.executable, "benchmarks/edit_time.py", "--chunks", "--facts", "60", "--runs", "1",
                             "--edited", "3", "--colds", "2"], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert [line for line in result.stdout.splitlines() if line.startswith("| project of 60 facts |")]


def test_the_collector_breakdown_runs_on_a_small_store():
    """benchmarks/collector.py is what docs/benchmarks.md's figures for the cyclic collector come from."""
    result = subprocess.run([sys.executable, "benchmarks/collector.py", "--chunks", "20", "--facts"],
                            capture_output=True, text=True, cwd=REPO, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = [line for line in result.stdout.splitlines() if line.startswith("| document of 20 chunks")]
    assert [row.split(" | ")[1] for row in rows] == ["cold", "one-sentence edit"]


def test_the_lock_render_figure_compares_two_installs_on_the_same_bytes():
    """benchmarks/lock_render.py is where the lock writer's figure in lockfile.py comes from."""
    result = subprocess.run([sys.executable, "benchmarks/lock_render.py", "--entries", "50", "--runs", "1",
                             "--against", sys.executable], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("a lock of 50 entries") == 2 and "the same bytes" in result.stdout


def test_the_index_build_figure_runs_on_a_small_store_and_checks_both_write_the_same_files():
    """benchmarks/index_build.py is where the search index's build figure in ranking.py,
    docs/benchmarks.md and docs/design.md comes from; it stops when the two indexes differ."""
    result = subprocess.run([sys.executable, "benchmarks/index_build.py", "--facts", "60", "--runs", "1"],
                            capture_output=True, text=True, cwd=REPO, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "kbuild build_index:" in result.stdout and "bm25s over token lists:" in result.stdout
    assert "(60 facts, 3 sources)" in result.stdout and "search_index from stored sections:" in result.stdout


def test_the_lock_difference_figure_runs_and_checks_both_ways_agree():
    """benchmarks/lock_difference.py is where the figure for finding a pull's changed entries in
    lockfile.py, docs/engine.md and docs/benchmarks.md come from; it stops when the two ways disagree."""
    result = subprocess.run([sys.executable, "benchmarks/lock_difference.py", "--entries", "500", "--changed", "7",
                             "--runs", "1"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "500 entries" in result.stdout and "7 differ" in result.stdout


def test_the_check_record_figures_run_on_a_small_store():
    """benchmarks/check_record.py is what docs/design.md's decision 14 rests on: it reads the
    state's tables by name, so it must follow them."""
    result = subprocess.run([sys.executable, "benchmarks/check_record.py", "--facts", "20", "--runs", "1"],
                            capture_output=True, text=True, cwd=REPO, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = [line for line in result.stdout.splitlines() if line.startswith("| project of 20 facts")]
    assert len(rows) == 1 and " ms for " in rows[0]


@pytest.mark.slow
def test_the_check_figures_time_the_whole_check_and_the_recorded_one():
    """benchmarks/check.py is where docs/benchmarks.md's figure for a recorded check at 10,000 facts
    comes from: the record it writes must be answered, or the two figures would be one."""
    result = subprocess.run([sys.executable, "benchmarks/check.py", "--facts", "60", "--runs", "1"],
                            capture_output=True, text=True, cwd=REPO, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "kbuild check with kbuild.checked" in result.stdout and "first git status in a fresh clone" in result.stdout
