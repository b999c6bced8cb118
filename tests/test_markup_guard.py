"""The guard on what a model writes, both ways, on the labelled probes (tests/data/markup-probes.json,
measured by benchmarks/markup_guard.py): every text that is its source's own words, links, HTML and
page markers and all, is built with those words; every addition its source does not hold (a script,
an event handler, a `javascript:` or `data:` link, an address, an instruction to a model) fails the
page or is gone from what is written."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "markup_guard.py"


def test_the_guard_keeps_what_the_source_says_and_stops_what_a_model_adds():
    spec = importlib.util.spec_from_file_location("markup_guard", BENCHMARK)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # a dataclass looks its module up there
    spec.loader.exec_module(bench)
    right, wrong = bench.evaluate()
    assert wrong == []
    assert sum(p["label"] == "keep" for p in right) >= 20 and sum(p["label"] == "harm" for p in right) >= 20
