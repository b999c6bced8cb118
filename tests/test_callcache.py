"""The call cache: a lookup off the event loop only where an entry can be."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kbuild.engine import Engine, rule
from kbuild.engine.callcache import CallCache

CALLS: list[str] = []


@rule
async def ask(ctx, n):
    async def model():
        CALLS.append(n)
        return {"answer": f"answer {n}"}

    return (await ctx.call({"prompt": n}, model))["answer"]


@rule
async def every(ctx, count):
    return await ctx.query_all([ask(f"q{n}") for n in range(count)])


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = CallCache.get

    def counting(self: CallCache, key: str):
        seen.append(key)
        return real(self, key)

    monkeypatch.setattr(CallCache, "get", counting)
    CALLS.clear()
    return seen


def test_a_cold_build_with_an_empty_cache_looks_up_only_where_it_wrote(tmp_path: Path, lookups: list[str]) -> None:
    """No lookup in a fan-out folder that is not there; one this build wrote to may hold an entry."""
    report = Engine(tmp_path / "a", [ask, every], cache_dir=tmp_path / "cache").build([every(20)])
    assert report.ok and report.calls == 20 and sorted(CALLS) == sorted(f"q{n}" for n in range(20))
    assert len(lookups) < 20
    written = {folder.name for folder in (tmp_path / "cache").iterdir()}
    assert {key[:2] for key in lookups} <= written


def test_entries_written_before_are_found(tmp_path: Path, lookups: list[str]) -> None:
    cache = tmp_path / "cache"
    Engine(tmp_path / "a", [ask, every], cache_dir=cache).build([every(20)])
    CALLS.clear()
    lookups.clear()
    report = Engine(tmp_path / "b", [ask, every], cache_dir=cache).build([every(20)])  # another store, one cache
    assert report.ok and report.calls == 0 and CALLS == []
    assert len(lookups) == 20


def test_an_entry_in_a_folder_written_this_build_is_found(tmp_path: Path) -> None:
    cache = CallCache(tmp_path / "cache", 4)
    computed: list[int] = []

    async def compute() -> dict[str, int]:
        computed.append(1)
        return {"n": len(computed)}

    async def twice() -> tuple[object, object]:
        first = await cache.call({"prompt": "p"}, compute)
        other = CallCache(tmp_path / "cache", 4)  # a later build: sees the folder the first wrote
        return first, await other.call({"prompt": "p"}, compute)

    assert asyncio.run(twice()) == ({"n": 1}, {"n": 1}) and computed == [1]


def test_call_many_computes_only_what_no_cache_holds_and_each_request_once(tmp_path: Path):
    """Many requests a service answers in one round trip: the batch computed holds only the
    requests not yet answered, a request two callers ask at once is computed by one of them,
    and a failed batch stores nothing."""
    batches: list[list[str]] = []

    async def compute(missing):
        batches.append([r["text"] for r in missing])
        await asyncio.sleep(0.01)
        return [{"vector": r["text"].upper()} for r in missing]

    async def first_build():
        cache = CallCache(tmp_path, 4)
        one, two = await asyncio.gather(cache.call_many([{"text": "a"}, {"text": "b"}, {"text": "a"}], compute),
                                        cache.call_many([{"text": "b"}, {"text": "c"}], compute))
        return one, two

    one, two = asyncio.run(first_build())
    assert one == [{"vector": "A"}, {"vector": "B"}, {"vector": "A"}] and two == [{"vector": "B"}, {"vector": "C"}]
    assert sorted(t for batch in batches for t in batch) == ["a", "b", "c"]  # b asked twice, computed once

    batches.clear()
    again = asyncio.run(CallCache(tmp_path, 4).call_many([{"text": "c"}, {"text": "d"}], compute))
    assert again == [{"vector": "C"}, {"vector": "D"}] and batches == [["d"]]  # a later build: from the folder

    async def failing(missing):
        raise RuntimeError("the server is down")

    with pytest.raises(RuntimeError):
        asyncio.run(CallCache(tmp_path, 4).call_many([{"text": "e"}], failing))
    batches.clear()
    assert asyncio.run(CallCache(tmp_path, 4).call_many([{"text": "e"}], compute)) == [{"vector": "E"}]
    assert batches == [["e"]]
