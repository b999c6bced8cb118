"""Property tests of the engine over random rule graphs and random edits of their inputs and targets.

A tiny interpreter computes every query from scratch; the engine, building incrementally after
each edit, must agree with it (correctness) and must run exactly the queries whose recorded
reads changed (minimality), which also proves early cutoff and dynamic dependencies. A query
may also read one part of another's value (`ctx.query_part`): it then runs again only when that
part changed.
"""
from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbuild.engine import Engine, rule

Dep = tuple[str, int]  # ("file", i), ("query", j), or a part of query j's halves: ("low", j), ("high", j)
PARTS = ("low", "high")


@dataclass(frozen=True)
class Node:
    first: Dep  # read first; its parity picks which of the next two lists is read (dynamic deps)
    if_even: tuple[Dep, ...]
    if_odd: tuple[Dep, ...]
    together: bool  # read the chosen list concurrently, as one group
    mul: int
    mod: int  # small moduli make equal outputs common, so cutoff is exercised


SPEC: list[Node] = []
EXECUTED: list[int | tuple[str, int]] = []  # a node's j; ("halves", j) for the halves of node j


@rule
async def node(ctx, j):
    return await node_value(ctx, j, node)


@rule
async def sharded_node(ctx, shard, j):
    """The same node with a key whose first element names a shard of the split lock."""
    return await node_value(ctx, j, sharded)


def sharded(j: int):
    return sharded_node(f"s{j % 3}", j)


@rule(parts=True)
async def halves(ctx, j):
    """Node j's value in two parts, each read on its own."""
    return split_in_halves(ctx, await ctx.query(node(j)), j)


@rule(parts=True)
async def sharded_halves(ctx, shard, j):
    return split_in_halves(ctx, await ctx.query(sharded(j)), j)


def split_in_halves(ctx, value: int, j: int) -> dict[str, int]:
    EXECUTED.append(("halves", j))
    return {"low": value % 2, "high": value // 2}


def halves_of(query_of, j: int):
    return halves(j) if query_of is node else sharded_halves(f"s{j % 3}", j)


async def node_value(ctx, j, query_of):
    EXECUTED.append(j)
    spec = SPEC[j]

    async def read(dep):
        kind, i = dep
        if kind in PARTS:
            return await ctx.query_part(halves_of(query_of, i), kind)
        return int(ctx.read_text(f"in{i}.txt")) if kind == "file" else await ctx.query(query_of(i))

    first = await read(spec.first)
    rest = spec.if_even if first % 2 == 0 else spec.if_odd
    if spec.together and rest and all(kind == "query" for kind, _ in rest):
        values = await ctx.query_all([query_of(i) for _, i in rest])
    else:
        values = [await read(d) for d in rest]
    return ((first + sum(values)) * spec.mul + j) % spec.mod


def evaluate(spec: list[Node], inputs: list[int], targets: list[int]):
    """From scratch: every reached query's value and its reads (dependency, value read) in order,
    by the key EXECUTED records it by."""
    values: dict[int, int] = {}
    traces: dict[int | tuple[str, int], list[tuple[Dep, int]]] = {}

    def value(dep: Dep) -> int:
        kind, i = dep
        if kind in PARTS:
            whole = compute(i)
            traces[("halves", i)] = [(("query", i), whole)]
            return whole % 2 if kind == "low" else whole // 2
        return inputs[i] if kind == "file" else compute(i)

    def compute(j: int) -> int:
        if j in values:
            return values[j]
        s = spec[j]
        trace = [(s.first, value(s.first))]
        rest = s.if_even if trace[0][1] % 2 == 0 else s.if_odd
        trace += [(d, value(d)) for d in rest]
        traces[j] = trace
        values[j] = ((sum(v for _, v in trace)) * s.mul + j) % s.mod
        return values[j]

    for t in targets:
        compute(t)
    return values, traces


def full_value(spec: list[Node], inputs: list[int], dep: Dep) -> int:
    kind, i = dep
    if kind == "file":
        return inputs[i]
    whole = evaluate(spec, inputs, [i])[0][i]
    return whole if kind == "query" else whole % 2 if kind == "low" else whole // 2


@st.composite
def graphs(draw):
    n_inputs = draw(st.integers(1, 5))
    n_nodes = draw(st.integers(1, 10))
    nodes = []
    for j in range(n_nodes):
        dep = st.one_of(
            st.tuples(st.just("file"), st.integers(0, n_inputs - 1)),
            *([st.tuples(st.sampled_from(["query", *PARTS]), st.integers(0, j - 1))] if j else []),
        )
        nodes.append(Node(
            first=draw(dep),
            if_even=tuple(draw(st.lists(dep, max_size=3, unique=True))),
            if_odd=tuple(draw(st.lists(dep, max_size=3, unique=True))),
            together=draw(st.booleans()),
            mul=draw(st.integers(1, 3)),
            mod=draw(st.sampled_from([2, 3, 5, 1000])),
        ))
    targets = draw(st.lists(st.integers(0, n_nodes - 1), min_size=1, max_size=3, unique=True))
    inputs = draw(st.lists(st.integers(0, 9), min_size=n_inputs, max_size=n_inputs))
    # Each edit changes some inputs, and sometimes the targets: a new target's queries may begin
    # to read parts read before (new readers of a gate), a dropped one leaves queries to forget.
    new_targets = st.lists(st.integers(0, n_nodes - 1), min_size=1, max_size=3, unique=True)
    edits = draw(st.lists(
        st.tuples(st.lists(st.tuples(st.integers(0, n_inputs - 1), st.integers(0, 9)), max_size=3),
                  st.one_of(st.none(), new_targets)),
        min_size=1, max_size=8,
    ))
    return nodes, targets, inputs, edits


def lock_files(engine: Engine) -> dict[Path, bytes]:
    return {f: f.read_bytes() for f in engine.lock.present()}


def write_inputs(folder: Path, inputs: list[int]) -> None:
    for i, v in enumerate(inputs):
        path = folder / f"in{i}.txt"
        if not path.exists() or path.read_text() != str(v):
            path.write_text(str(v))


@settings(max_examples=int(os.environ.get("KBUILD_PROPERTY_EXAMPLES", 60)), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(graphs())
@pytest.mark.parametrize("split", [False, True], ids=["one lock", "split lock"])
def test_incremental_equals_from_scratch_and_runs_exactly_what_changed(tmp_path_factory, split, case):
    spec, targets, inputs, edits = case
    folder = tmp_path_factory.mktemp("graph")
    SPEC[:] = spec
    write_inputs(folder, inputs)
    query_of, rules = (sharded, [sharded_node, sharded_halves]) if split else (node, [node, halves])
    queries = [query_of(t) for t in targets]

    EXECUTED.clear()
    report = Engine(folder, rules, split_lock=split).build(queries)
    values, traces = evaluate(spec, inputs, targets)
    assert report.ok, report.failed
    assert Counter(EXECUTED) == Counter(traces.keys())  # a cold build runs each reached query once

    for edit, new_targets in edits:
        new_inputs = list(inputs)
        for i, v in edit:
            new_inputs[i] = v
        write_inputs(folder, new_inputs)
        if new_targets is not None:
            targets, queries = new_targets, [query_of(t) for t in new_targets]
        new_values, new_traces = evaluate(spec, new_inputs, targets)
        expected = {
            j for j in new_traces
            if j not in traces or any(full_value(spec, new_inputs, d) != old for d, old in traces[j])
        }
        EXECUTED.clear()
        engine = Engine(folder, rules, split_lock=split)  # a new engine each time: state goes through the disk
        report = engine.build(queries)
        assert report.ok, report.failed
        # (a) correctness: the same values as a from-scratch build
        memos = engine.memos()
        got = {t: engine.value(query_of(t)) for t in targets}
        assert got == {t: new_values[t] for t in targets}
        # (b) minimality, (c) cutoff, (d) dynamic deps: exactly the queries whose reads changed
        assert set(EXECUTED) == expected
        assert len(EXECUTED) == len(set(EXECUTED))  # and each at most once
        # no longer reached: forgotten
        assert set(memos) == {(halves_of(query_of, j[1]) if isinstance(j, tuple) else query_of(j)).id for j in new_traces}
        # the lock, patched where the build changed it, is the whole graph rendered afresh: in
        # the files the layout puts each entry in, and no other
        assert lock_files(engine) == {f: data for f, data in engine.lock.render(memos).items() if data is not None}
        if split:  # every entry is in a shard (kbuild.lock is there, with none)
            assert {f.parent for f in lock_files(engine)} == {engine.lock.folder, folder}
            assert b'"rule"' not in engine.lock_path.read_bytes()
        inputs, traces = new_inputs, new_traces
