"""`kbuild cache`: what a shared cache of model calls holds, and trimming it least recently used first."""
from __future__ import annotations

import json
import os
from pathlib import Path

from conftest import kbuild

from kbuild.engine.callcache import CallCache, entries, trim


def fill(folder: Path, n: int) -> list[str]:
    cache = CallCache(folder, max_in_flight=1)
    keys = []
    for i in range(n):
        key = cache.key({"prompt": i})
        cache.put(key, {"prompt": i}, {"answer": "x" * 100})
        os.utime(cache._path(key), (1000 + i, 1000 + i))  # written in order, oldest first
        keys.append(key)
    return keys


def test_trimming_removes_the_least_recently_used_and_an_answer_used_again_stays(tmp_path: Path) -> None:
    keys = fill(tmp_path, 5)
    cache = CallCache(tmp_path, max_in_flight=1)
    assert cache.get(keys[0]) == {"answer": "x" * 100}  # used now: the most recent
    size = entries(tmp_path)[0].size
    removed = trim(tmp_path, 3 * size)
    assert [e.path for e in removed] == [cache._path(k) for k in keys[1:3]]
    assert {cache.get(k) is not None for k in (keys[0], keys[3], keys[4])} == {True}
    assert trim(tmp_path, 10 * size) == []


def test_kbuild_cache_shows_size_and_hit_rate_and_gc_trims_it(tmp_path: Path, monkeypatch) -> None:
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    monkeypatch.setenv("KBUILD_CACHE_DIR", str(tmp_path / "shared"))
    fill(tmp_path / "shared", 4)
    reports = tmp_path / ".kbuild/reports"
    reports.mkdir(parents=True)
    (reports / "20261201T000000-000000001.json").write_text(json.dumps({"calls": 1, "cache_hits": 3}))
    shown = kbuild(tmp_path, "cache")
    assert shown.exit_code == 0 and "4 answers" in shown.output and "hit rate over the last 1 builds: 75%" in shown.output
    trimmed = kbuild(tmp_path, "cache", "gc", "--max-size", "0")
    assert trimmed.exit_code == 0 and "removed 4 answers" in trimmed.output and entries(tmp_path / "shared") == []
    bad = kbuild(tmp_path, "cache", "gc", "--max-size", "lots")
    assert bad.exit_code == 2 and "give a size like 500M" in bad.output
