"""The engine's behaviours that users rely on, one at a time, with toy rules."""
from __future__ import annotations

import asyncio
import os
import random
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from kbuild.engine import BuildLocked, CallDeferred, Change, Engine, FileRead, Rule, rule
from kbuild.engine.buildlock import BuildLock
from kbuild.engine.files import atomic_write
from kbuild.engine.lockfile import patch_lock_pieces, render_lock
from kbuild.engine.sourcetexts import SourceTexts
from kbuild.engine.state import Memo

RUNS: list[str] = []


@pytest.fixture(autouse=True)
def clear_runs():
    RUNS.clear()


@rule
async def words(ctx, path):
    RUNS.append(f"words {path}")
    return ctx.read_text(path).split()


@rule
async def count(ctx, path):
    RUNS.append(f"count {path}")
    return len(await ctx.query(words(path)))


@rule
async def report(ctx, *paths):
    RUNS.append("report")
    counts = await ctx.query_all([count(p) for p in paths])
    ctx.write("out/report.md", "".join(f"{p}: {c}\n" for p, c in zip(paths, counts)))
    return sum(counts)


RULES = [words, count, report]


def build(folder: Path, *targets, rules=RULES, **kw):
    return Engine(folder, rules).build(list(targets), **kw)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "a.txt").write_text("one two three\n")
    (tmp_path / "b.txt").write_text("four five\n")
    return tmp_path


def test_second_build_reuses_everything(folder):
    first = build(folder, report("a.txt", "b.txt"))
    assert first.ok and len(first.executed) == 5
    assert (folder / "out/report.md").read_text() == "a.txt: 3\nb.txt: 2\n"
    RUNS.clear()
    second = build(folder, report("a.txt", "b.txt"))
    assert RUNS == [] and second.executed == [] and second.reused == 5


def test_edit_reruns_only_the_path_to_it_and_cutoff_stops_the_climb(folder):
    build(folder, report("a.txt", "b.txt"))
    RUNS.clear()
    (folder / "a.txt").write_text("uno dos tres\n")  # same count: count() is cut off
    result = build(folder, report("a.txt", "b.txt"))
    assert RUNS == ["words a.txt", "count a.txt"]
    assert result.cutoff == {'count("a.txt")': "exact"}
    RUNS.clear()
    (folder / "a.txt").write_text("uno dos\n")
    result = build(folder, report("a.txt", "b.txt"))
    assert RUNS == ["words a.txt", "count a.txt", "report"]
    assert result.reasons['report("a.txt","b.txt")'] == 'count("a.txt") changed'
    assert (folder / "out/report.md").read_text() == "a.txt: 2\nb.txt: 2\n"


def same_ignoring_case(old, new):
    return old.lower() == new.lower()


@rule(cutoff=same_ignoring_case)
async def title(ctx, path):
    RUNS.append("title")
    text = ctx.read_text(path).splitlines()[0]
    ctx.write(f"out/{path}.title", text)
    return text


@rule
async def shout(ctx, path):
    RUNS.append("shout")
    return (await ctx.query(title(path))).upper()


def test_cutoff_hook_keeps_the_old_value_and_file_and_dependents_do_not_run(folder):
    build(folder, shout("a.txt"), rules=[title, shout])
    RUNS.clear()
    (folder / "a.txt").write_text("ONE TWO THREE\n")
    result = build(folder, shout("a.txt"), rules=[title, shout])
    assert RUNS == ["title"]
    assert result.cutoff == {'title("a.txt")': "hook"}
    assert (folder / "out/a.txt.title").read_text() == "one two three"  # no churn
    assert Engine(folder, [title, shout]).value(title("a.txt")) == "one two three"
    RUNS.clear()
    (folder / "a.txt").write_text("other words\n")
    build(folder, shout("a.txt"), rules=[title, shout])
    assert RUNS == ["title", "shout"]


def test_changing_a_rule_reruns_its_queries_and_only_those(folder):
    build(folder, report("a.txt", "b.txt"))
    RUNS.clear()
    changed_count = Rule(count.fn, "count", version=2)
    result = build(folder, report("a.txt", "b.txt"), rules=[words, changed_count, report])
    assert sorted(RUNS) == ["count a.txt", "count b.txt"]  # values unchanged: report cut off
    assert set(result.reasons.values()) == {"rule count changed"}


def test_a_prompt_file_is_part_of_the_fingerprint(tmp_path):
    prompt = tmp_path / "prompt.md"
    prompt.write_text("Summarise.")
    a = Rule(words.fn, "words", files=(prompt,))
    before = a.fingerprint
    prompt.write_text("Summarise in one sentence.")
    assert Rule(words.fn, "words", files=(prompt,)).fingerprint != before
    assert Rule(words.fn, "words", params={"temperature": 0}).fingerprint != Rule(words.fn, "words").fingerprint


def test_a_rule_s_source_text_is_kept_in_the_state_so_the_next_process_need_not_parse_it(tmp_path, monkeypatch):
    import importlib.util
    import inspect
    import time

    module_file = tmp_path / "shout_rules.py"
    module_file.write_text("from kbuild.engine import rule\n\n\nclass Loud:\n    mark = '!'\n\n\n"
                           "@rule(uses=(Loud,))\nasync def shout(ctx, path):\n"
                           "    return ctx.read_text(path).upper() + Loud.mark\n")  # a class its code uses too
    an_hour_ago = time.time() - 3600
    os.utime(module_file, (an_hour_ago, an_hour_ago))  # not edited in this instant: its text may be kept
    spec = importlib.util.spec_from_file_location("shout_rules", module_file)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "shout_rules", module)  # where inspect finds a class's file
    spec.loader.exec_module(module)
    (tmp_path / "a.txt").write_text("quiet\n")
    shout = module.shout
    assert "mark = '!'" in SourceTexts({}).source_of(module.Loud)
    assert Engine(tmp_path, [shout]).build([shout("a.txt")]).executed == ['shout("a.txt")']

    def no_source(fn):
        raise OSError("the source was read again")

    monkeypatch.setattr(inspect, "getsource", no_source)
    again = Rule(shout.fn, "shout", uses=shout.uses)  # a new process: no fingerprint computed yet
    report = Engine(tmp_path, [again]).build([again("a.txt")])
    assert report.executed == [] and report.failed == {}



def test_a_package_named_in_uses_by_object_decides_by_every_file_below_it(tmp_path, monkeypatch):
    """A rule that names a package it uses (a converter) is stale when any of the package's
    modules changes, one it never imported too, and it is the same fingerprint as naming it by
    its dotted name (a Kbuildfile written before rules took objects)."""
    import importlib

    package = tmp_path / "helpers"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "pdf.py").write_text("DPI = 150\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    helpers = importlib.import_module("helpers")
    by_object, by_name = Rule(words.fn, "words", uses=(helpers,)), Rule(words.fn, "words", uses=("helpers",))
    assert by_object.fingerprint == by_name.fingerprint
    (package / "pdf.py").write_text("DPI = 300\n")
    assert Rule(words.fn, "words", uses=(helpers,)).fingerprint != by_object.fingerprint

@rule
async def maybe(ctx, path):
    RUNS.append("maybe")
    return ctx.read_text(path) if ctx.exists(path) else "(none)"


def test_a_missing_input_is_a_dependency_too(tmp_path):
    assert build(tmp_path, maybe("later.txt"), rules=[maybe]).ok
    RUNS.clear()
    build(tmp_path, maybe("later.txt"), rules=[maybe])
    assert RUNS == []
    (tmp_path / "later.txt").write_text("here now")
    build(tmp_path, maybe("later.txt"), rules=[maybe])
    assert RUNS == ["maybe"]


@rule
async def pages(ctx, n):
    for i in range(int(ctx.read_text("n.txt"))):
        ctx.write(f"pages/p{i}.md", f"page {i}")
    return None


def test_outputs_no_longer_produced_are_removed_and_edited_ones_restored(tmp_path):
    (tmp_path / "n.txt").write_text("3")
    build(tmp_path, pages(0), rules=[pages])
    assert sorted(p.name for p in (tmp_path / "pages").iterdir()) == ["p0.md", "p1.md", "p2.md"]
    (tmp_path / "n.txt").write_text("1")
    result = build(tmp_path, pages(0), rules=[pages])
    assert sorted(p.name for p in (tmp_path / "pages").iterdir()) == ["p0.md"]
    assert sorted(result.removed) == ["pages/p1.md", "pages/p2.md"]
    (tmp_path / "pages/p0.md").write_text("hand edit")
    result = build(tmp_path, pages(0), rules=[pages])
    assert result.reasons == {"pages(0)": "output pages/p0.md is missing or was edited"}
    assert (tmp_path / "pages/p0.md").read_text() == "page 0"


def test_queries_no_target_reaches_are_forgotten_with_their_files(folder):
    build(folder, report("a.txt", "b.txt"))
    result = build(folder, count("b.txt"))
    assert not (folder / "out/report.md").exists()
    assert "out/report.md" in result.removed
    assert set(Engine(folder, RULES).memos()) == {'count("b.txt")', 'words("b.txt")'}


@rule
async def escape(ctx, path):
    ctx.write(path, "x")
    return None


def test_an_output_outside_the_root_fails_that_query_only(folder):
    result = build(folder, escape("../outside.txt"), count("a.txt"), rules=[escape, count, words])
    assert "must be relative and inside" in result.failed['escape("../outside.txt")']
    assert not (folder.parent / "outside.txt").exists()
    assert 'count("a.txt")' in result.executed


@rule
async def broken(ctx, path):
    RUNS.append("broken")
    if ctx.read_text(path).startswith("bad"):
        raise ValueError("cannot parse this")
    return 1


@rule
async def tolerant(ctx, *paths):
    values = await ctx.query_all([broken(p) for p in paths], return_failures=True)
    return sum(v for v in values if isinstance(v, int))


@rule
async def strict(ctx, *paths):
    return sum(await ctx.query_all([broken(p) for p in paths]))


def test_a_failure_fails_its_readers_not_the_rest_and_is_retried(folder):
    (folder / "bad.txt").write_text("bad input")
    rules = [broken, tolerant, strict]
    result = build(folder, strict("a.txt", "bad.txt"), tolerant("a.txt", "bad.txt"), rules=rules)
    assert result.failed['broken("bad.txt")'] == "ValueError: cannot parse this"
    assert result.failed['strict("a.txt","bad.txt")'] == 'needs broken("bad.txt"), which failed'
    assert 'tolerant("a.txt","bad.txt")' not in result.failed
    RUNS.clear()
    result = build(folder, strict("a.txt", "bad.txt"), tolerant("a.txt", "bad.txt"), rules=rules)
    assert RUNS == ["broken"]  # only what failed is tried again
    (folder / "bad.txt").write_text("fixed")
    result = build(folder, strict("a.txt", "bad.txt"), tolerant("a.txt", "bad.txt"), rules=rules)
    assert result.ok
    assert Engine(folder, rules).value(tolerant("a.txt", "bad.txt")) == 2


@rule
async def loop(ctx, n):
    return await ctx.query(loop((n + 1) % 3))


@rule
async def itself(ctx):
    return await ctx.query(itself())


def test_a_cycle_is_reported_with_its_members(tmp_path):
    result = build(tmp_path, loop(0), rules=[loop])
    assert not result.ok
    messages = " ".join(result.failed.values())
    assert "dependency cycle: " in messages
    assert all(f"loop({i})" in messages for i in range(3))
    assert "dependency cycle: itself() -> itself()" in build(tmp_path, itself(), rules=[itself]).failed["itself()"]


@rule
async def chain(ctx, n):
    return 0 if n == 0 else 1 + await ctx.query(chain(n - 1))


def test_a_deep_graph_does_not_overflow_the_stack(tmp_path):
    depth = 3000
    assert build(tmp_path, chain(depth), rules=[chain]).ok
    assert Engine(tmp_path, [chain]).value(chain(depth)) == depth
    assert build(tmp_path, chain(depth), rules=[chain]).reused == depth + 1


def test_a_second_build_on_the_same_store_is_refused_clearly(folder):
    with BuildLock(folder / ".kbuild"):
        with pytest.raises(BuildLocked, match=r"another kbuild \(pid \d+\) is building this store"):
            build(folder, count("a.txt"))
    assert build(folder, count("a.txt")).ok


CALLS: list[str] = []
IN_FLIGHT = [0, 0]  # now, most


@rule
async def ask(ctx, question):
    async def compute():
        CALLS.append(question)
        IN_FLIGHT[0] += 1
        IN_FLIGHT[1] = max(IN_FLIGHT)
        await asyncio.sleep(0.01)
        IN_FLIGHT[0] -= 1
        return {"answer": question.upper()}

    text = ctx.read_text("q.txt")
    return (await ctx.call({"model": "toy", "prompt": question + text}, compute))["answer"]


def test_the_same_call_is_never_paid_twice_and_calls_in_flight_are_bounded(tmp_path, monkeypatch):
    monkeypatch.setenv("KBUILD_CACHE_DIR", str(tmp_path / "shared-cache"))
    (tmp_path / "q.txt").write_text("?")
    CALLS.clear()
    IN_FLIGHT[:] = [0, 0]
    questions = [ask(f"q{i % 10}") for i in range(10)] + [ask("q0")]
    engine = Engine(tmp_path, [ask], max_calls=3)
    result = engine.build(questions)
    assert sorted(CALLS) == sorted(f"q{i}" for i in range(10)) and result.calls == 10
    assert IN_FLIGHT[1] == 3
    (tmp_path / "q.txt").write_text("!")  # every query reruns: new prompts
    engine.build(questions)
    assert len(CALLS) == 20
    (tmp_path / "q.txt").write_text("?")  # a reverted edit costs no call
    result = engine.build(questions)
    assert len(CALLS) == 20 and result.calls == 0 and result.cache_hits == 10
    other = tmp_path / "elsewhere"  # another checkout sharing the cache folder
    other.mkdir()
    (other / "q.txt").write_text("?")
    Engine(other, [ask]).build(questions)
    assert len(CALLS) == 20


def test_the_lock_is_deterministic_and_sorted(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        (d / "a.txt").write_text("x y")
        (d / "b.txt").write_text("z")
    build(a, report("a.txt", "b.txt"))
    build(b, report("b.txt", "a.txt"), collect_garbage=False)
    build(b, report("a.txt", "b.txt"))
    assert (a / "kbuild.lock").read_bytes() == (b / "kbuild.lock").read_bytes()
    text = (a / "kbuild.lock").read_text()
    ids = [line.split('"')[1] for line in text.splitlines() if line.startswith('  "')]
    assert ids == sorted(ids) and len(ids) == 5


def test_a_lock_patched_where_queries_changed_equals_one_rendered_afresh():
    """A build that ran a few queries rewrites only their entries of the lock; the result must be
    byte for byte the lock of the whole graph, whatever ids (quotes, newlines, non-ASCII) it has."""
    rng = random.Random(7)
    names = [f"q{i:03}" for i in range(300)] + ['we"ird": {\n', "a\\b", "\u00e9x", 'x": {', "\u2603"]

    def memo(qid: str) -> Memo:
        return Memo(qid, "r", [qid], "f", [[["file:a", str(rng.random())]]] if rng.random() < 0.5 else [],
                    str(rng.random()), {"o\n\"x": "d"} if rng.random() < 0.3 else {}, {"n": 1} if rng.random() < 0.3 else {})

    for _ in range(200):
        memos = {q: memo(q) for q in rng.sample(names, rng.randrange(len(names)))}
        old = render_lock(memos)
        changed = set(rng.sample(names, rng.randrange(12)))
        for qid in changed:
            if rng.random() < 0.4:
                memos.pop(qid, None)
            else:
                memos[qid] = memo(qid)
        assert b"".join(patch_lock_pieces(old, memos, changed)) == render_lock(memos)


def test_a_lock_file_patched_from_its_memory_map_is_written_as_one_rendered_afresh(tmp_path):
    """The build patches the lock file on disk through a memory map, writing the entries it
    kept as views of the old file: what it writes, and its hash, are the whole lock's."""
    from kbuild.engine.hashing import hash_bytes, hash_pieces
    from kbuild.engine.lockfiles import LockFiles

    rng = random.Random(11)
    names = [f'r("q{i:03}")' for i in range(200)]  # ids as rules make them: a removed one's key is read back
    memos = {q: Memo(q, "r", [q[3:-2]], "f", [], str(rng.random()), {}, {}) for q in names}
    lock = LockFiles(tmp_path / "kbuild.lock", False)
    lock.path.write_bytes(render_lock(memos))
    for _ in range(20):
        changed = set(rng.sample(names, rng.randrange(1, 8)))
        for qid in changed:
            if rng.random() < 0.3:
                memos.pop(qid, None)
            else:
                memos[qid] = Memo(qid, "r", [qid[3:-2]], "f", [], str(rng.random()), {}, {})
        (pieces,) = lock.patch(memos, changed).values()
        assert b"".join(pieces) == render_lock(memos) and hash_pieces(pieces) == hash_bytes(render_lock(memos))
        atomic_write(lock.path, pieces)
        del pieces
        assert lock.path.read_bytes() == render_lock(memos)


def test_reads_are_typed_as_files_or_queries_wherever_the_graph_is_loaded_from(folder):
    """The state and the lock store a file read as "file:" and its path; loaded, it is a FileRead
    and a query read is the query's id, so no part of the engine looks at the prefix."""
    build(folder, report("a.txt", "b.txt"))
    from_state = Engine(folder, RULES).memos()
    (folder / ".kbuild" / "state.db").unlink()
    from_lock = Engine(folder, RULES).memos()
    for memos in (from_state, from_lock):
        (((file_read, _),),) = memos['words("a.txt")'].deps
        assert isinstance(file_read, FileRead) and file_read.path == "a.txt"
        (((query_read, _),),) = memos['count("a.txt")'].deps
        assert query_read == 'words("a.txt")' and not isinstance(query_read, FileRead)
    assert '"file:a.txt"' in (folder / "kbuild.lock").read_text()  # the lock's format is unchanged


def test_a_fresh_clone_with_the_lock_needs_no_run(folder, tmp_path_factory):
    build(folder, report("a.txt", "b.txt"))
    clone = tmp_path_factory.mktemp("clone")
    shutil.copytree(folder, clone, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".kbuild"))
    engine = Engine(clone, RULES)
    assert engine.plan([report("a.txt", "b.txt")]) == {}
    RUNS.clear()
    assert engine.build([report("a.txt", "b.txt")]).executed == []
    (clone / "b.txt").write_text("changed upstream words")
    assert set(engine.plan([report("a.txt", "b.txt")])) == {
        'words("b.txt")', 'count("b.txt")', 'report("a.txt","b.txt")'}
    result = engine.build([report("a.txt", "b.txt")])
    # report's value for a.txt was never stored in this clone, so count(a.txt) runs to give it
    assert set(result.executed) == {'words("b.txt")', 'count("b.txt")', 'report("a.txt","b.txt")',
                                    'count("a.txt")', 'words("a.txt")'}
    assert (clone / "out/report.md").read_text() == "a.txt: 3\nb.txt: 3\n"


def test_a_pulled_lock_and_pages_are_taken_as_built(folder, tmp_path_factory):
    """Teammate A builds and commits; B pulls pages and lock: B's build runs nothing."""
    b = tmp_path_factory.mktemp("b")
    shutil.copytree(folder, b, dirs_exist_ok=True)
    build(b, report("a.txt", "b.txt"))
    (folder / "a.txt").write_text("a new first line\n")
    build(folder, report("a.txt", "b.txt"))
    for name in ("a.txt", "kbuild.lock", "out/report.md"):  # what `git pull` brings
        shutil.copy(folder / name, b / name)
    RUNS.clear()
    engine = Engine(b, RULES)
    assert engine.plan([report("a.txt", "b.txt")]) == {}
    assert engine.build([report("a.txt", "b.txt")]).executed == []


def test_a_file_changed_with_the_same_size_and_time_is_still_seen(folder):
    """The stat fast path must not hide an edit made within one mtime tick of the build."""
    build(folder, count("a.txt"))
    st = os.stat(folder / "a.txt")
    (folder / "a.txt").write_text("six sev eight\n")
    os.utime(folder / "a.txt", ns=(st.st_atime_ns, st.st_mtime_ns))
    RUNS.clear()
    build(folder, count("a.txt"))
    assert "words a.txt" in RUNS


def test_a_failure_read_by_a_tolerant_reader_is_retried_on_the_next_build(folder):
    (folder / "bad.txt").write_text("bad input")
    rules = [broken, tolerant]
    first = build(folder, tolerant("a.txt", "bad.txt"), rules=rules)
    assert list(first.failed) == ['broken("bad.txt")']
    RUNS.clear()
    second = build(folder, tolerant("a.txt", "bad.txt"), rules=rules)
    assert second.failed == {'broken("bad.txt")': "ValueError: cannot parse this"}
    assert RUNS == ["broken"]


def test_an_edited_rule_file_is_seen_although_rule_sources_are_cached(tmp_path):
    """Rule sources are cached by file size and mtime between builds; an edit must still count."""
    import importlib.util
    import time

    def load(name: str, body: str, mtime: float):
        module_file = tmp_path / "house_rules.py"
        module_file.write_text("from kbuild.engine import rule\n\n\n@rule\nasync def shout(ctx, path):\n"
                               f"    return ctx.read_text(path).{body}()\n")
        os.utime(module_file, (mtime, mtime))  # older than the racy window, so it is cached
        spec = importlib.util.spec_from_file_location(name, module_file)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.shout

    (tmp_path / "a.txt").write_text("Hi")
    long_ago = time.time() - 600
    shout = load("house_rules_1", "upper", long_ago)
    assert Engine(tmp_path, [shout]).build([shout("a.txt")]).executed == ['shout("a.txt")']
    assert Engine(tmp_path, [shout]).build([shout("a.txt")]).executed == []
    shout = load("house_rules_2", "lower", long_ago + 5)
    engine = Engine(tmp_path, [shout])
    assert engine.build([shout("a.txt")]).executed == ['shout("a.txt")']
    assert engine.value(shout("a.txt")) == "hi"


@rule
async def page(ctx, name):
    ctx.write(f"out/{name}.md", f"# {name}\n")
    return name


@rule
async def listed_pages(ctx, listing):
    names = ctx.read_text(listing).split()
    return await ctx.query_all([page(n) for n in names])


def test_a_page_its_reader_stops_reading_is_forgotten_with_its_file_after_a_small_change(tmp_path):
    """After a settled build a change loads only what it reaches; what the re-run stops reading
    must still be collected, its file removed and the lock left equal to the whole graph's."""
    (tmp_path / "list.txt").write_text("alpha beta gamma\n")
    rules = [page, listed_pages]
    assert build(tmp_path, listed_pages("list.txt"), rules=rules).ok
    assert build(tmp_path, listed_pages("list.txt"), rules=rules).executed == []  # settled: a summary is kept
    (tmp_path / "list.txt").write_text("alpha gamma\n")
    report_ = build(tmp_path, listed_pages("list.txt"), rules=rules)
    assert report_.executed == ['listed_pages("list.txt")']
    assert not (tmp_path / "out/beta.md").exists() and (tmp_path / "out/alpha.md").exists()
    engine = Engine(tmp_path, rules)
    memos = engine.memos()
    assert 'page("beta")' not in memos
    assert engine.lock_path.read_bytes() == render_lock(memos)
    (tmp_path / "out/gamma.md").write_text("edited by hand\n")
    assert build(tmp_path, listed_pages("list.txt"), rules=rules).executed == ['page("gamma")']
    assert (tmp_path / "out/gamma.md").read_text() == "# gamma\n"
    assert build(tmp_path, listed_pages("list.txt"), rules=rules).executed == []


@dataclass(frozen=True)
class Sizes:
    width: int
    unit: str


@rule(settings=("width",))
async def padded(ctx, path):
    RUNS.append(f"padded {path}")
    return ctx.read_text(path).strip().ljust(ctx.settings.width, ".")


@rule(settings=("width",))
async def sneaky(ctx, path):
    return ctx.settings.unit  # not declared: a setting the fingerprint would not see


@rule
async def both(ctx, path):
    return [await ctx.query(padded(path)), await ctx.query(words(path))]


def test_a_setting_reaches_the_rules_that_read_it_and_only_them(folder):
    (folder / "a.txt").write_text("hi\n")

    def build(width):
        rules = [padded.configured(Sizes(width, "cm")), words, both]
        RUNS.clear()
        report = Engine(folder, rules).build([both("a.txt")])  # queries made with the module's rules
        assert not report.failed, report.failed
        return Engine(folder, rules).value(both("a.txt"))

    assert build(4) == ["hi..", ["hi"]] and "padded a.txt" in RUNS
    assert build(4) == ["hi..", ["hi"]] and RUNS == []
    assert build(6) == ["hi....", ["hi"]] and RUNS == ["padded a.txt"]  # words did not read the width


def test_a_rule_cannot_read_a_setting_it_did_not_name(folder):
    (folder / "a.txt").write_text("hi\n")
    report = Engine(folder, [sneaky.configured(Sizes(4, "cm"))]).build([sneaky("a.txt")])
    assert "reads the setting 'unit' without declaring it" in report.failed[sneaky("a.txt").id]
    with pytest.raises(TypeError, match="does not have"):
        rule(settings=("height",))(padded.fn).configured(Sizes(4, "cm"))


@rule(parts=True)
async def sections(ctx, path):
    RUNS.append("sections")
    return dict(line.split(": ", 1) for line in ctx.read_text(path).splitlines())


@rule
async def section(ctx, path, name):
    RUNS.append(f"section {name}")
    return (await ctx.query_part(sections(path), name) or "").upper()


@rule
async def both_sections(ctx, path):
    return [await ctx.query(section(path, "a")), await ctx.query(section(path, "b"))]


def test_a_reader_of_one_part_runs_again_only_when_that_part_changes(folder):
    """An edit of one entry of a value reaches the one reader of that entry, however many read
    the others, and the lock says so to a fresh clone as a clean build would."""
    (folder / "s.txt").write_text("a: one\nb: two\n")
    rules = [sections, section, both_sections]
    Engine(folder, rules).build([both_sections("s.txt")])
    RUNS.clear()
    (folder / "s.txt").write_text("a: one\nb: three\n")
    engine = Engine(folder, rules)
    engine.build([both_sections("s.txt")])
    assert RUNS == ["sections", "section b"]
    assert engine.value(both_sections("s.txt")) == ["ONE", "THREE"]
    assert not engine.inspect().stale  # verified from the lock alone, the part read still holds
    incremental = (folder / "kbuild.lock").read_bytes()
    shutil.rmtree(folder / ".kbuild")
    (folder / "kbuild.lock").unlink()
    Engine(folder, rules).build([both_sections("s.txt")])
    assert (folder / "kbuild.lock").read_bytes() == incremental
    RUNS.clear()
    (folder / "s.txt").write_text("b: three\n")  # the part is gone: its reader runs and sees none
    Engine(folder, rules).build([both_sections("s.txt")])
    assert RUNS == ["sections", "section a"] and Engine(folder, rules).value(section("s.txt", "a")) == ""


@rule
async def exclaimed(ctx, path, name):
    RUNS.append(f"exclaimed {name}")
    return await ctx.query(section(path, name)) + "!"


@rule
async def all_exclaimed(ctx, path, names):
    RUNS.append("all exclaimed")
    return await ctx.query_all([exclaimed(path, n) for n in names])


def test_an_edit_of_one_part_checks_what_reads_that_part_not_what_reads_the_others(folder, monkeypatch):
    """A part's readers and what is built on them are behind a gate: once the query they read
    parts of is settled, only the readers of the parts that changed are loaded and checked, so
    an edit costs what it changed however many parts the value has."""
    from kbuild.engine import demand, scan

    names = [f"n{i}" for i in range(200)]
    rules = [sections, section, exclaimed, all_exclaimed]
    (folder / "s.txt").write_text("".join(f"{n}: word {n}\n" for n in names))
    Engine(folder, rules).build([all_exclaimed("s.txt", names)])
    checked: list[str] = []
    real = demand.walk_reads
    monkeypatch.setattr(demand, "walk_reads", lambda reads, *a, **kw: checked.append("") or real(reads, *a, **kw))
    real_settle = scan.Scan.settle
    monkeypatch.setattr(scan.Scan, "settle", lambda self, roots: (real_settle(self, roots), checked.extend(self.db.green))[0])
    RUNS.clear()
    (folder / "s.txt").write_text((folder / "s.txt").read_text().replace("word n7\n", "word seven\n"))
    engine = Engine(folder, rules)
    engine.build([all_exclaimed("s.txt", names)])
    assert RUNS == ["sections", "section n7", "exclaimed n7", "all exclaimed"]
    assert engine.value(exclaimed("s.txt", "n7")) == "WORD SEVEN!"
    assert len(checked) < 20, len(checked)  # not one per part: 400 queries read behind the gate
    assert not engine.inspect().stale


def test_a_reader_that_starts_reading_a_part_is_behind_its_gate_at_the_next_edit(folder):
    """What lies behind a gate is kept between builds (the state's `behind`); a query that has
    begun to read a part since must be in it, or an edit of that part would leave it as it was."""
    rules = [sections, section, exclaimed, all_exclaimed]
    two, three = all_exclaimed("s.txt", ["n0", "n1"]), all_exclaimed("s.txt", ["n0", "n1", "n2"])
    (folder / "s.txt").write_text("n0: zero\nn1: one\nn2: two\n")
    Engine(folder, rules).build([two])
    (folder / "s.txt").write_text("n0: nought\nn1: one\nn2: two\n")
    Engine(folder, rules).build([two])  # walks behind the gate, and keeps what it found
    Engine(folder, rules).build([two, three])  # new readers of part n2; nothing is forgotten
    RUNS.clear()
    (folder / "s.txt").write_text("n0: nought\nn1: one\nn2: deux\n")
    engine = Engine(folder, rules)
    assert engine.build([two, three]).failed == {}
    assert RUNS == ["sections", "section n2", "exclaimed n2", "all exclaimed"]
    assert engine.value(three) == ["NOUGHT!", "ONE!", "DEUX!"]


@rule(parts=True)
async def section_words(ctx, path, name):
    """A gate behind a gate: a section's words, one part each."""
    RUNS.append(f"words {name}")
    return {str(i): w for i, w in enumerate((await ctx.query(section(path, name))).split())}


@rule
async def word(ctx, path, name, i):
    RUNS.append(f"word {name} {i}")
    return await ctx.query_part(section_words(path, name), str(i))


@rule
async def every_word(ctx, path, names, count):
    RUNS.append("every word")
    return await ctx.query_all([word(path, n, i) for n in names for i in range(count)])


def test_a_change_let_through_a_gate_stops_at_the_next_gate(folder, monkeypatch):
    """A gate's changed part may reach another query read in parts (a source's regions, then
    one region's chunks): that one is a gate too, and of its readers only those of the parts
    that changed are loaded and checked."""
    from kbuild.engine import demand

    names, count = [f"n{i}" for i in range(4)], 150
    rules = [sections, section, section_words, word, every_word]
    (folder / "s.txt").write_text("".join(f"{n}: {' '.join(f'w{i}' for i in range(count))}\n" for n in names))
    target = every_word("s.txt", names, count)
    Engine(folder, rules).build([target])
    (folder / "s.txt").write_text((folder / "s.txt").read_text().replace("n2: w0 w1 w2 w3", "n2: w0 w1 w2 three"))
    Engine(folder, rules).build([target])  # walks behind the gates, and keeps what it found
    checked: list[str] = []
    real = demand.walk_reads
    monkeypatch.setattr(demand, "walk_reads", lambda reads, *a, **kw: checked.append("") or real(reads, *a, **kw))
    RUNS.clear()
    (folder / "s.txt").write_text((folder / "s.txt").read_text().replace("n2: w0 w1 w2 three", "n2: w0 w1 w2 four"))
    engine = Engine(folder, rules)
    engine.build([target])
    assert RUNS == ["sections", "section n2", "words n2", "word n2 3", "every word"]
    assert engine.value(word("s.txt", "n2", 3)) == "FOUR"
    assert len(checked) < 20, len(checked)  # not one per word of the section: 150 read behind the second gate
    assert not engine.inspect().stale


def test_a_lock_entry_read_on_its_own_keeps_its_part_hashes():
    from kbuild.engine.lockfile import lock_entries, parse_entry

    memo = Memo("sections(\"s.txt\")", "sections", ["s.txt"], "f", [], "h", {}, {}, {"a": "1", "b": "2"})
    entries = lock_entries(render_lock({memo.id: memo}))
    assert parse_entry(entries[memo.id]).parts == {"a": "1", "b": "2"}


ANSWERED: dict[str, str] = {}  # a service that answers later: question -> answer, once it has one
DEFERRED: list[str] = []


@rule
async def later(ctx, question):
    """A call whose answer comes from a service that answers in its own time."""
    async def compute():
        if question not in ANSWERED:
            DEFERRED.append(question)
            raise CallDeferred(f"{question} is with the service")
        return ANSWERED[question]

    RUNS.append(f"later {question}")
    return await ctx.call({"question": question, "file": ctx.read_text("q.txt")}, compute)


@rule
async def gathered(ctx, *questions):
    """Builds around failures (an index), but not around what waits."""
    RUNS.append("gathered")
    values = await ctx.query_all([later(q) for q in questions], return_failures=True)
    return [v for v in values if isinstance(v, str)]


@rule
async def plain(ctx):
    RUNS.append("plain")
    return ctx.read_text("q.txt")


def test_a_deferred_call_leaves_its_readers_waiting_and_the_rest_built_until_it_is_answered(tmp_path, monkeypatch):
    monkeypatch.setenv("KBUILD_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "q.txt").write_text("?")
    ANSWERED.clear()
    DEFERRED.clear()
    rules = [later, gathered, plain]
    targets = [gathered("a", "b"), plain()]
    result = build(tmp_path, *targets, rules=rules)
    assert not result.ok and result.failed == {}  # nothing failed: it waits
    assert sorted(result.waiting) == ['gathered("a","b")', 'later("a")', 'later("b")']
    assert result.waiting['later("a")'] == "a is with the service"
    assert sorted(DEFERRED) == ["a", "b"] and result.calls == 0
    assert "plain" in RUNS and "3 waiting" in result.summary()
    ANSWERED["a"] = "yes"
    RUNS.clear()
    result = build(tmp_path, *targets, rules=rules)  # the next build tries what waits, nothing else
    assert sorted(RUNS) == ["gathered", "later a", "later b"]  # plain is settled
    assert sorted(result.waiting) == ['gathered("a","b")', 'later("b")']
    assert result.calls == 1
    ANSWERED["b"] = "no"
    result = build(tmp_path, *targets, rules=rules)
    assert result.ok and result.calls == 1 and 'later("a")' not in result.executed  # "a" was built: asked once
    assert Engine(tmp_path, rules).value(gathered("a", "b")) == ["yes", "no"]
    DEFERRED.clear()
    assert build(tmp_path, *targets, rules=rules).calls == 0 and DEFERRED == []


def test_a_lock_entry_is_written_as_json_would_write_it_whatever_its_strings_hold(tmp_path):
    """The lock's bytes do not drift with how it is rendered: a store's lock shows in `git diff`
    only where a hash changed. Strings are escaped as json.dumps escapes them."""
    import json

    from kbuild.engine.lockfile import read_lock

    odd = 'é "quoted" \\ back\nnewline'
    read = FileRead.of(odd)
    memo = Memo(f"page({odd!r})", "page", [odd, 3, ["nested"]], "f1", [[(read, "h1"), ("q()", "h2")], [("r()", "h3")]],
                "h", {"b.md": "2", "a.md": "1"}, {"z": 1, "a": [odd]}, {"y": "2", "x": "1"})
    rendered = render_lock({memo.id: memo})
    s = json.dumps
    assert rendered.decode() == (
        '{\n "version": 1,\n "queries": {\n'
        f'  {s(memo.id)}: {{\n'
        '   "rule": "page",\n'
        f'   "key": {s(memo.key)},\n'
        '   "fingerprint": "f1",\n'
        '   "hash": "h",\n'
        '   "outputs": {"a.md": "1", "b.md": "2"},\n'
        f'   "notes": {{"a": [{s(odd)}], "z": 1}},\n'
        '   "parts": {"x": "1", "y": "2"},\n'
        f'   "deps": [\n    [[{s(read)}, "h1"], ["q()", "h2"]],\n    [["r()", "h3"]]\n   ]\n'
        '  }\n }\n}\n')
    (tmp_path / "kbuild.lock").write_bytes(rendered)
    (back,) = read_lock(tmp_path / "kbuild.lock").values()
    assert [[tuple(r) for r in group] for group in back.deps] == memo.deps
    assert isinstance(back.deps[0][0][0], FileRead) and back.deps[0][0][0].path == odd


@rule
async def headed(ctx, head, path):
    RUNS.append("headed")
    return [ctx.read_text(head).strip(), *await ctx.query(words(path))]


def test_every_verifier_names_the_first_read_that_changed(folder):
    """The build, the dry run and status walk a query's reads in the order they were made and
    name the first that changed, though the dry run must go on past it to settle the later
    reads (here a query read not settled yet) and status goes on to what is built on them."""
    rules = [words, headed]
    target = headed("a.txt", "b.txt")
    build(folder, target, rules=rules)
    (folder / "a.txt").write_text("a new head\n")
    (folder / "b.txt").write_text("four five six\n")
    engine = Engine(folder, rules)
    plan = engine.plan([target])
    assert (plan[target.id].kind, plan[target.id].subject) == (Change.INPUT_CHANGED, "a.txt")
    assert (plan['words("b.txt")'].kind, plan['words("b.txt")'].subject) == (Change.INPUT_CHANGED, "b.txt")
    stale = engine.inspect().stale
    assert (stale[target.id][0].kind, stale[target.id][0].subject) == (Change.INPUT_CHANGED, "a.txt")
    assert str(stale[target.id][0]) == "its input a.txt changed"
    result = engine.build([target])
    assert result.reasons[target.id] == "a.txt changed"
    assert engine.value(target) == ["a new head", "four", "five", "six"]
    (folder / "b.txt").write_text("four five six seven\n")
    assert str(Engine(folder, rules).plan([target])[target.id]) == 'words("b.txt") is out of date'
    assert str(Engine(folder, rules).inspect().stale[target.id][0]) == 'it is built on words("b.txt"), which is out of date'
    assert Engine(folder, rules).build([target]).reasons[target.id] == 'words("b.txt") changed'
