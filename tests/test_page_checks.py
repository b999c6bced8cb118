"""Link and secret verdicts recorded with a page's hash: an unchanged page is not scanned again by
`kbuild check`, a changed one is, and whether a link's target exists is looked up every time."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbuild.checks import store as check
from kbuild.checks.links import broken_links_in, link_targets, missing_links
from kbuild.checks.pages import NOTE, links_of, note_page, recorded, verdict
from kbuild.engine import Engine, rule
from kbuild.engine.files import FileHasher

KEY = "AKIA" + "IOSFODNN7EXAMPLE"  # the shape of an AWS access key id, split so no scanner flags this file


@rule
async def page(ctx, name):
    text = ctx.read_text(f"src/{name}.txt")
    body = f"# {name}\n\n{text}\n\nSee [the index](index.md) and [the other](other.md).\n"
    ctx.write(f"kb/{name}.md", body)
    note_page(ctx, f"kb/{name}.md", body, ctx.root / "kb")
    return len(body)


@rule
async def index(ctx):
    names = await ctx.query_all([page("a"), page("b")])
    ctx.write("kb/index.md", "# Index\n\n[a](a.md) [b](b.md)\n")
    ctx.write("kb/other.md", "# Other\n")
    note_page(ctx, "kb/index.md", "# Index\n\n[a](a.md) [b](b.md)\n", ctx.root / "kb")
    note_page(ctx, "kb/other.md", "# Other\n", ctx.root / "kb")
    return names


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A store built, then without its .kbuild/: the lock alone says what was built."""
    for name in ("a", "b"):
        (tmp_path / "src").mkdir(exist_ok=True)
        (tmp_path / "src" / f"{name}.txt").write_text(f"Words of {name}.")
    assert Engine(tmp_path, [page, index]).build([index()]).ok
    shutil.rmtree(tmp_path / ".kbuild")
    return tmp_path


def findings(root: Path) -> list[tuple[str, str]]:
    return [(f.page, f.reason) for f in check.check_store(Engine(root, [page, index]), None)]


def test_the_build_records_a_verdict_per_page_with_its_hash(clone: Path) -> None:
    import json

    entries = json.loads((clone / "kbuild.lock").read_text())["queries"]
    notes = next(e["notes"] for e in entries.values() if "kb/a.md" in e["outputs"])
    data = (clone / "kb/a.md").read_bytes()
    assert notes[NOTE]["kb/a.md"] == verdict("kb/a.md", data, clone, clone / "kb")
    assert recorded(notes, "kb/a.md", entries[next(q for q, e in entries.items() if "kb/a.md" in e["outputs"])]
                    ["outputs"]["kb/a.md"]) is not None


def test_unchanged_pages_are_read_once_and_not_scanned_again(clone: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[str] = []
    real_read = FileHasher.read

    def counting_read(self: FileHasher, key: str) -> tuple[bytes, str]:
        reads.append(key)
        return real_read(self, key)

    def no_scan(*args: object, **kwargs: object) -> object:
        raise AssertionError("an unchanged page was scanned again")

    monkeypatch.setattr(FileHasher, "read", counting_read)
    monkeypatch.setattr(check, "page_verdict", no_scan)
    assert findings(clone) == []
    pages = sorted(p for p in reads if p.endswith(".md"))
    assert pages == ["kb/a.md", "kb/b.md", "kb/index.md", "kb/other.md"]  # each once


def test_a_page_changed_by_hand_is_scanned_again_and_fails(clone: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scanned: list[str] = []
    real = check.page_verdict

    def spy(path: str, *args: object, **kwargs: object) -> object:
        scanned.append(path)
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(check, "page_verdict", spy)
    page_a = clone / "kb/a.md"
    page_a.write_text(page_a.read_text() + f"\naws_access_key_id = {KEY}\n[gone](gone.md)\n")
    found = findings(clone)
    assert scanned == ["kb/a.md"]
    assert ("kb/a.md", "edited by hand: its content differs from the lock") in found
    assert ("kb/a.md", "holds what looks like an AWS access key") in found
    assert ("kb/a.md", "links to a missing file: gone.md") in found


def test_a_recorded_verdict_still_looks_up_its_links_targets(clone: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(check, "page_verdict", lambda *a, **k: pytest.fail("an unchanged page was scanned again"))
    (clone / "kb/other.md").unlink()
    found = findings(clone)
    assert ("kb/a.md", "links to a missing file: other.md") in found
    assert ("kb/b.md", "links to a missing file: other.md") in found


def test_a_verdict_of_another_hash_or_shape_is_none(clone: Path) -> None:
    data = b"# A\n\n[x](../../etc/passwd) and [y](y.md)\n"
    good = verdict("kb/a.md", data, clone, clone / "kb")
    assert good["links"] == [["../../etc/passwd", None], ["y.md", "kb/y.md"]]
    notes = {NOTE: {"kb/a.md": good}}
    assert recorded(notes, "kb/a.md", good["page"]) == good
    assert recorded(notes, "kb/a.md", "another hash") is None
    forged = {**good, "links": [["y.md", "../outside.md"]]}
    assert recorded({NOTE: {"kb/a.md": forged}}, "kb/a.md", good["page"]) is None
    assert recorded({NOTE: "not a mapping"}, "kb/a.md", good["page"]) is None
    # a file the verdict names outside the store being checked leads outside it
    assert links_of(good, clone, clone / "kb") == [("../../etc/passwd", None), ("y.md", str(clone / "kb/y.md"))]
    assert links_of(good, clone, clone / "other") == [("../../etc/passwd", None), ("y.md", None)]


def test_scanning_on_two_cores_finds_what_one_does(clone: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    contents = {f"kb/p{n}.md": (f"# P{n}\n[gone](gone{n}.md)\n" + (f"key = {KEY}\n" if n % 3 == 0 else "")).encode()
                for n in range(40)}
    chosen = [(path, False) for path in sorted(contents)]
    one = check.scan(chosen, contents, clone, clone / "kb")
    monkeypatch.setattr(check, "PARALLEL_BYTES", 0)
    assert check.scan(chosen, contents, clone, clone / "kb") == one
    assert one["kb/p3.md"]["secrets"] and not one["kb/p1.md"]["secrets"]


PAGES = [
    "# T\n\n[a](a.md) [up](../x.md) [out](../../../etc/passwd) [web](https://example.com/x) [anchor](#part)\n",
    "[q](a.md?x=1#y) [sp](<with space.md>) [pct](b%20c.md) ![img](img/p.png) [mail](mailto:a@b.c) [s](//host/p)\n",
    "`[code](gone.md)`\n\n```\n[fenced](gone.md)\n```\n[real](gone.md) [root](.) [self](./)\n",
    "## Original\n\n[quoted](https://example.com/q) [call](handlers[kind](event))\n\n## Rewritten\n\n"
    "[again](https://example.com/q) [other](https://example.com/other) [x](c:/windows)\n",
]


@pytest.mark.parametrize("text", PAGES)
@pytest.mark.parametrize("code", [False, True])
def test_link_targets_and_missing_links_say_what_broken_links_in_says(tmp_path: Path, text: str, code: bool) -> None:
    store = tmp_path / "kb"
    (store / "f" / "img").mkdir(parents=True)
    for name in ("f/a.md", "f/b c.md", "f/img/p.png", "x.md"):
        (store / name).write_text("x")
    for page in (store / "f" / "p.md", store / "f" / "text.md"):
        assert missing_links(link_targets(text, page, store, code=code)) == broken_links_in(text, page, store, code=code)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(["kb", "p", "x.md", "..", "."]), max_size=5))
def test_a_verdict_names_a_link_target_as_relpath_does(parts):
    import os

    from kbuild.checks.pages import _relative

    top = "/work/store"
    resolved = os.path.normpath(os.path.join(top, *parts))
    assert _relative(resolved, top) == os.path.relpath(resolved, top)
