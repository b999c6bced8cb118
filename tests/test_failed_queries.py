"""Queries that fail, build after build: a failure stays in its query, never crashes a later
build, and once its cause is gone the store ends as a clean build of the same inputs would.

The failures here stay failures whatever kbuild's page checks become: a source with a NUL byte
(binary, not text), a path outside the project, a file that is missing, a rule that raises
Problem for some keys.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import kbuild

from kbuild.engine import Engine, Problem, rule

# -- through the command line -----------------------------------------------------------------

ONE_SECTION = "# G\n\nThe installer SHALL verify the checksum.\n"
EDITED = "# G\n\nThe installer SHALL verify the checksum first.\n"
TWO_SECTIONS = ("# Door keys\n\n## Key cards\n\nA key card opens the doors of one building.\n\n"
                "## Key card readers\n\nA reader SHALL refuse a code it has already seen.\n")
BINARY = "# N\n\nThe tool SHALL \0 work.\n"
OUTSIDE = "  - id: evil\n    path: ../../../../etc/passwd\n"


def kb_tree(root: Path) -> dict[str, bytes]:
    """The pages under kb/ and the lock: what a user commits."""
    files = {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted((root / "kb").rglob("*")) if p.is_file()}
    files["kbuild.lock"] = (root / "kbuild.lock").read_bytes()
    return files


def build_failing(root: Path, *failures: str) -> None:
    """A build that fails with one line for each of `failures`, and no traceback."""
    result = kbuild(root)
    assert isinstance(result.exception, SystemExit), result.exception  # not a crash: a failed build
    assert result.exit_code == 1, result.output
    for words in failures:
        assert words in result.output, (words, result.output)


def build_ok(root: Path) -> None:
    result = kbuild(root)
    assert result.exit_code == 0, (result.output, result.exception)


def assert_as_a_clean_build(store: Path, tmp_path: Path, sources: dict[str, str]) -> None:
    """`store` holds what a clean build of the same sources makes: the same pages, the same lock."""
    clean = tmp_path / "clean"
    clean.mkdir()
    assert kbuild(clean, "init", str(clean)).exit_code == 0
    for name, text in sources.items():
        (clean / name).write_text(text)
    (clean / "kb/demo").mkdir(parents=True, exist_ok=True)
    (clean / "kb/demo/sources.yml").write_bytes((store / "kb/demo/sources.yml").read_bytes())
    build_ok(clean)
    assert kb_tree(store) == kb_tree(clean)


def new_store(root: Path) -> None:
    assert kbuild(root, "init", str(root)).exit_code == 0
    (root / "g.md").write_text(ONE_SECTION)
    assert kbuild(root, "add", "demo", "g.md").exit_code == 0
    build_ok(root)


def test_an_edited_source_and_a_new_failing_entry_after_a_failed_build_do_not_stick_the_store(tmp_path):
    """Issue 49, reproduction 7: after a build in which a source failed, edit a source (its old
    pages go) and add an entry that fails in the same build."""
    store = tmp_path / "store"
    store.mkdir()
    new_store(store)
    (store / "g.md").write_text(TWO_SECTIONS)
    (store / "n.md").write_text(BINARY)
    assert kbuild(store, "add", "demo", "n.md").exit_code == 0
    build_failing(store, "is binary data, not text")
    (store / "g.md").write_text(EDITED)
    with open(store / "kb/demo/sources.yml", "a") as sources:
        sources.write(OUTSIDE)
    build_failing(store, "is binary data, not text", "leads outside")
    build_failing(store, "is binary data, not text", "leads outside")  # and again: nothing is stuck
    assert "## Key cards" not in (store / "kb/demo/facts/g/g.md").read_text()  # the edit was built
    sources = (store / "kb/demo/sources.yml").read_text()
    (store / "kb/demo/sources.yml").write_text(sources.replace(OUTSIDE, ""))
    assert kbuild(store, "remove", "demo", "n").exit_code == 0
    build_ok(store)
    assert_as_a_clean_build(store, tmp_path, {"g.md": EDITED})


def test_removing_one_failing_source_beside_another_then_cleaning_the_state_builds(tmp_path):
    """Issue 49, reproduction 7's second path: a source with a NUL byte and one that fails
    otherwise, a build, `kbuild remove` of the first, a build; and the same after `kbuild clean`."""
    store = tmp_path / "store"
    store.mkdir()
    new_store(store)
    (store / "n.md").write_text(BINARY)
    assert kbuild(store, "add", "demo", "n.md").exit_code == 0
    with open(store / "kb/demo/sources.yml", "a") as sources:
        sources.write(OUTSIDE)
    build_failing(store, "is binary data, not text", "leads outside")
    assert kbuild(store, "remove", "demo", "n").exit_code == 0
    build_failing(store, "leads outside")
    assert not list((store / "kb/demo").rglob("n.md"))  # the removed source's pages are gone
    assert kbuild(store, "clean").exit_code == 0
    build_failing(store, "leads outside")
    assert kbuild(store, "clean").exit_code == 0
    sources = (store / "kb/demo/sources.yml").read_text()
    (store / "kb/demo/sources.yml").write_text(sources.replace(OUTSIDE, ""))
    build_ok(store)
    assert_as_a_clean_build(store, tmp_path, {"g.md": ONE_SECTION})


# -- in the engine's own terms ----------------------------------------------------------------

RUNS: list[str] = []


@pytest.fixture(autouse=True)
def clear_runs():
    RUNS.clear()


@rule
async def raw(ctx, name):
    """A copy of an input: fails while the input is missing."""
    RUNS.append(f"raw {name}")
    try:
        text = ctx.read_text(f"{name}.txt")
    except FileNotFoundError:
        raise Problem(f"{name}.txt is missing") from None
    ctx.write(f"out/raw/{name}.txt", text)
    return text


@rule
async def page(ctx, name):
    """A page made of an input's copy: fails for an input that says "bad"."""
    RUNS.append(f"page {name}")
    text = await ctx.query(raw(name))
    if text.startswith("bad"):
        raise Problem(f"{name} is bad")
    ctx.write(f"out/{name}.md", text.upper())
    return text.upper()


@rule
async def index(ctx):
    """The pages list.txt names, the failed ones left out (as kbuild's indexes do)."""
    RUNS.append("index")
    names = ctx.read_text("list.txt").split()
    pages = await ctx.query_all([page(n) for n in names], return_failures=True)
    built = [f"{n}: {p}" for n, p in zip(names, pages) if isinstance(p, str)]
    ctx.write("out/index.md", "\n".join(built) + "\n")
    return built


RULES = [raw, page, index]


def engine_build(root: Path, listed: str, **inputs: str | None):
    """Write list.txt and the inputs (None: removed), then build the index."""
    (root / "list.txt").write_text(listed)
    for name, text in inputs.items():
        if text is None:
            (root / f"{name}.txt").unlink(missing_ok=True)
        else:
            (root / f"{name}.txt").write_text(text)
    return Engine(root, RULES).build([index()])


def store_tree(root: Path) -> dict[str, bytes]:
    files = {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted((root / "out").rglob("*")) if p.is_file()}
    files["kbuild.lock"] = (root / "kbuild.lock").read_bytes()
    return files


def assert_engine_as_a_clean_build(store: Path, tmp_path: Path, listed: str, **inputs: str) -> None:
    clean = tmp_path / "clean"
    clean.mkdir()
    assert engine_build(clean, listed, **inputs).ok
    assert store_tree(store) == store_tree(clean)


def test_a_query_dropped_and_one_failing_on_its_first_run_in_a_build_after_a_failure(tmp_path):
    """A build after a failure collects garbage over the whole graph: a query that failed on
    its first run is reached, with no memo, beside queries no target reaches any more."""
    assert engine_build(tmp_path, "a", a="one").ok
    second = engine_build(tmp_path, "a b", b="bad")
    assert set(second.failed) == {'page("b")'}
    third = engine_build(tmp_path, "b c", c=None)  # a goes; c fails on its first run
    assert set(third.failed) == {'page("b")', 'raw("c")', 'page("c")'}
    assert not (tmp_path / "out/a.md").exists() and not (tmp_path / "out/raw/a.txt").exists()
    assert (tmp_path / "out/raw/b.txt").exists()  # under a failed page, what built is kept
    again = engine_build(tmp_path, "b c")
    assert set(again.failed) == set(third.failed)
    assert again.reasons['page("c")'] == "new"  # never built: not a value lost
    assert engine_build(tmp_path, "b c", b="fine", c="three").ok
    assert_engine_as_a_clean_build(tmp_path, tmp_path, "b c", b="fine", c="three")


def test_a_dropped_query_beside_a_failing_one_after_the_state_is_dropped(tmp_path):
    """The second path: two failing inputs, one of them taken out of the list, a build; and the
    same with the local state dropped (`kbuild clean`), when the graph comes from the lock."""
    assert engine_build(tmp_path, "a", a="one").ok
    second = engine_build(tmp_path, "a n e", n="bad binary", e=None)
    assert set(second.failed) == {'page("n")', 'raw("e")', 'page("e")'}
    third = engine_build(tmp_path, "a e")  # n's copy, built, is no longer reached
    assert set(third.failed) == {'raw("e")', 'page("e")'}
    assert not (tmp_path / "out/raw/n.txt").exists()
    Engine(tmp_path, RULES).discard_state()
    assert set(engine_build(tmp_path, "a e").failed) == {'raw("e")', 'page("e")'}
    Engine(tmp_path, RULES).discard_state()
    assert engine_build(tmp_path, "a").ok
    assert_engine_as_a_clean_build(tmp_path, tmp_path, "a", a="one")


@rule
async def shared(ctx):
    RUNS.append("shared")
    text = ctx.read_text("shared.txt")
    ctx.write("out/shared.md", text)
    return text


@rule
async def reader(ctx, name):
    """Reads `shared` while its mode file says so; fails after reading it while it says "fail"."""
    RUNS.append(f"reader {name}")
    mode = ctx.read_text(f"{name}.mode").strip()
    if mode == "skip":
        return None
    text = await ctx.query(shared())
    if mode == "fail":
        raise Problem(f"{name} cannot use {text!r}")
    return text


def test_a_query_a_failed_run_read_is_kept_when_the_query_that_read_it_before_stops(tmp_path):
    """After a small change (only what it reaches is loaded), a query that one reader stops
    reading is forgotten unless another still reads it: a reader that read it and then failed
    reads it too, so its memo and file stay, and the build after the failure is fixed runs only
    that reader (as a build of the whole graph keeps it too)."""
    (tmp_path / "shared.txt").write_text("shared text")
    (tmp_path / "first.mode").write_text("read")
    (tmp_path / "second.mode").write_text("skip")
    rules = [shared, reader]
    targets = [reader("first"), reader("second")]
    assert Engine(tmp_path, rules).build(targets).ok
    (tmp_path / "first.mode").write_text("skip")
    (tmp_path / "second.mode").write_text("fail")
    failed = Engine(tmp_path, rules).build(targets)
    assert set(failed.failed) == {'reader("second")'}
    assert (tmp_path / "out/shared.md").read_text() == "shared text"
    assert "shared()" in Engine(tmp_path, rules).memos()
    RUNS.clear()
    (tmp_path / "second.mode").write_text("read")
    assert Engine(tmp_path, rules).build(targets).ok
    assert RUNS == ["reader second"]
