"""The structure of a text.md line by line: headings, list items, fences, page markers.

Line patterns, so that the slicer can find structure in Markdown and reStructuredText alike, in
one pass and without parsing the whole document; and the visible text of a heading, for which
the inline Markdown (HTML anchors, entities, emphasis, links, code) is parsed by markdown-it-py.
"""
from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

# "## Title ##": the marks, then the title (group 2), closing marks dropped.
ATX_HEADING = re.compile(r"^(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
ATX_MARK = re.compile(r"^#{1,6}[ \t]+", re.M)  # the marks that open a Markdown heading line
# A reST (or setext) under- or overline: one punctuation character, 3 or more times.
UNDERLINE = re.compile(r"^([!-/:-@\[-`{-~])\1{2,}[ \t\r]*$")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# A list item's marker: "-", "*", "+", "•", "1.", "1)" or reST's "#.", before the item's words.
LIST_ITEM = re.compile(r"^\s*(?:[-*+\u2022]|\d{1,3}[.)]|#\.)\s+(?=\S)")
# The converter's page marker for paged documents (PDF, EPUB...), before each page's text.
PAGE_MARKER = re.compile(r"^\s*<!--\s*page\s+(\d+)\s*-->\s*$", re.I)


def page_marker(number: int) -> str:
    return f"<!-- page {number} -->"


@functools.cache
def _inline_parser() -> MarkdownIt:
    from markdown_it import MarkdownIt  # 20 ms to import: only when a heading has markup

    return MarkdownIt("commonmark")


@functools.lru_cache(maxsize=4096)
def visible_text(title: str) -> str:
    """The words of a heading as a reader sees them: `<a name="retry"></a> 4.2.1 Retry Limits`
    gives "4.2.1 Retry Limits", `&mdash;` gives "—", `**bold**` and `[link](url)` their words,
    `code` its letters. White space collapsed."""
    if not any(ch in title for ch in "<&*_`[\\!"):
        return " ".join(title.split())  # plain words: most headings, and no parse needed
    words: list[str] = []
    for block in _inline_parser().parseInline(title):
        for token in block.children or ():
            if token.type in ("text", "text_special", "code_inline"):
                words.append(token.content)
            elif token.type == "image":
                words.append(token.content)  # its alt text
            elif token.type in ("softbreak", "hardbreak"):
                words.append(" ")
    return " ".join("".join(words).split())


def markdown_table(rows: list[list[str | None]]) -> str:
    """Rows of cells as a Markdown table, the first row its header: rows with no text left out,
    short rows padded, "|" escaped and line breaks as <br> so that a cell stays in its column.
    "" for a table with no text."""
    def cell(value: str | None) -> str:
        return " ".join((value or "").replace("|", "\\|").replace("\n", " <br> ").split()).replace(
            " <br> ", "<br>")

    cells = [[cell(v) for v in row] for row in rows]
    cells = [row for row in cells if any(row)]
    if not cells:
        return ""
    width = max(len(row) for row in cells)
    lines = ["| " + " | ".join(row + [""] * (width - len(row))) + " |" for row in cells]
    lines.insert(1, "|" + "---|" * width)
    return "\n".join(lines)
