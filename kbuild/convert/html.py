"""HTML to readable Markdown with the standard library's tokenizer.

Only what helps a reader survives: headings, paragraphs, lists, quotes, code
blocks, tables, links and emphasis. Scripts, styles, navigation, forms' chrome and
the <head> (apart from its title) are dropped; a page with a <main> (or an
<article>) keeps that alone, not the site around it. Line numbers are not kept.
Text is escaped so that it stays text: `&lt;script&gt;` in a page is the words
"<script>", which text.md shows as code, never as a tag.

The same code renders the HTML a Markdown document holds (`fragment`): there the
words between tags may be Markdown, so only what would read as a tag is escaped.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

from ..text.markdown import code_span, escape_text, markdown_table, quoted_tags
from .model import Converted
from .text import decode

# Their content is never prose.
_SKIP = {"script", "style", "noscript", "template", "svg", "math", "canvas", "iframe",
         "object", "select", "button", "nav"}
# A site's chrome around the content, by the role or the class a page gives it: menus, tables of
# contents, edit links, language lists. The words a class is made of are compared ("vector-menu",
# "mw-editsection"), not substrings, so that "menubar" or "tocopherol" are not chrome.
_CHROME_ROLES = {"navigation", "banner", "contentinfo", "search", "menu", "menubar", "toolbar"}
_CHROME_WORDS = {"nav", "navbar", "navbox", "navigation", "menu", "dropdown", "sidebar", "toc", "breadcrumb",
                 "breadcrumbs", "noprint", "editsection", "portlet", "catlinks", "skip", "pagination", "footer",
                 "langlinks", "interlanguage", "printfooter", "sitesub", "jump"}
_CLASS_WORD = re.compile(r"[A-Za-z]+")
# Tags that end the current paragraph; content after them starts a new block.
_BLOCK = {"p", "div", "section", "article", "header", "footer", "main", "aside", "nav",
          "figure", "figcaption", "address", "dl", "dt", "dd", "form", "fieldset", "legend",
          "details", "summary", "center", "body", "html", "caption"}
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_VOID = {"br", "hr", "img", "meta", "link", "input", "area", "base", "col", "embed",
         "param", "source", "track", "wbr"}
_SPACE = re.compile(r"[ \t\n\r\f\v]+")


@dataclass
class _Cell:
    text: str
    rows: int  # rowspan
    columns: int  # colspan


@dataclass
class _Table:
    rows: list[list[_Cell]] = field(default_factory=list)
    cell: list[str] | None = None  # inline parts of the open cell
    spans: tuple[int, int] = (1, 1)  # the open cell's rowspan and colspan

    def grid(self) -> list[list[str]]:
        """The rows as a grid: a cell that spans rows or columns stands in each place it covers,
        as a reader of that row sees it ("2025" beside each of its months)."""
        grid: list[list[str]] = []
        below: dict[tuple[int, int], str] = {}  # (row, column) -> the words of a cell spanning into it
        for r, row in enumerate(self.rows):
            line: list[str] = []
            for cell in row:
                while (r, len(line)) in below:
                    line.append(below.pop((r, len(line))))
                for _ in range(min(cell.columns, 100)):
                    for down in range(1, min(cell.rows, 1000)):
                        below[(r + down, len(line))] = cell.text
                    line.append(cell.text)
            while (r, len(line)) in below:
                line.append(below.pop((r, len(line))))
            grid.append(line)
        return grid


class _ToMarkdown(HTMLParser):
    def __init__(self, fragment: bool = False, scope: str | None = None, chrome: bool = False) -> None:
        super().__init__(convert_charrefs=True)
        self.fragment = fragment
        self.chrome = chrome  # keep the site's chrome: a page that is nothing else
        self.scope = scope  # "main" or "article": only what stands inside it is the page's content
        self.scope_depth = 0
        # (markdown, is a list item, starts a list, blockquote depth)
        self.blocks: list[tuple[str, bool, bool, int]] = []
        self.new_list = False  # the next item starts a list, so it is not joined tightly
        self.inline: list[str] = []
        self.skip_depth = 0
        self.skip_tag: str | None = None
        self.title: list[str] | None = None
        self.title_text = ""
        self.lists: list[list[int | str]] = []  # [kind, counter]
        self.quote_depth = 0
        self.pre_depth = 0
        self.heading: int | None = None
        # open inline marks: (tag, the parts list it opened in, start index there, href)
        self.marks: list[tuple[str, list[str], int, str]] = []
        self.tables: list[_Table] = []
        self.item_prefix: str | None = None
        self.saw_h1 = False

    def set_cdata_mode(self, elem: str) -> None:
        """A <script> or <style> of a page holds code to the end tag, unread; in a Markdown
        document's HTML it is quoted (see handle_starttag), and what follows is the document's."""
        if not self.fragment:
            super().set_cdata_mode(elem)

    # -- parser callbacks --------------------------------------------------------
    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.skip_depth:
            if tag == self.skip_tag:
                self.skip_depth += 1
            return
        if tag == "title":
            self.title = []
            return
        if self.scope is not None:
            if _in_scope(tag, attrs, self.scope) or (self.scope_depth and tag == _scope_tag(self.scope, tag)):
                self.scope_depth += 1
            if not self.scope_depth:
                return
        if tag in _SKIP and self.fragment:
            # in a Markdown document's HTML, a <script> its author wrote in a table cell is quoted,
            # as the same tag in a sentence is (kbuild.text.inline): shown as code, never run or hidden
            self.inline.append(code_span(self.get_starttag_text() or f"<{tag}>"))
            return
        if (tag in _SKIP and not (self.chrome and tag == "nav")) or (not (self.fragment or self.chrome) and _is_chrome(attrs)):
            self.skip_tag, self.skip_depth = tag, 1
            return
        if tag in _HEADINGS:
            self._flush()
            self.heading = _HEADINGS[tag]
            self.saw_h1 = self.saw_h1 or tag == "h1"
        elif tag in ("ul", "ol", "menu"):
            self._flush()
            self.new_list = self.new_list or not self.lists
            self.lists.append(["ol" if tag == "ol" else "ul", 0])
        elif tag == "li":
            self._flush()
            if not self.lists:
                self.lists.append(["ul", 0])  # a stray <li>: still a list item
            kind, count = self.lists[-1]
            self.lists[-1][1] = int(count) + 1
            indent = "   " * (len(self.lists) - 1)
            self.item_prefix = indent + (f"{int(count) + 1}. " if kind == "ol" else "- ")
        elif tag == "blockquote":
            self._flush()
            self.quote_depth += 1
        elif tag == "pre":
            self._flush()
            self.pre_depth += 1
        elif tag == "br":
            self.inline.append("\n")
        elif tag == "hr":
            self._flush()
            self._emit("---")
        elif tag == "img":
            alt = (dict(attrs).get("alt") or "").strip()
            if alt:
                self.inline.append(self._escaped(_SPACE.sub(" ", alt)))
        elif tag == "table":
            self._flush()
            self.tables.append(_Table())
        elif tag == "tr" and self.tables:
            self._close_cell()
            self.tables[-1].rows.append([])
        elif tag in ("td", "th") and self.tables:
            table = self.tables[-1]
            self._close_cell()
            if not table.rows:
                table.rows.append([])
            table.cell = []
            table.spans = (_span(attrs, "rowspan"), _span(attrs, "colspan"))
            self.inline = table.cell
        elif tag in ("a", "b", "strong", "i", "em", "code", "kbd", "samp", "tt"):
            href = dict(attrs).get("href") or ""
            self.marks.append((tag, self.inline, len(self.inline), href))
        elif tag in _BLOCK:
            self._flush()

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP and self.fragment:
            self.inline.append(code_span(f"</{tag}>"))
            return
        if self.skip_depth:
            if tag == self.skip_tag:
                self.skip_depth -= 1
            return
        if tag == "title" and self.title is not None:
            self.title_text = _SPACE.sub(" ", "".join(self.title)).strip()
            self.title = None
            return
        if self.scope is not None:
            if not self.scope_depth:
                return
            if tag == _scope_tag(self.scope, tag):
                self.scope_depth -= 1
        if tag in _HEADINGS:
            self._flush()
            self.heading = None
        elif tag in ("ul", "ol", "menu"):
            self._flush()
            if self.lists:
                self.lists.pop()
        elif tag == "li":
            self._flush()
        elif tag == "blockquote":
            self._flush()
            self.quote_depth = max(0, self.quote_depth - 1)
        elif tag == "pre":
            self._flush()
            self.pre_depth = max(0, self.pre_depth - 1)
        elif tag in ("td", "th"):
            self._close_cell()
        elif tag == "table" and self.tables:
            self._close_cell()
            table = self.tables.pop()
            self.inline = self.tables[-1].cell if self.tables and self.tables[-1].cell is not None else []
            rows = table.grid()
            markdown = markdown_table(rows)
            if markdown:
                if self.tables and self.tables[-1].cell is not None:
                    self.inline.append(" ".join(" ".join(r) for r in rows))  # nested: flatten
                else:
                    self._emit(markdown)
        elif self.marks and self.marks[-1][0] == tag:
            self._close_mark()
        elif tag in _BLOCK:
            self._flush()

    def handle_data(self, data: str) -> None:
        if self.skip_depth:
            return
        if self.title is not None:
            self.title.append(data)
            return
        if self.scope is not None and not self.scope_depth:
            return
        if self.pre_depth:
            self.inline.append(data.replace("\n", "\x00"))  # \x00 marks a kept newline
        else:
            self.inline.append(self._escaped(_SPACE.sub(" ", data)))

    def _escaped(self, text: str) -> str:
        """Words as Markdown that shows them: in a fragment of a Markdown document they may be
        Markdown themselves, and only what would read as a tag is quoted as code."""
        if self.fragment:
            return quoted_tags(text)
        return escape_text(text)

    # -- building ----------------------------------------------------------------
    def _close_mark(self) -> None:
        tag, parts, start, href = self.marks.pop()
        if parts is not self.inline:
            return  # opened in a block or cell that is already written out
        inner = "".join(self.inline[start:])
        del self.inline[start:]
        core = inner.strip()
        if not core or self.pre_depth:
            self.inline.append(inner)
            return
        lead = " " if inner[:1].isspace() else ""
        trail = " " if inner[-1:].isspace() else ""
        if tag == "a":
            keep_link = href and not href.startswith(("#", "javascript:")) and href != core
            core = f"[{core}]({href})" if keep_link else core
        elif tag in ("b", "strong"):
            core = f"**{core}**"
        elif tag in ("i", "em"):
            core = f"*{core}*"
        else:
            core = f"`{core}`"
        self.inline.append(lead + core + trail)

    def _close_cell(self) -> None:
        if not self.tables:
            return
        table = self.tables[-1]
        parts = table.cell
        if parts is None:
            return
        text = _SPACE.sub(" ", "".join(parts).replace("\x00", " ")).strip()
        table.rows[-1].append(_Cell(text, *table.spans))
        table.cell = None
        self.inline = []

    def _flush(self) -> None:
        if self.tables and self.tables[-1].cell is not None:
            self.inline.append(" ")  # blocks inside a cell stay in the cell
            return
        while self.marks:
            self._close_mark()
        raw = "".join(self.inline)
        self.inline = []
        if self.pre_depth:
            code = raw.replace("\x00", "\n").strip("\n")
            if code.strip():
                self._emit(f"```\n{code}\n```")
            return
        lines = [_SPACE.sub(" ", line).strip() for line in raw.replace("\x00", "\n").split("\n")]
        text = "\n".join(line for line in lines if line)
        if not text:
            return
        if self.heading is not None:
            self._emit("#" * self.heading + " " + text.replace("\n", " "))
        elif self.item_prefix is not None:
            pad = " " * len(self.item_prefix)
            self._emit(self.item_prefix + text.replace("\n", "\n" + pad), tight=True)
            self.item_prefix = None
        elif self.lists:
            pad = "   " * len(self.lists)
            self._emit(pad + text.replace("\n", "\n" + pad), tight=True)
        else:
            self._emit(text)

    def _emit(self, markdown: str, tight: bool = False) -> None:
        if self.quote_depth:
            prefix = "> " * self.quote_depth
            markdown = "\n".join(prefix + line if line else prefix.rstrip() for line in markdown.split("\n"))
        starts_list = tight and self.new_list
        if tight:
            self.new_list = False
        self.blocks.append((markdown, tight, starts_list, self.quote_depth))

    def result(self) -> str:
        self.skip_depth = 0  # an element to skip that never closed skips no more: its tables close
        self._flush()
        while self.tables:
            self.handle_endtag("table")
        parts: list[str] = []
        if self.title_text and not self.saw_h1:
            parts.append(f"# {self.title_text}")
        previous_tight, previous_quote = False, 0
        for markdown, tight, starts_list, quote in self.blocks:
            if parts:
                if tight and previous_tight and not starts_list:
                    parts.append("\n")
                elif quote and previous_quote:
                    parts.append("\n" + ">" * min(quote, previous_quote) + "\n")  # same quote
                else:
                    parts.append("\n\n")
            parts.append(markdown)
            previous_tight, previous_quote = tight, quote
        return "".join(parts).strip("\n")


def _span(attrs: list[tuple[str, str | None]], name: str) -> int:
    value = (dict(attrs).get(name) or "1").strip()
    return int(value) if value.isdigit() and int(value) > 0 else 1


def _is_chrome(attrs: list[tuple[str, str | None]]) -> bool:
    found = dict(attrs)
    if (found.get("role") or "") in _CHROME_ROLES or found.get("aria-hidden") == "true":
        return True
    words = {w.lower() for w in _CLASS_WORD.findall(f"{found.get('class') or ''} {found.get('id') or ''}")}
    return bool(words & _CHROME_WORDS)


def _in_scope(tag: str, attrs: list[tuple[str, str | None]], scope: str) -> bool:
    if scope == "main":
        return tag == "main" or ("role", "main") in attrs
    return tag == "article"


def _scope_tag(scope: str, tag: str) -> str | None:
    """The tag whose nesting the scope counts: its own (a <div role=main> counts divs)."""
    return tag if scope == "article" and tag == "article" or scope == "main" and tag in ("main", "div") else None


class _Landmarks(HTMLParser):
    """Whether a page marks its content: a <main> (or role="main"), else an <article>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: set[str] = set()
        self.main_tag: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if _in_scope(tag, attrs, "main") and self.main_tag is None:
            self.main_tag = tag
            self.found.add("main")
        elif tag == "article":
            self.found.add("article")


# Code spans a Markdown document writes between its tags: its author's code, not HTML.
_CODE_SPAN = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)")
_HELD = re.compile("\ue000(\\d+)\ue001")


def html_to_markdown(html: str, fragment: bool = False) -> str:
    """A page's content as Markdown; `fragment`: HTML that a Markdown document holds, whose
    code spans stay as they are written."""
    held: list[str] = []
    if fragment and "`" in html:
        def hold(match: re.Match[str]) -> str:
            held.append(match.group(0))
            return f"\ue000{len(held) - 1}\ue001"

        html = _CODE_SPAN.sub(hold, html)
    scope = None
    if not fragment:
        landmarks = _Landmarks()
        landmarks.feed(html)
        landmarks.close()
        scope = "main" if "main" in landmarks.found else "article" if "article" in landmarks.found else None
    markdown = _markdown(html, fragment, scope)
    if not fragment and not re.search(r"\w", markdown):  # a page of menus alone: its menus are its content
        markdown = _markdown(html, fragment, scope, chrome=True)
    if not held:
        return markdown
    # a code span put back into a table row keeps its "|" escaped, as GFM wants, or it splits the cell
    return "\n".join(_HELD.sub(lambda m: held[int(m.group(1))].replace("|", "\\|") if line.lstrip().startswith("|")
                               else held[int(m.group(1))], line) for line in markdown.split("\n"))


def _markdown(html: str, fragment: bool, scope: str | None, chrome: bool = False) -> str:
    parser = _ToMarkdown(fragment=fragment, scope=scope, chrome=chrome)
    parser.feed(html)
    parser.close()
    return parser.result()


def convert_html(data: bytes) -> Converted:
    text, warnings = decode(data, html=True)
    markdown = html_to_markdown(text)
    if not markdown.strip():
        warnings.append("has no readable text (only markup or scripts); text.md will be empty")
    return Converted(text=markdown.rstrip("\n") + "\n", pages=[], figures=[], kind="html",
                     warnings=warnings)
