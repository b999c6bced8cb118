"""Inline Markdown written back from its parse (markdown-it-py): text escaped so that it stays
text, inline HTML as its Markdown meaning, and, for text that stands where no link can hold (a
line of an index, a summary), links as their words.

The converter writes a document's paragraphs back with it (kbuild.convert.markdown), the
prose reading (kbuild.text.prose) takes a sentence's words with it, and the guards clean what a model wrote with
it: one reading of Markdown for all three.
"""
from __future__ import annotations

from dataclasses import dataclass
from html.parser import HTMLParser
from typing import TYPE_CHECKING

from .markdown import code_span, escape_text, parser

if TYPE_CHECKING:
    from markdown_it.token import Token

# Link targets that run code or carry a document: never a link in a page.
UNSAFE_SCHEMES = ("javascript:", "vbscript:", "data:", "file:")
EMPHASIS = {"b": "**", "strong": "**", "i": "*", "em": "*", "s": "~~", "del": "~~", "strike": "~~"}
CODE_TAGS = {"code", "kbd", "tt", "samp"}
# Tags whose words are the text and whose marks say nothing a reader needs (a table's or a list's
# tags met inside a sentence, where no table or list can stand, too).
WRAPPERS = {"span", "div", "font", "sup", "sub", "u", "ins", "mark", "small", "big", "center", "p", "abbr", "cite",
            "q", "dfn", "var", "time", "label", "section", "article", "aside", "header", "footer", "main", "figure",
            "figcaption", "details", "summary", "nobr", "wbr", "bdi", "bdo", "data", "ruby", "rt", "rp", "picture",
            "source", "caption", "colgroup", "col", "hr", "address", "blockquote", "table", "thead", "tbody", "tfoot",
            "tr", "td", "th", "ul", "ol", "li", "dl", "dt", "dd", "pre", "h1", "h2", "h3", "h4", "h5", "h6"}


class _TagReader(HTMLParser):
    """One HTML tag of a text, read by the standard library's tokenizer."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.kind = "other"  # "start", "end" or "comment" once read
        self.tag = ""
        self.attrs: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.kind, self.tag, self.attrs = "start", tag, {k: v or "" for k, v in attrs}

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        self.kind, self.tag = "end", tag

    def handle_comment(self, data: str) -> None:
        self.kind = "comment"


def _read_tag(text: str) -> _TagReader:
    reader = _TagReader()
    reader.feed(text)
    reader.close()
    return reader


@dataclass
class _Open:
    """A mark opened and not yet closed: what it becomes, and where its words start in the output."""

    kind: str  # "link", "emphasis", "code" or "none" (an anchor: words only)
    at: int
    value: str = ""  # the link's target, the emphasis marks


class InlineWriter:
    """Inline tokens written back as Markdown: text escaped, HTML as its Markdown meaning.
    `plain`: words only, for a line that stands in pages at any depth of the store, where no
    relative link holds: links as their words, images as their alt text, no emphasis marks, one
    line; code stays code."""

    def __init__(self, in_table: bool = False, heading: bool = False, plain: bool = False,
                 escape_marks: bool = True) -> None:
        self.in_table = in_table
        self.heading = heading
        self.plain = plain
        self.escape_marks = escape_marks
        self.out: list[str] = []
        self.open: list[_Open] = []

    def render(self, inline: Token) -> str:
        children = list(inline.children or ())
        for k, child in enumerate(children):
            following = children[k + 1] if k + 1 < len(children) else None
            self._write(child, following)
        return "".join(self.out).rstrip(" ") if self.in_table else "".join(self.out)

    def _line_start(self) -> bool:
        return not (self.heading or self.in_table or self.plain) and (not self.out or self.out[-1].endswith("\n"))

    def _write(self, token: Token, following: Token | None) -> None:
        kind = token.type
        if kind == "text":
            text = escape_text(token.content, line_start=self._line_start(), marks=self.escape_marks)
            self.out.append(text.replace("|", "\\|") if self.in_table else text)
        elif kind in ("softbreak", "hardbreak"):
            one_line = self.in_table or self.plain or self.heading
            self.out.append(" " if one_line else "\n" if kind == "softbreak" else "\\\n")
        elif kind == "code_inline":
            code = code_span(token.content)
            self.out.append(code.replace("|", "\\|") if self.in_table else code)  # GFM: a cell's code keeps its \|
        elif kind in ("em_open", "strong_open", "s_open", "em_close", "strong_close", "s_close"):
            if not self.plain:
                self.out.append(token.markup)
        elif kind == "link_open":
            self._open_link(str(token.attrs.get("href", "")), str(token.attrs.get("title", "") or ""))
        elif kind == "link_close":
            self._close("link")
        elif kind == "image":
            alt = escape_text(token.content)
            src = str(token.attrs.get("src", ""))
            keep = src and not self.plain and not src.lower().startswith(UNSAFE_SCHEMES)
            self.out.append(f"![{alt}]({src})" if keep else alt)
        elif kind == "html_inline":
            self._write_html(token.content, following)
        else:
            self.out.append(escape_text(token.content))

    def _open_link(self, href: str, title: str) -> None:
        keep = href and not self.plain and not href.startswith("#") and not href.lower().startswith(UNSAFE_SCHEMES)
        target = href + (' "' + title.replace('"', '\\"') + '"' if title else "")
        self.open.append(_Open("link" if keep else "none", len(self.out), target))

    def _close(self, kind: str) -> None:
        """Close the last open mark of this kind (and any opened inside it and left open)."""
        for k in range(len(self.open) - 1, -1, -1):
            if self.open[k].kind == kind or (kind == "link" and self.open[k].kind == "none"):
                mark = self.open[k]
                del self.open[k:]
                inner = "".join(self.out[mark.at:])
                del self.out[mark.at:]
                self.out.append(self._wrapped(mark, inner))
                return

    def _wrapped(self, mark: _Open, inner: str) -> str:
        core = inner.strip()
        if not core:
            return inner
        lead, trail = inner[:len(inner) - len(inner.lstrip())], inner[len(inner.rstrip()):]
        if mark.kind == "link":
            return f"{lead}[{core}]({mark.value}){trail}"
        if mark.kind == "emphasis":
            return f"{lead}{mark.value}{core}{mark.value}{trail}"
        if mark.kind == "code":
            return lead + code_span(_unescaped(core)) + trail
        return inner

    def _write_html(self, html: str, following: Token | None) -> None:
        tag = _read_tag(html)
        if tag.kind == "comment":
            return
        if tag.kind == "other":
            self.out.append(code_span(html))
            return
        name = tag.tag
        if name == "br":
            if self.in_table or self.plain or self.heading:
                self.out.append(" ")
            elif following is None or (self.out and self.out[-1] in ("\\", "\\\n")):
                return  # a break that ends the paragraph, or a second one in a row, says nothing
            else:
                self.out.append("\\" if following.type in ("softbreak", "hardbreak") else "\\\n")
        elif name == "img":
            alt = tag.attrs.get("alt", "").strip()
            if alt:
                self.out.append(escape_text(" ".join(alt.split())))
        elif name == "a":
            if tag.kind == "start":
                self._open_link(tag.attrs.get("href", ""), tag.attrs.get("title", ""))
            else:
                self._close("link")
        elif name in EMPHASIS and self.plain:
            return  # plain words: the marks go
        elif name in EMPHASIS or name in CODE_TAGS:
            kind = "code" if name in CODE_TAGS else "emphasis"
            if tag.kind == "start":
                self.open.append(_Open(kind, len(self.out), EMPHASIS.get(name, "")))
            else:
                self._close(kind)
        elif name not in WRAPPERS:
            self.out.append(code_span(html))  # a tag a reader would not see rendered: shown as the code it is


def _unescaped(markdown: str) -> str:
    """Escaped text as the characters it shows (for code, which shows them as they are)."""
    return "".join(t.content for block in parser().parseInline(markdown) for t in block.children or ()
                   if t.type in ("text", "code_inline", "text_special"))


def inline_words(text: str) -> str:
    """The words of inline Markdown (a sentence, a paragraph's lines joined): emphasis marks
    dropped, links as their words, images as their alt text, HTML as its meaning (any tag it
    cannot render as code), code as it is; escaped where a character would be markup."""
    if not any(ch in text for ch in _MARKUP):
        return " ".join(text.split())  # plain words, most sentences: what the parse would give, without it
    return "".join(written(block, plain=True) for block in parser().parseInline(text))


_MARKUP = frozenset("<>&*_`[]\\!~")  # the characters that can make inline Markdown


def written(inline: Token, **options: bool) -> str:
    """`inline` written back by an InlineWriter with `options`, its `*` and `_` left as they are
    when that reads as the same (`Foo.__a`, `2 * 3`, `snake_case`), escaped only where they would
    read as emphasis: the words a reader of the raw text sees stay as the source had them."""
    light = InlineWriter(escape_marks=False, **options).render(inline)
    full = InlineWriter(**options).render(inline)
    return light if light == full or _shape(light) == _shape(full) else full


def _shape(markdown: str) -> list[tuple[str, str, str]]:
    """What the parser reads in inline Markdown: each token's kind, words and target."""
    return [(t.type, t.content, str(sorted(t.attrs.items()))) for block in parser().parseInline(markdown)
            for t in block.children or ()]


def plain_words(markdown: str) -> str:
    """`inline_words` of each block of a Markdown text, on one line: a text that stands in an
    index line or at the head of a page (a summary, an abstract, a view's statement)."""
    parts: list[str] = []
    for token in parser().parse(markdown):
        if token.type == "inline":
            parts.append(written(token, plain=True))
        elif token.type in ("fence", "code_block", "html_block") and token.content.strip():
            parts.append(code_span(" ".join(token.content.split())))
    if not parts and markdown.strip():  # all of it a link's definition ("[ref]: https://..."): its words
        return " ".join(inline_words(markdown).split())
    return " ".join(" ".join(parts).split())
