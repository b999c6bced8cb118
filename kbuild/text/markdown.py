"""The structure of a text.md line by line: headings, list items, fences, page markers.

Line patterns, so that the slicer can find structure in Markdown and reStructuredText alike, in
one pass and without parsing the whole document; the parser (markdown-it-py) for what lines
cannot tell: the visible text of a heading or a sentence (HTML anchors, entities, emphasis,
links, code); and text escaped so that it stays text when written into Markdown.
"""
from __future__ import annotations

import functools
import re
from collections.abc import Collection
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

# "## Title ##": the marks, then the title (group 2), closing marks dropped.
ATX_HEADING = re.compile(r"^(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
ATX_MARK = re.compile(r"^#{1,6}[ \t]+", re.M)  # the marks that open a Markdown heading line
# A reST (or setext) under- or overline: one punctuation character, 3 or more times.
UNDERLINE = re.compile(r"^([!-/:-@\[-`{-~])\1{2,}[ \t\r]*$")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# A fenced block, to its closing fence: the opening run again, with nothing after it (CommonMark:
# "```html" opens a block, it never closes one); its body is the group "body" (2).
FENCED = r"^ {0,3}(?P<fence>`{3,}|~{3,})[^\n]*\n(?P<body>.*?)^ {0,3}(?P=fence)[ \t]*$"
FENCED_BLOCK = re.compile(FENCED, re.MULTILINE | re.DOTALL)
# A list item's marker: "-", "*", "+", "•", "1.", "1)" or reST's "#.", before the item's words.
LIST_ITEM = re.compile(r"^\s*(?:[-*+\u2022]|\d{1,3}[.)]|#\.)\s+(?=\S)")
# The converter's page marker for paged documents (PDF, EPUB...), before each page's text.
PAGE_MARKER = re.compile(r"^\s*<!--\s*page\s+(\d+)\s*-->\s*$", re.I)


def page_marker(number: int) -> str:
    return f"<!-- page {number} -->"


def without_page_markers(text: str) -> str:
    """`text` without the page markers the converter wrote into it (kbuild's own structure, which
    a model must not read as the document's words nor copy into a page)."""
    if "<!--" not in text:
        return text
    return "\n".join(line for line in text.split("\n") if not PAGE_MARKER.match(line))


@functools.cache
def parser() -> MarkdownIt:
    """CommonMark with GitHub's tables and strikethrough: what the documents people keep are
    written in (and what GitHub, MkDocs and most viewers show)."""
    from markdown_it import MarkdownIt  # 20 ms to import: only when a text has markup

    md = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    # A link to `javascript:` or `data:` is read as the link it is written as (markdown-it would read
    # it as text, which a laxer viewer may still link): kbuild writes such a link as its words.
    md.validateLink = lambda url: True
    return md


@functools.lru_cache(maxsize=4096)
def visible_text(title: str) -> str:
    """The words of a heading as a reader sees them: `<a name="retry"></a> 4.2.1 Retry Limits`
    gives "4.2.1 Retry Limits", `&mdash;` gives "—", `**bold**` and `[link](url)` their words,
    `code` its letters. White space collapsed. Kbuild writes these words into pages (index lines,
    breadcrumbs): a tag among them (`<script>`, quoted as code in the heading) is quoted as code,
    and brackets that would make a link are escaped, so that they stay words there too."""
    if not any(ch in title for ch in "<&*_`[\\!"):
        return " ".join(title.split())  # plain words: most headings, and no parse needed
    words: list[str] = []
    for block in parser().parseInline(title):
        for token in block.children or ():
            if token.type in ("text", "text_special", "code_inline"):
                words.append(token.content)
            elif token.type == "image":
                words.append(token.content)  # its alt text
            elif token.type in ("softbreak", "hardbreak"):
                words.append(" ")
    seen = quoted_tags(" ".join("".join(words).split()))
    return seen.replace("[", "\\[").replace("]", "\\]") if "](" in seen else seen


def markdown_table(rows: list[list[str | None]]) -> str:
    """Rows of cells as a Markdown table, the first row its header: rows with no text left out,
    short rows padded, "|" escaped and a cell's lines joined, so that a cell stays in its column
    (a `<br>` would keep its lines, as HTML in a page). "" for a table with no text."""
    def cell(value: str | None) -> str:
        return " ".join((value or "").replace("|", "\\|").split())

    cells = [[cell(v) for v in row] for row in rows]
    cells = [row for row in cells if any(row)]
    if not cells:
        return ""
    width = max(len(row) for row in cells)
    lines = ["| " + " | ".join(row + [""] * (width - len(row))) + " |" for row in cells]
    lines.insert(1, "|" + "---|" * width)
    return "\n".join(lines)


# Text that Markdown would read as markup: an HTML tag, comment or autolink (`<script>`,
# `</div>`, `<!--`, `<https://x>`), an entity, or a backslash before punctuation.
TAG_LIKE = re.compile(r"<[A-Za-z/!?][^<>\n]*>")
ENTITY_LIKE = re.compile(r"&(?=#?[A-Za-z0-9]+;)")
_EMPHASIS_MARK = re.compile(r"\*|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")  # `snake_case` is no emphasis
_BACKSLASH = re.compile(r"\\(?=[!-/:-@\[-`{-~])")
_LINE_START = re.compile(r"^(\s*)(#{1,6}(?=\s|$)|>|[-+](?=\s)|(\d{1,9})([.)])(?=\s|$)|={3,}\s*$)")


def code_span(text: str) -> str:
    """`text` as inline code, fenced by more backticks than it holds in a row."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith(("`", " ")) or text.endswith(("`", " ")) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


_CODE = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)")


def shortened(text: str, limit: int) -> str:
    """Markdown text of at most `limit` characters, cut after a sentence when one ends past a third
    of it, else after a word, never inside code (a code span cut in two leaves its backtick
    open, and what it quoted, `<script>`, live): a line's worth of a summary."""
    if len(text) <= limit:
        return text
    inside = [(m.start(), m.end()) for m in _CODE.finditer(text[:limit + 200])]

    def outside(at: int) -> bool:
        return not any(start < at < end for start, end in inside)

    ends = [m.end() for m in re.finditer(r"[.!?](?= )", text[:limit]) if outside(m.end())]
    if ends and ends[-1] > limit // 3:
        return text[:ends[-1]]
    spaces = [m.start() for m in re.finditer(r" ", text[:limit]) if outside(m.start())]
    return (text[:spaces[-1]] if spaces else text[:limit - 1]).rstrip() + "…"


def quoted_tags(text: str) -> str:
    """Text whose words may quote HTML (a PDF's text, a table cell), with each tag written as code,
    so that it shows as the words it is rather than act as markup in a page."""
    return TAG_LIKE.sub(lambda m: code_span(m.group(0)), text) if "<" in text else text


def escape_text(text: str, line_start: bool = False, marks: bool = True) -> str:
    """Plain text as Markdown that shows it as it is: markup characters escaped, and what would
    read as an HTML tag (`<script>` quoted in a sentence) written as code, so that no page holds
    live markup. Only what Markdown would take for markup is touched: "x < y", "snake_case" and
    "a & b" stay as they are. `line_start`: the text opens a line, where "# ", "> ", "- " or "1. "
    would start a block. `marks=False` leaves `*` and `_` as they are, for a caller that
    checks the result reads as words (kbuild.text.inline)."""
    parts: list[str] = []
    at = 0
    for tag in TAG_LIKE.finditer(text):
        parts += [_escape_plain(text[at:tag.start()], marks), code_span(tag.group(0))]
        at = tag.end()
    parts.append(_escape_plain(text[at:], marks))
    escaped = "".join(parts)
    if line_start:
        escaped = _LINE_START.sub(lambda m: m.group(1) + ("\\" + m.group(2) if not m.group(3)
                                                          else m.group(3) + "\\" + m.group(4)), escaped, count=1)
    return escaped


def _escape_plain(text: str, marks: bool) -> str:
    text = _BACKSLASH.sub(r"\\\\", text)
    text = text.replace("`", "\\`")
    if marks:
        text = _EMPHASIS_MARK.sub(lambda m: "\\" + m.group(0), text)
    # a link's brackets, or a bracket left open or closed here, that could pair with one in the
    # text beside it (a code span or a tag between them: `[` `f[T](x)` would read as a link)
    if "](" in text or "][" in text or text.count("[") != text.count("]"):
        text = text.replace("[", "\\[").replace("]", "\\]")
    return ENTITY_LIKE.sub("\\&", text)


def live_html(text: str) -> list[str]:
    """The HTML a Markdown text holds outside code, as the parser reads it: each tag or block
    that a viewer would render as markup rather than show as words. The page markers of a paged
    document's text.md are kbuild's own structure, not the document's markup."""
    if "<" not in text:
        return []
    found: list[str] = []
    for token in parser().parse(text):
        if token.type == "html_block" and not all(PAGE_MARKER.match(line) for line in token.content.strip().split("\n")):
            found.append(token.content.strip())
        found += [child.content for child in token.children or () if child.type == "html_inline"]
    return found


# A link or image: its words, its target and optional title; or code, which holds no links.
# The link part matches what kbuild.checks.links reads as a link.
LINK_OR_CODE = re.compile(
    rf"(?P<code>{FENCED}|(?<!\\)`[^`\n]*`)"
    r"|(?<!\\)!?(?<!\\)\[(?P<words>(?:[^\]\\]|\\.)*)\]\(\s*<?(?P<target>[^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)",
    re.S | re.M,
)


def without_links(text: str, targets: Collection[str] | None = None) -> str:
    """`text` with each link and image outside code (or each that leads to one of `targets`)
    replaced by its words: for a line that will stand in pages at other depths of the store (a
    summary), where no relative link can hold, or for a link that leads nowhere."""
    def words(match: re.Match[str]) -> str:
        if match.group("code") or (targets is not None and match.group("target") not in targets):
            return match.group(0)
        return match.group("words")

    return LINK_OR_CODE.sub(words, text)
