"""The offline backend: deterministic, no network, extractive.

It cleans spans of markup for rewrites and picks sentences for summaries (the most central
ones by shared content words, not the first N words). It lets the whole pipeline run on a fresh
machine with no key, and it is the test double of every rule. Everything it writes says it is
extractive.
"""
from __future__ import annotations

import functools
import math
import re
import sys
from collections import Counter

from ..checks import injection
from ..store.links import without_links
from ..text import inline, keywords, markdown, sentences
from ..text.inline import inline_words
from ..text.markdown import ATX_MARK as MD_HEADING, LIST_ITEM, PAGE_MARKER, UNDERLINE as RST_UNDERLINE
from ..text.sentences import split_sentences

NAME = "offline"
LABEL = "extractive (offline backend)"

STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers him his how i if in into is it its itself just
    me more most must my no nor not now of off on once only or other our ours out over own same
    shall she should so some such than that the their theirs them then there these they this those
    through to too under until up upon very was we were what when where which while who whom why
    will with would you your yours one two may might""".split()
)
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


def prose_sentences(span: str) -> list[str]:
    """Whole statements of a span's prose: no list markers, no lead-ins to a block that is not there.

    What views select from and cite: a view's statement is one of these, word for word."""
    found = (LIST_ITEM.sub("", s) for s in split_sentences(clean(span, prose_only=True)))
    return [s for s in found if not s.endswith(":") and is_statement(s)]


WHOLE_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`).+?(?<!`)\1(?!`)")  # opened and closed by backticks of one count


def is_statement(sentence: str) -> bool:
    """Whether a sentence of a source may stand as a summary's or a view's statement: it has
    words outside code (a tag the converter quoted as code, `<iframe src=...>`, tells a reader
    nothing), and it is no instruction to a model (kbuild.checks.injection): a source may hold
    one, kbuild never says one in its own voice."""
    prose = WHOLE_CODE_SPAN.sub(" ", sentence) if "`" in sentence else sentence
    return bool(re.search(r"[^\W\d_]{2,}", prose)) and not injection.find_injections(sentence)


def _terms(sentence: str) -> list[str]:
    return [w.lower() for w in WORD.findall(sentence) if w.lower() not in STOPWORDS]


def central_sentences(text: str, count: int, max_words: int = 40, in_order: bool = True) -> list[str]:
    """The `count` sentences that share most content words with the rest, in text order (or,
    with `in_order` false, the most central first): whole statements of its prose, each once (a
    summary of summaries meets the same sentence twice)."""
    sentences = [s for s in dict.fromkeys(prose_sentences(text)) if len(_terms(s)) >= 3]
    if not sentences:  # a part with no statement of three content words: its first words, code or table
        words = (clean(text, prose_only=True)
                 or "\n".join(line for line in clean(text).splitlines() if not line.lstrip().startswith(("```", "~~~")))).split()
        words = ANGLED.sub(" ", LIST_ITEM.sub("", " ".join(words))).split()  # "<mail at host>" of a header reads as a tag
        head = " ".join(words[:max_words]) + (" …" if len(words) > max_words else "")
        return [head] if words and not injection.find_injections(head) else []
    frequency = Counter(t for s in sentences for t in set(_terms(s)))

    def score(item: tuple[int, str]) -> tuple[float, int]:
        index, sentence = item
        terms = _terms(sentence)
        weight = sum(frequency[t] for t in set(terms)) / math.sqrt(len(terms))
        return (-weight, index)  # ties go to the earlier sentence, so the choice is stable

    chosen = sorted(enumerate(sentences), key=score)[:count]
    if in_order:
        chosen.sort()
    result = []
    for _, sentence in chosen:
        words = sentence.split()
        result.append(" ".join(words[:max_words]) + (" …" if len(words) > max_words else ""))
    return result


def rewrite(span: str, headings: list[str], title: str, figures: dict[str, str]) -> str:
    """The span cleaned of markup, framed by where it stands, with its tables and figures as text."""
    chain = headings[1:] if headings and headings[0] == title else headings
    where = " › ".join([title, *chain])
    body = clean(span)
    parts = [f"From {where}:", body or "(this part has no text)"]
    for name, text in figures.items():
        parts.append(f"{name.replace('-', ' ').capitalize()}:\n\n{text.strip()}")
    return "\n\n".join(parts)


def summarise(text: str, sentences: int = 2) -> str:
    return " ".join(central_sentences(text, sentences)) or "(no text)"


def summarise_parts(parts: list[str], sentences: int = 2) -> str:
    """A summary of summaries: their most central sentences, each from another part while parts
    are left, so that a source's summary does not say one fact's index line over again."""
    joined = "\n\n".join(parts)
    ranked = central_sentences(joined, len(joined), in_order=False)

    def part(sentence: str) -> int:
        flat = sentence.removesuffix(" …")
        return next((i for i, p in enumerate(parts) if flat in " ".join(p.split())), -1)

    chosen: list[str] = []
    used: set[int] = set()
    for sentence in ranked:
        if len(chosen) < sentences and (part(sentence) not in used or len(used) == len(parts)):
            chosen.append(sentence)
            used.add(part(sentence))
    chosen += [s for s in ranked if s not in chosen][:sentences - len(chosen)]
    return " ".join(s for s in ranked_in_order(joined, chosen)) or "(no text)"


def ranked_in_order(text: str, chosen: list[str]) -> list[str]:
    """`chosen` sentences of `text` in the order the text has them."""
    order = {s: i for i, s in enumerate(central_sentences(text, len(text)))}
    return sorted(chosen, key=lambda s: order.get(s, len(order)))


CUES = {
    "user": re.compile(r"\b(you|your|users?|run|runs|command|option|flag|prints?|shows?|returns?|exit|error|"
                       r"install|configur\w*|example|usage|can|must|should|may|limit|default)\b", re.I),
    "developer": re.compile(r"\b(module|function|class|method|rule|engine|implement\w*|internal\w*|algorithm|"
                            r"query|queries|hash\w*|cache|database|sqlite|graph|schema|api|architecture|code|"
                            r"thread|async\w*|process|file format|lock)\b", re.I),
    "agreements": re.compile(r"\b(agree\w*|disagree\w*|however|but|unlike|whereas|in contrast|instead|rejected|"
                             r"open question|open issue|unclear|unresolved|tbd|to be decided|controvers\w*|"
                             r"alternative\w*|objection\w*|consensus)\b|\?", re.I),
}
PER_SECTION = {"digest": 4, "user": 8, "developer": 8, "agreements": 8}


def select_statements(kind: str, facts: list[dict[str, object]]) -> list[dict[str, object]]:
    """Sentences of the facts for one section of a view, each citing its fact, in fact order.

    A digest takes the most central sentences; user, developer and agreements views the
    sentences with the most cue words; a requested view every hit it was given (kbuild.topic
    chose them, and how many).
    """
    rows = [(i, f["ref"], str(sentence)) for i, f in enumerate(facts)
            for sentence in f["sentences"] if len(_terms(str(sentence))) >= 3]  # type: ignore[union-attr]
    if kind == "requested":
        chosen = rows
    elif kind == "digest":
        limit = PER_SECTION[kind]
        frequency = Counter(t for _, _, s in rows for t in set(_terms(s)))
        ranked = sorted(range(len(rows)), key=lambda k: (-sum(frequency[t] for t in set(_terms(rows[k][2])))
                                                          / math.sqrt(len(_terms(rows[k][2]))), k))
        chosen = [rows[k] for k in sorted(ranked[:limit])]
    else:
        limit = PER_SECTION[kind]
        cue = CUES[kind]
        scored = [(len(cue.findall(s)), k) for k, (_, _, s) in enumerate(rows)]
        best = sorted((k for n, k in scored if n > 0), key=lambda k: (-scored[k][0], k))[:limit]
        chosen = [rows[k] for k in sorted(best)]
    return [{"text": " ".join(s.split()[:60]), "cites": [ref]} for _, ref, s in chosen]


def select_requirements(statements: list[dict[str, object]]) -> list[dict[str, object]]:
    """The statements of a view that oblige (an RFC 2119 keyword used as one), as requirements,
    each with how to test it (kbuild.requirements)."""
    from .. import requirements  # it reads the grounding check's keywords, which read this module

    found = []
    previous: dict[str, str] = {}  # the subject of the last requirement citing a fact, for "It SHOULD ..."
    for st in statements:
        cites = [str(c) for c in st["cites"]]  # type: ignore[attr-defined]
        req = requirements.requirement(str(st["text"]), next((previous[c] for c in cites if c in previous), None))
        if req is not None:
            found.append({"statement": req.statement, "cites": st["cites"], "acceptance": req.acceptance})
            who = requirements.subject(req.statement, req.keyword)
            if who.lower() not in requirements.PRONOUN:
                previous.update(dict.fromkeys(cites, who))
    return found


class OfflineBackend:
    """What the rules ask of a model, answered by the functions above."""

    name = NAME
    label = LABEL
    notice: str | None = None  # why this backend answers, when nobody chose it: a build says so once
    asks_model = False  # it answers by code: `kbuild status` expects no model call of it

    def params(self, task: str) -> dict[str, object]:
        return {"backend": NAME, "task": task}

    def prompts(self, task: str) -> list[object]:
        return []  # it asks no model

    @property
    def code(self) -> tuple[object, ...]:
        """What decides this backend's answers: part of the fingerprint of every rule that asks."""
        from .. import requirements

        from ..store import links

        return (sys.modules[__name__], inline, keywords, markdown, sentences, links, requirements, injection)

    async def read_chunk(self, ctx: object, span: str, headings: list[str], title: str, figures: dict[str, str],
                         previous: str, views: dict[str, str], picks: int, check: object = None) -> dict[str, object]:
        prose = [{"ref": "", "sentences": prose_sentences(span)}]
        summary = summarise(span, 2)
        if len(re.findall(r"[^\W\d_]{2,}", summary)) < 2:  # a part of code or figures: say where it stands
            summary = f"{' › '.join(dict.fromkeys([title, *headings]))}: {summary}"
        return {"rewrite": rewrite(span, headings, title, figures), "summary": summary,
                "picks": {view: [str(st["text"]) for st in select_statements(view, prose)][:picks] for view in views}}

    async def describe_figure(self, ctx: object, png: bytes, nearby: str, name: str, title: str) -> str:
        return nearby  # the converter's text: the caption and what stands around the figure

    async def summarise_source(self, ctx: object, title: str, summaries: list[str], check: object = None) -> str:
        return summarise_parts(summaries, 2)

    async def write_section(self, ctx: object, kind: str, about: str, title: str, facts: list[dict[str, object]],
                            check: object = None) -> list[dict[str, object]]:
        return select_statements(kind, facts)  # sentences of the facts themselves: checked by the rule

    async def ground(self, ctx: object, doubts: object) -> list[int]:
        return []  # no judge here: what code refuses is the whole check (its rewrites are the sources' words)

    async def write_spec(self, ctx: object, name: str, statements: list[dict[str, object]]) -> list[dict[str, object]]:
        return select_requirements(statements)

    async def abstract(self, ctx: object, title: str, summaries: list[str], check: object = None) -> str:
        return summarise("\n\n".join(summaries), 2)
