"""Every link of README.md and docs/ leads somewhere: the README sends a newcomer to docs/ pages
for everything it leaves out, so a page renamed or a heading reworded must not strand them."""
from __future__ import annotations

import re
from pathlib import Path

from markdown_it import MarkdownIt

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _inline_tokens(text: str):
    for token in MarkdownIt("commonmark").enable("table").parse(text):
        yield from token.children or []


def links(page: Path) -> list[str]:
    return [token.attrs["href"] for token in _inline_tokens(page.read_text()) if token.type == "link_open"]


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    tokens = MarkdownIt("commonmark").enable("table").parse(page.read_text())
    found: set[str] = set()
    for heading, inline in zip(tokens, tokens[1:]):
        if heading.type == "heading_open":
            words = "".join(child.content for child in inline.children or [] if child.type in ("text", "code_inline"))
            slug = re.sub(r"[^\w\- ]", "", words.strip().lower()).replace(" ", "-")
            found.add(slug)
    return found


def broken(page: Path) -> list[str]:
    problems = []
    for href in links(page):
        if re.match(r"[a-z]+:", href):  # https:, mailto: ...: not this repository's
            continue
        path, _, anchor = href.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            problems.append(f"{href}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            problems.append(f"{href}: no heading with that anchor")
    return problems


def test_every_link_of_the_readme_and_docs_resolves():
    assert {p.relative_to(REPO).as_posix(): b for p in PAGES if (b := broken(p))} == {}


def test_the_check_finds_a_missing_page_and_a_missing_heading(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## A heading: with `code`\n")
    page.write_text("[ok](other.md#a-heading-with-code) [gone](nowhere.md) [bad](other.md#nope) "
                    "[web](https://example.com/x.md)\n")
    assert broken(page) == ["nowhere.md: no such file", "other.md#nope: no heading with that anchor"]


def test_the_readme_stays_short_with_its_contents_at_the_top():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 320
    contents = readme.split("**Contents:**", 1)[1].split("\n\n", 1)[0]
    prose = re.sub(r"^```.*?^```", "", readme, flags=re.M | re.S)  # a page shown as an example is no section
    headings = re.findall(r"^## (.+)$", prose, re.M)
    assert len(re.findall(r"\]\(#", contents)) == len(headings)
