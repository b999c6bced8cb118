"""A Markdown document as clean Markdown: what a reader of the rendered document sees, with no
live HTML, by the parser (markdown-it-py), not by patterns over lines.

Documents people keep carry HTML (a table in `<table>`, `<br>`, `<a name>` anchors, a README's
`<p align="center"><img alt>`), entities, reference-style links and links to their own
`#anchors`. Each becomes its Markdown meaning:

- an HTML block is rendered to Markdown (kbuild.convert.html): tables as Markdown tables, lists
  as lists; one whose table or list goes on past a blank line (its cells hold Markdown) is
  rendered with the blocks up to where it closes. A wrapper (`<div>`, `<details>`) goes, its
  words stay. Comments go.
- inline HTML: `<b>`/`<i>` as emphasis, `<a href>` as a link, `<a name>` dropped, `<br>` a line
  break, `<img alt>` its alt text, `<code>` code; any other tag (`<script>` quoted in a sentence)
  is written as code, so that it shows as the words it is and never acts as markup.
- entities decoded; autolinks and reference-style links written inline (their definitions
  dropped); a link to an `#anchor` in the document reduced to its words (a fact page holds a part
  of the document, where the anchor leads nowhere).
- what a site generator reads and a reader never sees (Jekyll, Hugo, MkDocs, kramdown, Pandoc):
  the front matter (its `title` becomes the heading when the document has none), a heading's
  `{#id}`, kramdown's attribute lists (`{:.class}` on a line of its own or after a link), and a
  line that is only a Liquid tag (`{% include toc.html %}`) or a Hugo shortcode. Left in, they
  were words of the text: "layout default title" in the first fact, "SEC3" in a heading and its
  page's name.
- a box keeps its words under its title (or its kind) in bold: MkDocs' admonitions and content
  tabs (`!!! warning "Title"`, `??? note`, `=== "Tab"`; their bodies are indented by four, which
  CommonMark reads as code, so their words were code to every reader of text.md), fenced divs
  (Docusaurus' `:::tip Title`, Pandoc's `::: warning`) and GitHub's alerts (`> [!WARNING]`).
- a footnote's mark goes from its sentence ("hashed[^1]."), and its words stand as a note
  ("Note 1: ..."): CommonMark knows neither, and both were words.
- a table's rows given the pipes at their ends that GFM lets a writer leave out, so that every
  reader of text.md knows a row by its first character.

Code (fenced and indented blocks, code spans) is never touched. Only the lines of blocks that
hold one of these change; every other line is the source's, byte for byte, and a block rendered
shorter than it was is padded with empty lines, so that line N of text.md is line N of the source
wherever a rendering is not longer than its source.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Any

from ..text.inline import UNSAFE_SCHEMES, written
from ..text.markdown import ATX_HEADING, ENTITY_LIKE, FENCE, parser
from .html import html_to_markdown

if TYPE_CHECKING:
    from markdown_it.token import Token

# Elements whose parts must be rendered together: a table, list or block of code that a blank
# line does not end in HTML (its cells may hold Markdown paragraphs).
CODE_SPAN = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)")
STRUCTURAL = {"table", "thead", "tbody", "tfoot", "tr", "td", "th", "ul", "ol", "li", "dl", "dt", "dd", "pre"}


def clean_markdown(source: str, modules: bool = False) -> str:
    """`source` (a Markdown document, newlines normalised) as clean Markdown; see the module.
    `modules`: the document is MDX, whose `import` and `export` lines are JavaScript."""
    source = _without_site_markup(source, modules)
    if not any(mark in source for mark in "<&[|"):
        return source  # no tag, entity, link or table: nothing to do, and no parse
    env: dict[str, Any] = {}
    tokens = parser().parse(source, env)
    lines = source.split("\n")
    edits = _Edits(lines)
    for definition in env.get("references", {}).values():
        start, end = definition["map"]
        edits.replace(start, end, [""] * (end - start))  # each link is written inline where it stands
    skip_to = -1  # the line where an HTML block rendered with the blocks after it ends
    for n, token in enumerate(tokens):
        if token.map and token.map[0] < skip_to:
            continue
        if token.type == "html_block":
            skip_to = _render_html_block(tokens, n, lines, edits)
        elif token.type == "table_open" and token.map:
            _with_outer_pipes(token, lines, edits)
        elif token.type == "tr_open" and token.map:
            _render_table_row(tokens, n, lines, edits)
        elif token.type == "inline" and token.map and _needs_rendering(token) and not _in_table(tokens, n):
            _render_inline_block(tokens[n - 1], token, lines, edits)
    return edits.result()


@dataclass
class _Edits:
    """Replacements of line ranges of the source, applied at the end in order."""

    lines: list[str]
    ranges: dict[int, tuple[int, list[str]]] = field(default_factory=dict)

    def replace(self, start: int, end: int, new: list[str]) -> None:
        self.ranges[start] = (end, new)

    def result(self) -> str:
        out: list[str] = []
        at = 0
        for start in sorted(self.ranges):
            if start < at:
                continue  # inside a range already replaced
            end, new = self.ranges[start]
            out += self.lines[at:start]
            out += new + [""] * (end - start - len(new))  # shorter: padded, so later lines keep their numbers
            at = end
        out += self.lines[at:]
        return "\n".join(out)


# -- what a site generator reads -----------------------------------------------------------

# YAML (---) or TOML (+++) front matter: the first line, "key: value" lines, the closing line
FRONT_MATTER = re.compile(r"\A(---|\+\+\+)[ \t]*\n((?:[A-Za-z_][\w-]*[ \t]*[:=][^\n]*\n|[ \t#-][^\n]*\n|\n)*?)"
                          r"(?:\1|\.\.\.)[ \t]*(?:\n|\Z)")
FRONT_TITLE = re.compile(r"^title[ \t]*[:=][ \t]*[\"']?(.+?)[\"']?[ \t]*$", re.MULTILINE)
# An attribute list: kramdown's "{:.class}", "{: #id}", "{:name="x"}"; Pandoc's and MkDocs'
# "{#id .class}". "{::nomarkdown}" and its kin are kramdown's extensions, not attributes.
ATTRIBUTES = r"\{(?::(?!:)|[#.])[^{}\n]*\}"
ATTRIBUTES_AFTER_HEADING = re.compile(rf"^(#{{1,6}}[ \t].*?)[ \t]*{ATTRIBUTES}[ \t]*$")
ATTRIBUTES_AFTER_TEXT = re.compile(rf"[ \t]*{ATTRIBUTES}[ \t]*$")  # a setext heading's line
ATTRIBUTES_ALONE = re.compile(rf"^[ \t]*{ATTRIBUTES}[ \t]*$")
ATTRIBUTES_AFTER_SPAN = re.compile(r"(?<=[)\]*_`])\{:(?!:)[^{}\n]*\}")  # "[Table 1](#t){:name="t"}"
TEMPLATE_TAG_ALONE = re.compile(r"^[ \t]*(?:\{%.*%\}|\{\{[<%].*[>%]\}\})[ \t]*$")  # Liquid's, Hugo's shortcodes
SETEXT_UNDERLINE = re.compile(r"^ {0,3}(?:=+|-+)[ \t]*$")
# MkDocs' (Python-Markdown's) admonitions and content tabs: '!!! warning "Title"', '??? note',
# '=== "Tab"', over a body indented by four, which CommonMark would read as code
ADMONITION = re.compile(r'^(?P<indent>[ \t]*)(?:(?:!!!|\?\?\?\+?)[ \t]+(?P<kind>[\w-]+)(?:[ \t]+"(?P<title>[^"]*)")?'
                        r'|===\+?[ \t]+"(?P<tab>[^"]*)")[ \t]*$')
# a fenced div (Docusaurus' ":::tip Title", ":::note[Title]", Pandoc's "::: warning", "::: {.aside}") and its end
DIV_OPENING = re.compile(r"^ {0,3}:{3,}[ \t]*(?:\{[^{}]*\}|(?P<kind>[A-Za-z][\w-]*))?(?:\[(?P<bracketed>[^\]]*)\])?"
                         r"[ \t]*(?P<title>[^{}:\n][^{}\n]*?)?[ \t]*:*[ \t]*$")
DIV_CLOSING = re.compile(r"^ {0,3}:{3,}[ \t]*$")
# GitHub's alert: "> [!WARNING]" on a line of its own, at the head of a quote
ALERT = re.compile(r"^(?P<marks>[ \t]*(?:>[ \t]?)+)\[!(?P<kind>NOTE|TIP|IMPORTANT|WARNING|CAUTION)\][ \t]*$", re.IGNORECASE)
# a footnote (GFM, kramdown, Pandoc): its mark in a sentence, "hashed[^1]", and its words, "[^1]: ..."
FOOTNOTE_MARK = re.compile(r"\[\^([^\]\s]+)\](?!:)")
FOOTNOTE = re.compile(r"^\[\^(?P<label>[^\]\s]+)\]:[ \t]*(?P<words>.*)$")
# (a content tab's "===" only with its title: a setext heading's underline asks for no pass)
MAY_HOLD_SITE_MARKUP = re.compile(r'\{[:#.%<]|\A(?:---|\+\+\+)|^[ \t]*(?:!!!|\?\?\?|===\+?[ \t]+"|:::)|\[[!^][^\]\s]+\]',
                                  re.MULTILINE)


def _label(title: str | None, kind: str | None) -> str:
    """What a box's opening line says to a reader: its title, else its kind ("**Warning:**")."""
    words = (title or "").strip() or (kind or "").replace("-", " ").strip().capitalize()
    return f"**{words.rstrip(':')}:**" if words else ""


def _without_site_markup(source: str, modules: bool = False) -> str:
    """`source` without what a site generator or GitHub's renderer reads and a reader never sees
    (see the module), each line where it was: the lines of what is dropped are left empty, a box
    (an admonition, a fenced div, an alert) keeps its words under its title or kind in bold. Code
    is never touched."""
    if not modules and not MAY_HOLD_SITE_MARKUP.search(source):
        return source
    lines = source.split("\n")
    if modules:
        _without_modules(lines)
    front = FRONT_MATTER.match(source)
    if front:
        count = front.group(0).rstrip("\n").count("\n") + 1
        lines[:count] = [""] * count
        title = FRONT_TITLE.search(front.group(2))
        if title and not any(ATX_HEADING.match(line) for line in lines):
            lines[0] = "# " + title.group(1)
    _open_admonitions(lines)
    code: set[int] = set()
    for token in parser().parse("\n".join(lines)):
        if token.type in ("fence", "code_block", "html_block") and token.map:
            code.update(range(*token.map))
    # a footnote's mark is one whose words the document gives: "[^a-z]" in a sentence is no mark
    noted = {m.group("label") for n, line in enumerate(lines) if n not in code and (m := FOOTNOTE.match(line))}

    def unmarked(words: str) -> str:
        return FOOTNOTE_MARK.sub(lambda m: "" if m.group(1) in noted else m.group(0), words) if noted else words

    for n, line in enumerate(lines):
        if n in code:
            continue
        if (opening := DIV_OPENING.match(line)) and not DIV_CLOSING.match(line):
            lines[n] = _label(opening.group("bracketed") or opening.group("title"), opening.group("kind"))
        elif DIV_CLOSING.match(line):
            lines[n] = ""
        elif alert := ALERT.match(line):
            lines[n] = alert.group("marks") + _label(None, alert.group("kind"))
        elif footnote := FOOTNOTE.match(line):
            lines[n] = f"Note {footnote.group('label')}: " + _outside_code_spans(footnote.group("words"), unmarked)
        elif "{" not in line:
            if "[^" in line:
                lines[n] = _outside_code_spans(line, unmarked)
            continue
        elif ATTRIBUTES_ALONE.match(line) or TEMPLATE_TAG_ALONE.match(line):
            lines[n] = ""
        elif ATX_HEADING.match(line):
            lines[n] = ATTRIBUTES_AFTER_HEADING.sub(r"\1", line)
        elif n + 1 < len(lines) and SETEXT_UNDERLINE.match(lines[n + 1]) and line.strip():
            lines[n] = ATTRIBUTES_AFTER_TEXT.sub("", line)
        else:
            lines[n] = _outside_code_spans(line, lambda words: unmarked(ATTRIBUTES_AFTER_SPAN.sub("", words)))
    return "\n".join(lines)


# MDX's lines of JavaScript: "import Tabs from '@theme/Tabs';", "export const meta = {" (to its "}")
MODULE_LINE = re.compile(r"""^(?:import\s+(?:[\w*{][^;]*?\s+from\s+)?["'][^"']+["'];?"""
                         r"|export\s+(?:default|const|let|var|function|async|class|\{).*)\s*$")
MODULE_END = re.compile(r"^\s*[}\])][;,)]*\s*$")


def _without_modules(lines: list[str]) -> None:
    """MDX's `import` and `export` lines (and an export's block, to its closing line) left empty,
    in place, outside fenced code."""
    block = False
    for n in _outside_fences(lines):
        if block:
            block = not MODULE_END.match(lines[n])
            lines[n] = ""
        elif MODULE_LINE.match(lines[n]):
            block = lines[n].rstrip().endswith(("{", "[", "("))
            lines[n] = ""


def _open_admonitions(lines: list[str]) -> None:
    """Each admonition's opening line as its title in bold, and its body taken out of the indent
    that would make it code, in place. Outside fenced code; a box in a box opens in turn."""
    for n in _outside_fences(lines):
        box = ADMONITION.match(lines[n])
        if not box:
            continue
        indent = box.group("indent")
        lines[n] = indent + _label(box.group("tab") if box.group("tab") is not None else box.group("title"),
                                   box.group("kind"))
        body = indent + "    "
        for k in range(n + 1, len(lines)):
            if lines[k].startswith(body):
                lines[k] = indent + lines[k][len(body):]
            elif lines[k].startswith(indent + "\t"):
                lines[k] = indent + lines[k][len(indent) + 1:]
            elif lines[k].strip():
                break


def _outside_fences(lines: list[str]) -> Iterator[int]:
    """The numbers of the lines outside fenced code, each read as it is when reached: a caller
    may change the lines after the one it was given (an admonition's body, taken out of its
    indent, may open a fence)."""
    fence = ""
    for n, line in enumerate(lines):
        mark = FENCE.match(line)
        if fence:
            if mark and mark.group(1)[0] == fence[0] and len(mark.group(1)) >= len(fence) and not line[mark.end():].strip():
                fence = ""  # CommonMark: the opening run again (or longer), with nothing after it
        elif mark:
            fence = mark.group(1)
        else:
            yield n


def _outside_code_spans(line: str, change: Callable[[str], str]) -> str:
    out, at = [], 0
    for span in CODE_SPAN.finditer(line):
        out += [change(line[at:span.start()]), span.group(0)]
        at = span.end()
    return "".join(out) + change(line[at:])


# -- HTML blocks -----------------------------------------------------------------------------


class _OpenElements(HTMLParser):
    """The structural elements left open after some HTML (a <table> whose cells go on)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []

    def set_cdata_mode(self, elem: str) -> None:
        pass  # a <script> in a Markdown document's HTML is quoted, not run to its end tag (kbuild.convert.html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in STRUCTURAL:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self.open:
            while self.open and self.open.pop() != tag:
                pass


def _render_html_block(tokens: list[Token], n: int, lines: list[str], edits: _Edits) -> int:
    """Render the HTML block tokens[n] (with the blocks after it up to where its table or list
    closes), and return the line where what was rendered ends."""
    block = tokens[n]
    start, end = block.map  # type: ignore[misc]
    if block.level:  # inside a list item or a quote: rendered alone, under its container's marks
        _replace_content(lines, start, end, block.content.rstrip("\n").split("\n"),
                         _fragment(block.content).split("\n"), edits)
        return end
    elements = _OpenElements()
    elements.feed(block.content)
    following = n + 1
    while elements.open and following < len(tokens):
        token = tokens[following]
        following += 1
        if token.level or not token.map or token.nesting == -1:
            continue
        if token.type in ("heading_open", "fence", "code_block"):
            break  # a table does not hold a heading or code of Markdown: the HTML was never closed
        elements.feed(CODE_SPAN.sub("", "\n".join(lines[token.map[0]:token.map[1]])))  # a tag in code is code
        end = token.map[1]
    rendered = _fragment("\n".join(lines[start:end]))
    edits.replace(start, end, rendered.split("\n") if rendered else [])
    return end


def _fragment(html: str) -> str:
    """HTML of a Markdown document as Markdown: the Markdown between its tags (links to anchors,
    entities) cleaned as the rest of the document is."""
    return clean_markdown(html_to_markdown(html, fragment=True))


# -- tables and inline text ------------------------------------------------------------------


def _in_table(tokens: list[Token], n: int) -> bool:
    return tokens[n].level >= 3 and tokens[n - 1].type in ("th_open", "td_open")


def _with_outer_pipes(table: Token, lines: list[str], edits: _Edits) -> None:
    """GFM's table may leave out the pipes at a row's ends ("a | b" over "--|--"): each row is
    given them, so that every reader of text.md knows a row by its first character, as it knows
    a heading by its "#". A line with no pipe at all, which GFM reads as a row of one cell when it
    follows a table ("Estimate Totals" over the next table, a paragraph with no blank line
    before it), is left as written: it reads as the words it is."""
    start, end = table.map  # type: ignore[misc]
    for row in range(start, end):
        line = lines[row]
        words = line.strip()
        if words and "|" in words and not (words.startswith("|") and words.endswith("|") and not words.endswith("\\|")):
            indent = line[:len(line) - len(line.lstrip())]
            edits.replace(row, row + 1, [indent + ("" if words.startswith("|") else "| ") + words
                                         + ("" if words.endswith("|") and not words.endswith("\\|") else " |")])


def _render_table_row(tokens: list[Token], n: int, lines: list[str], edits: _Edits) -> None:
    """A row of a Markdown table, written again when one of its cells holds HTML or a link
    that must change."""
    cells: list[Token] = []
    m = n + 1
    while m < len(tokens) and tokens[m].type != "tr_close":
        if tokens[m].type == "inline":
            cells.append(tokens[m])
        m += 1
    if not any(_needs_rendering(cell) for cell in cells):
        return
    row = tokens[n].map[0]  # type: ignore[index]
    source = lines[row]
    indent = source[:len(source) - len(source.lstrip())]
    edits.replace(row, row + 1, [indent + "| " + " | ".join(written(c, in_table=True) for c in cells)
                                 + " |"])


def _needs_rendering(inline: Token) -> bool:
    """Whether an inline part holds what clean Markdown has not: HTML, an entity, an autolink,
    a reference-style link, a link to an anchor or one that runs code."""
    if ENTITY_LIKE.search(inline.content):
        return True
    for child in inline.children or ():
        if child.type == "html_inline":
            return True
        if child.type in ("link_open", "image"):
            target = str(child.attrs.get("href" if child.type == "link_open" else "src", ""))
            if (child.markup == "autolink" or target.startswith("#") or target.lower().startswith(UNSAFE_SCHEMES)
                    or f"({target}" not in inline.content and f"(<{target}>" not in inline.content):
                return True  # written elsewhere (a reference), or an anchor, or code to run
    return False


def _render_inline_block(opening: Token, inline: Token, lines: list[str], edits: _Edits) -> None:
    """A paragraph or heading written again from its parse, each line under the marks its
    container gave it (`> `, a list item's indent) and a heading's `#`s."""
    start, end = inline.map  # type: ignore[misc]
    if opening.type == "heading_open" and opening.markup.startswith(("=", "-")):
        end = start + 1  # a setext heading: its underline stays
    heading = opening.type == "heading_open"
    rendered = written(inline, heading=heading)
    _replace_content(lines, start, end, inline.content.split("\n"),
                     [rendered.strip()] if heading else rendered.split("\n"), edits)


def _replace_content(lines: list[str], start: int, end: int, content: list[str], rendered: list[str],
                     edits: _Edits) -> None:
    """Lines start..end, whose words the parser read as `content`, with `rendered` in place of
    those words: what stands before them on each line (container marks, a heading's `#`s) and a
    heading's closing `#`s stay."""
    source = lines[start:end]
    prefixes, suffixes = [], []
    for k, line in enumerate(source):
        words = content[k].strip() if k < len(content) else ""
        at = line.find(words) if words else len(line.rstrip())
        if at < 0:
            at = len(line) - len(line.lstrip())
            words = line[at:]
        prefixes.append(line[:at])
        tail = line[at + len(words):]
        suffixes.append(tail if tail.strip() else "")  # trailing spaces (a hard break) are rendered as `\`
    continuation = prefixes[-1] if len(prefixes) > 1 else "".join(ch if ch == ">" else " " for ch in prefixes[0])
    new = []
    for k, words in enumerate(rendered):
        prefix = prefixes[k] if k < len(prefixes) else continuation
        new.append(prefix + words + (suffixes[k] if k < len(suffixes) and k == len(rendered) - 1 else ""))
    edits.replace(start, end, new)
