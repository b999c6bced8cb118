"""Prose in a converted source: its words without their markup, its statements, and the words
that carry no content. What the offline backend extracts from, the guards and checks compare
with, and topic ranking reads: one reading for all of them."""
from __future__ import annotations

import functools
import re

from . import injection
from .inline import inline_words
from .markdown import ATX_MARK as MD_HEADING, LIST_ITEM, PAGE_MARKER, UNDERLINE as RST_UNDERLINE, without_links
from .sentences import split_sentences

STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers him his how i if in into is it its itself just
    me more most must my no nor not now of off on once only or other our ours out over own same
    shall she should so some such than that the their theirs them then there these they this those
    through to too under until up upon very was we were what when where which while who whom why
    will with would you your yours one two may might""".split()
)
NUMBER = re.compile(r"(?:(?<![\w.])|(?<=_))\d[\d,]*(?:\.\d+)?")  # "_2_" is 2 in emphasis; "v1" is no number
WORD = re.compile(r"[A-Za-z][A-Za-z0-9_'-]+")
DIRECTIVE = re.compile(r"^\s*\.\.\s+[\w:-]+::.*$")
RST_ROLE = re.compile(r":[\w:-]+:`([^`<]*?)(?:\s*<[^>]*>)?`")
RST_LINK = re.compile(r"`([^`<]+?)\s*<[^>]+>`_{1,2}")
HTML_COMMENT = re.compile(r"<!--.*?-->")
CODE_SPAN = re.compile(r"(`+[^`]*?`+)")  # a code span (approximately: to keep names out of it)
DUNDER = re.compile(r"(?<![\w`*])((?:[A-Za-z_]\w*\.)*__[A-Za-z]\w*?(?:__)?)(?![\w`*])")
RST_NOTE_REF = re.compile(r"\s?\[(?:#[\w-]*|\*|\d+|[A-Za-z][\w-]*)\]_(?!\w)")  # a footnote or citation mark, [#fn-hi]_
RST_EXPLICIT = re.compile(r"^\.\.\s+(?:\[[^\]]+\]|_[^:]+:|\S)")  # footnotes, link targets, comments at a line's start
# "<mail at host>" of a header, as written or quoted as code whole (`a<b>` is code, and stays)
ANGLED = re.compile(r"\s*(?:`<[^<>\n`]*>`|(?<![`\w])<[^<>\n`]*>(?![`\w]))")
FIELD = re.compile(r"^[A-Z][\w-]*(?: [\w-]+)?:\s+\S")  # "Author: ...", a header's field (PEPs, RFC 822)
QUOTE_MARKS = re.compile(r"^(?:>[ \t]?)+")  # a blockquote's marks at a line's start, nested ones too
# Sections that list where things come from rather than say anything: not prose for a summary or a view
REFERENCE_HEADING = re.compile(r"^\W*(?:\d+(?:\.\d+)*\.?\s+)?(references?|bibliography|footnotes?|citations?|"
                               r"works cited|further reading|see also|links|copyright)\W*$", re.I)


def _table_row(line: str) -> str:
    """A table row's words without links and roles (its cells stay in their columns): a source's
    links point where the source pointed. Code holds no links: `f[T](x)` stays as it is."""
    line = HTML_COMMENT.sub("", line)
    line = RST_NOTE_REF.sub("", line)
    line = RST_ROLE.sub(r"\1", line)
    line = RST_LINK.sub(r"\1", line)
    return without_links(line)


def _words(text: str) -> str:
    """The words of a paragraph or heading, read by the Markdown parser (links as their words,
    emphasis marks dropped, code as it is, a tag quoted as code; kbuild.text.inline), after
    reStructuredText's roles and links, which Markdown does not know, are reduced to theirs, and
    Python's names with two underscores set as code: `Foo.__a` and `__init__` name code, which
    Markdown would read as emphasis and reStructuredText as words."""
    text = RST_NOTE_REF.sub("", text)  # an HTML comment is the parser's: it knows one in code from one outside
    text = RST_LINK.sub(r"\1", RST_ROLE.sub(r"\1", text))
    if "__" in text:
        parts = CODE_SPAN.split(text)  # outside code only: a code span's text is code already
        text = "".join(part if n % 2 else DUNDER.sub(_as_code, part) for n, part in enumerate(parts))
    return inline_words(text)


def _as_code(name: re.Match[str]) -> str:
    """A name with two underscores as code, unless it opens an emphasis the text closes
    (`__very__ important`, `__a whole phrase__`)."""
    word = name.group(1)
    bare = "." not in word and not word.endswith("__")
    if bare and re.search(r"\S__(?!\w)", name.string[name.end():]):
        return word
    return f"`{word}`"


@functools.lru_cache(maxsize=512)  # a chunk's words are read for its reading, its fact and each view's section
def clean(text: str, prose_only: bool = False) -> str:
    """The words of a span without their markup: paragraphs and list items kept apart, headings
    in bold, code and literal blocks verbatim. With `prose_only`, code, tables, literal blocks,
    footnotes and reference sections are left out (for summaries and views: what they say is
    where things come from, not what the document states)."""
    paragraphs: list[str] = []
    current: list[str] = []
    block: list[str] | None = None  # a block kept line for line...
    kind = ""  # ...a "fence" (``` or ~~~), a reST "literal" block (after "::") or a Markdown "table"
    in_references = False  # under a References / Footnotes heading, with prose_only

    def flush() -> None:
        nonlocal block
        if current:
            # a role or link the source wraps over two lines (":pep:`style guidelines for the C
            # code` / `in the C implementation of Python <7>`") is whole only in the paragraph
            words = _words(" ".join(current))
            if words.strip():
                paragraphs.append(words)
            current.clear()
        if block is not None:
            if not prose_only and any(line.strip() for line in block):
                paragraphs.append("\n".join(block).rstrip())
            block = None

    lines = text.splitlines()
    header = _header_lines(lines) if prose_only else set()
    for i, line in enumerate(lines):
        if i in header:
            continue
        stripped = line.strip()
        if kind == "fence":
            block.append(line)  # type: ignore[union-attr]
            if stripped.startswith(("```", "~~~")):
                flush()
                kind = ""
            continue
        if kind in ("literal", "note"):
            if not stripped or line[:1].isspace():
                if kind == "note":
                    continue
                block.append(line.rstrip())  # type: ignore[union-attr]
                continue
            flush()
            kind = ""
        if kind == "table":
            if stripped.startswith("|"):
                block.append(_table_row(stripped))  # type: ignore[union-attr]
                continue
            flush()
            kind = ""
        if stripped.startswith(("```", "~~~")):
            flush()
            block, kind = [line], "fence"
            continue
        if stripped.startswith("|"):
            flush()
            block, kind = [_table_row(stripped)], "table"
            continue
        following = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if PAGE_MARKER.match(stripped) or RST_UNDERLINE.match(stripped) or DIRECTIVE.match(line):
            flush()
            if DIRECTIVE.match(line) and stripped.endswith("::"):
                block, kind = [], "literal"
            continue
        if not stripped:
            flush()
            continue
        is_heading = MD_HEADING.match(stripped) or (RST_UNDERLINE.match(following) and len(following) >= len(stripped))
        if is_heading:
            words = _words(MD_HEADING.sub("", stripped)).strip()
            flush()
            in_references = prose_only and bool(REFERENCE_HEADING.match(words))
            if not prose_only and words:
                paragraphs.append(f"**{words}**")
            continue
        if in_references:
            continue
        if prose_only and RST_EXPLICIT.match(line):
            flush()
            kind = "note"  # a footnote or link target, with its indented lines
            continue
        if LIST_ITEM.match(stripped):
            flush()  # each list item its own paragraph
        if stripped.endswith("::"):
            current.append(stripped.rstrip(":") + ":")
            flush()
            block, kind = [], "literal"
            continue
        if current and current[0].startswith(">") and stripped.startswith(">"):
            quoted = QUOTE_MARKS.sub("", stripped)
            if not quoted:  # "> " alone: a paragraph of the quote ends
                flush()
                continue
            stripped = quoted  # a quote's next line goes on with its words, not its marks: "over > two lines"
        current.append(stripped)  # its words are read with its paragraph's: a code span may go on to the next line
    flush()
    return "\n\n".join(paragraphs)


def _header_lines(lines: list[str]) -> set[int]:
    """The lines of paragraphs made of two or more "Field: value" lines (and their indented
    continuations): a document's metadata ("Title:", "Author: ... <mail>"), not its prose."""
    found: set[int] = set()
    start = 0
    for end in [*(i for i, line in enumerate(lines) if not line.strip()), len(lines)]:
        block = range(start, end)
        fields = [i for i in block if FIELD.match(lines[i])]
        if len(fields) >= 2 and all(i in fields or lines[i][:1].isspace() for i in block):
            found.update(block)
        start = end + 1
    return found


def prose_sentences(span: str, lead_ins: bool = False) -> list[str]:
    """Whole statements of a span's prose: no list markers, no lead-ins to a block that is not
    there (unless `lead_ins`: a lead-in may define a term, "When looking at XSS (Cross-Site
    Scripting), there are three forms:").

    What views select from and cite: a view's statement is one of these, word for word."""
    found = (LIST_ITEM.sub("", s) for s in split_sentences(clean(span, prose_only=True)))
    return [s for s in found if (lead_ins or not s.endswith(":")) and is_statement(s)]


WHOLE_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`).+?(?<!`)\1(?!`)")  # opened and closed by backticks of one count


def is_statement(sentence: str) -> bool:
    """Whether a sentence of a source may stand as a summary's or a view's statement: it has
    words outside code (a tag the converter quoted as code, `<iframe src=...>`, tells a reader
    nothing), and it is no instruction to a model (kbuild.text.injection): a source may hold
    one, kbuild never says one in its own voice."""
    prose = WHOLE_CODE_SPAN.sub(" ", sentence) if "`" in sentence else sentence
    return bool(re.search(r"[^\W\d_]{2,}", prose)) and not injection.find_injections(sentence)
