"""A failure stays local: once a page of a project failed, the project's indexes, its search
index and its listings of views and specs stopped updating (issue 49, reproduction 8). After 12
lines were inserted into another source, `kbuild context` printed another section's lines under a
heading; a view and a spec added later were listed nowhere; the build repeated the old failure.

Every page above a failure is built from what did build and names what failed; the failure
stays visible there and in the exit code.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import kbuild
from documents import small_store
from model_replies import answer
from openai_server import Reply, ScriptedServer

GARDEN = """# Garden

## Watering

The gardener SHALL water the roses every morning before nine.

Roses need deep watering once a week in summer.

## Pruning

The gardener SHALL prune the apple trees in late winter.

Cut above an outward-facing bud.

## Compost

Compost heaps are turned every two weeks.
"""

FILLER = "".join(f"Mulch note {n}: the beds keep their mulch.\n\n" for n in range(6))  # 12 lines
PRUNING = "The gardener SHALL prune the apple trees in late winter."


def moved(text: str) -> str:
    """GARDEN with 12 lines inserted above its Pruning section."""
    return text.replace("## Pruning", FILLER + "## Pruning")


def build(root: Path) -> tuple[int, str]:
    result = kbuild(root)
    return result.exit_code, result.output


def context(root: Path, question: str) -> list[dict]:
    result = kbuild(root, "context", question, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["sections"]


HEAD = re.compile(r"From \[[^\]]*\]\(([^)]+)\), text\.md lines (\d+)-(\d+):\n\n")


def assert_sections_are_current(root: Path, sections: list[dict]) -> None:
    """Each section printed is what its fact's text.md holds now at the lines it names, and
    the lines it names are its fact's: a fact page names its lines of text.md."""
    for section in sections:
        match = HEAD.search(section["text"])
        assert match, section["text"]
        page, start, end = match.group(1), int(match.group(2)), int(match.group(3))
        lines = (root / page).parent.joinpath("text.md").read_text().split("\n")
        body = section["text"][match.end():].strip("\n")
        assert body == "\n".join(lines[start - 1:end]).strip("\n"), section["key"]


def line_of(root: Path, source: str, words: str) -> int:
    text = (root / f"kb/demo/facts/{source}/text.md").read_text().split("\n")
    return next(n for n, line in enumerate(text, start=1) if words in line)


def assert_the_pruning_section_is_found_where_it_stands(root: Path) -> None:
    sections = context(root, "prune apple trees")
    assert_sections_are_current(root, sections)
    best = sections[0]
    start, end = map(int, HEAD.search(best["text"]).group(2, 3))
    assert PRUNING in best["text"] and start <= line_of(root, "good", PRUNING) <= end, best["text"]
    # the inserted lines are in the search index too: it was made from the text as it is
    hits = json.loads(kbuild(root, "search", "mulch note beds", "--json").output)["hits"]
    assert hits and hits[0]["page"].startswith("kb/demo/facts/good/"), hits


def failure_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("failed: ")]


def offline_store(root: Path) -> None:
    small_store(root, {"good.md": GARDEN, "bad.md": "# Door\n\nThe door SHALL lock at night.\n"}, project="demo")
    code, output = build(root)
    assert code == 0, output


def break_with_a_nul_byte(root: Path) -> str:
    (root / "bad.md").write_bytes(b"# Door\n\nThe door \0SHALL lock at night.\n")
    return "is binary data"


def break_by_a_missing_path(root: Path) -> str:
    sources = root / "kb/demo/sources.yml"
    sources.write_text(sources.read_text().replace("path: bad.md", "path: gone.md"))
    return "gone.md does not exist"


@pytest.mark.parametrize("breaking", [break_with_a_nul_byte, break_by_a_missing_path])
def test_a_failed_source_stalls_nothing_else_of_its_project(tmp_path, breaking):
    offline_store(tmp_path)
    why = breaking(tmp_path)
    code, output = build(tmp_path)
    assert code == 1 and any(why in line for line in failure_lines(output)), output

    (tmp_path / "good.md").write_text(moved(GARDEN))
    for args in (("view", "add", "demo", "pruning", "--about", "pruning the apple trees"),
                 ("spec", "add", "demo", "pruning-rules", "--view", "pruning")):
        assert kbuild(tmp_path, *args).exit_code == 0
    code, output = build(tmp_path)
    # (d) the build still fails, and says what failed
    assert code == 1 and any(why in line for line in failure_lines(output)), output
    assert "Traceback" not in output

    # (a) search and context read the sections as they stand now
    assert_the_pruning_section_is_found_where_it_stands(tmp_path)

    # (b) a view and a spec asked for after the failure are built and listed
    kb = tmp_path / "kb/demo"
    assert PRUNING in (kb / "artifacts/views/pruning.md").read_text()
    assert (kb / "artifacts/specs/pruning-rules.md").is_file()
    assert "- [pruning](pruning.md): " in (kb / "artifacts/views/index.md").read_text()
    assert "- [pruning-rules](pruning-rules.md): " in (kb / "artifacts/specs/index.md").read_text()

    # (c) every index lists every source, and names the one that failed
    project, facts, root = ((kb / "index.md").read_text(), (kb / "facts/index.md").read_text(),
                            (tmp_path / "kb/index.md").read_text())
    assert "- [Garden](facts/good/index.md) (good): " in project
    assert "- bad: not built; run `kbuild` to see why" in project
    assert "[bad](" not in project and "[bad](" not in facts  # nothing links to what is not there as it is
    assert "- [good](good/index.md): Garden, " in facts and "- bad: not built; run `kbuild` to see why" in facts
    assert "- [demo](demo/index.md) (demo, 2 sources; not built: bad; run `kbuild` to see why): " in root

    # a store with a failed page is not clean, and the check says why
    check = kbuild(tmp_path, "check")
    assert check.exit_code == 1 and "which was built while a step it reads failed" in check.output, check.output

    # mended, the source is listed again and the store is whole
    (tmp_path / "bad.md").write_text("# Door\n\nThe door SHALL lock at night.\n")
    sources = tmp_path / "kb/demo/sources.yml"
    sources.write_text(sources.read_text().replace("path: gone.md", "path: bad.md"))
    code, output = build(tmp_path)
    assert code == 0, output
    assert "- [Door](facts/bad/index.md) (bad): " in (kb / "index.md").read_text()
    assert "(demo, 2 sources): " in (tmp_path / "kb/index.md").read_text()
    check = kbuild(tmp_path, "check")
    assert check.exit_code == 0, check.output


MODEL_KBUILDFILE = """
from pathlib import Path
from kbuild.rules import knowledge_base

kb = knowledge_base(Path(__file__).parent, model={settings!r}, floor_tokens=15, cap_tokens=40)
RULES = kb.rules
targets = kb.targets
"""


def test_one_fact_that_fails_leaves_the_rest_of_its_source_listed_and_found(tmp_path):
    """A model whose reading of one fact states a number its source lacks: grounding refuses it
    at every try, and that fact alone fails."""
    lying = {"on": False}

    def reply(request: dict) -> Reply:
        got = answer(request)
        if lying["on"] and isinstance(got, dict) and "Compost heaps" in got.get("rewrite", ""):
            got["rewrite"] = got["rewrite"].replace("every three weeks", "every 21 days")
        return Reply(got if isinstance(got, str) else json.dumps(got))

    with ScriptedServer(reply, string_bounds=True) as server:
        settings = {"base_url": f"{server.url}/v1", "api_key": "t", "model": "m", "validation_retries": 1}
        assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
        (tmp_path / "Kbuildfile.py").write_text(MODEL_KBUILDFILE.format(settings=settings))
        (tmp_path / "good.md").write_text(GARDEN)
        assert kbuild(tmp_path, "add", "demo", "good.md").exit_code == 0
        code, output = build(tmp_path)
        assert code == 0, output
        index = tmp_path / "kb/demo/facts/good/index.md"
        slug = next(page.stem for page in index.parent.glob("*.md")
                    if page.name not in ("index.md", "text.md") and "Compost heaps" in page.read_text())

        lying["on"] = True
        (tmp_path / "good.md").write_text(moved(GARDEN).replace("every two weeks", "every three weeks"))
        code, output = build(tmp_path)
        assert code == 1 and any(f'"good","{slug}"' in line and "says 21" in line
                                 for line in failure_lines(output)), output

        assert "(good; 1 fact not built; run `kbuild` to see why): " in (tmp_path / "kb/demo/index.md").read_text()
        assert "facts; 1 fact not built; run `kbuild` to see why" in (tmp_path / "kb/demo/facts/index.md").read_text()
        listed = index.read_text()
        assert f"- {slug}: not built; run `kbuild` to see why" in listed
        pruning = next(line for line in listed.splitlines() if "prune the apple trees" in line)
        start = line_of(tmp_path, "good", "## Pruning")
        assert f"(lines {start}-" in pruning, pruning  # the other facts, listed where they stand now
        assert_the_pruning_section_is_found_where_it_stands(tmp_path)
        # the failed fact's words are searched as text.md holds them now, never as before
        sections = context(tmp_path, "compost heaps turned")
        assert_sections_are_current(tmp_path, sections)
        assert any("every three weeks" in s["text"] for s in sections), sections
        assert not any("every two weeks" in s["text"] or "21 days" in s["text"] for s in sections)
        assert kbuild(tmp_path, "check").exit_code == 1

        lying["on"] = False
        code, output = build(tmp_path)
        assert code == 0, output
        assert f"- [{slug}]({slug}.md)" in index.read_text()
        assert kbuild(tmp_path, "check").exit_code == 0


def test_sources_that_come_and_go_while_others_fail_build_without_a_crash(tmp_path):
    """Pages built around a source that failed on its first build read a query with no memo:
    removing another source then made garbage collection look that memo up (KeyError)."""
    offline_store(tmp_path)
    break_with_a_nul_byte(tmp_path)
    sources = tmp_path / "kb/demo/sources.yml"
    sources.write_text(sources.read_text() + "  - id: gone\n    path: gone.md\n")
    assert build(tmp_path)[0] == 1
    assert kbuild(tmp_path, "remove", "demo", "bad").exit_code == 0
    code, output = build(tmp_path)
    assert code == 1 and "Traceback" not in output, output
    assert [line for line in failure_lines(output)] == [
        "failed: demo/gone: gone.md does not exist; fix its path in sources.yml or remove it"], output
    project = (tmp_path / "kb/demo/index.md").read_text()
    assert "- [Garden](facts/good/index.md) (good): " in project and "- gone: not built" in project
    assert "bad" not in project and not (tmp_path / "kb/demo/facts/bad").exists()
