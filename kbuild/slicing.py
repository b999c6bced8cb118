"""Slicing a converted source (text.md) into chunks of whole lines.

A chunk is a span of whole lines of text.md. Chunks tile the text, end only
where a sentence, a paragraph or a section ends, stay between a floor and a cap
of estimated tokens, and above all are *stable*: a small edit of a long source
changes the chunk it falls in and at most one neighbour, so that an incremental
build redoes only those.

Boundaries are content-defined (see docs/slicing.md):

* every place a chunk may end is a *candidate*, ranked by its kind (a heading,
  then a paragraph break, then a sentence that ends a line, then any other line
  end) and, within a kind, by a hash of the few characters around it;
* candidates are accepted best-ranked first, skipping any that would make a
  chunk smaller than the floor next to an already accepted one (a chunk that
  runs from a heading to a top-level heading may be as small as a quarter of
  the floor: a section of its own);
* a chunk still over the cap is split at its best-ranked place.

What decides a boundary is therefore the text within about a floor's distance
of it, never how far it is from the start of the document: after an edit the
boundaries further away stay where they were, and the chunks between them keep
their exact text.

Standard library only; no tokenizer, model or download.
"""
from __future__ import annotations

import bisect
import hashlib
import re
from collections import deque
from dataclasses import dataclass
from typing import Callable, NamedTuple

__all__ = [
    "Chunk",
    "Sentence",
    "chunk_texts",
    "estimate_tokens",
    "sentence_spans",
    "slice_text",
    "split_sentences",
]


@dataclass(frozen=True)
class Chunk:
    start: int  # first line, 1-based, inclusive (line numbers of text.md)
    end: int  # last line, 1-based, inclusive
    headings: tuple[str, ...]  # heading chain in force at the chunk's start, outermost first
    pages: tuple[int, int] | None  # first and last page covered; None without page markers
    tokens: int  # estimate_tokens() of the span's text


# --------------------------------------------------------------------------- tokens

# Characters of scripts written without spaces count as a token each; anything
# else as a quarter of one. Counted in quarter tokens ("units") so that the
# tokens of a span are exactly the sum over its lines.
_WIDE = re.compile(
    "[\u1100-\u11ff\u2e80-\u2fdf\u3000-\u9fff\ua000-\ua4cf\uac00-\ud7af"
    "\uf900-\ufaff\uff00-\uffef\U00020000-\U0003ffff]"
)
_UNITS_PER_TOKEN = 4


def _units(text: str) -> int:
    n = len(text)
    if n and not text.isascii():
        n += (_UNITS_PER_TOKEN - 1) * len(_WIDE.findall(text))
    return n


def estimate_tokens(text: str) -> int:
    """A cheap, deterministic token estimate: about four characters a token,
    one token per CJK character."""
    return -(-_units(text) // _UNITS_PER_TOKEN)


# --------------------------------------------------------------------------- sentences

# Never a sentence end when the word before the period is one of these.
_ABBREV = frozenset(
    """mr mrs ms mssrs messrs dr prof sr st mt vs cf viz approx ca resp esp incl dept
    univ gen col lt sgt capt gov sen rep rev fig figs eq eqs al ibid cit op ed eds
    fn ff""".split()
)
# ... nor before a number ("No. 5", "pp. 10", "Jan. 2020").
_ABBREV_NUM = frozenset(
    """no nos nr p pp vol vols fig figs eq eqs sec secs ch chap art ref refs v ver
    ex jan feb mar apr jun jul aug sep sept oct nov dec""".split()
)
_CLOSERS = "\"'\u201d\u2019\u00bb)]}*_`"
_CJK_TERMS = "\u3002\uff01\uff1f"  # 。！？
# A terminator (with the quotes and brackets that close around it) followed by
# white space or the end of the text; CJK terminators need no space after them.
_END_RE = re.compile(
    r"(?:\.\.\.|\u2026|[.!?]+)[" + re.escape(_CLOSERS) + r"]*(?=\s|$)"
    r"|[" + _CJK_TERMS + r"][" + re.escape(_CLOSERS) + r"]*"
)
_LINE_END_RE = re.compile(
    r"(?:\.\.\.|\u2026|[.!?" + _CJK_TERMS + r"]+)[" + re.escape(_CLOSERS) + r"]*$"
)
_TERM_CHARS = frozenset(".!?\u2026" + _CJK_TERMS + _CLOSERS)
_WORD_BEFORE = re.compile(r"(\S*)$")
_INITIALS = re.compile(r"^(?:[A-Za-z]\.)+[A-Za-z]$")  # e.g, i.e, U.S, a.m


class Sentence(NamedTuple):
    start: int  # offset of the first character in the text
    end: int  # offset just past the terminator (and closing quotes/brackets)
    text: str  # the sentence with runs of white space collapsed to one space


def _end_ok(before: str, term: str, after: str, *, line_start: bool) -> bool:
    """Is `term` (a terminator and its closers), between `before` and `after`,
    the end of a sentence?"""
    if term[0] in _CJK_TERMS:
        return True
    nxt = after.lstrip()[:1]
    if nxt and (nxt.islower() or nxt in ",;:"):
        return False  # "e.g. the", "approx. five", "etc., and"
    core = term.rstrip(_CLOSERS)
    word = _WORD_BEFORE.search(before).group(1).lstrip("([{\"'\u201c\u2018*_`")
    if core == ".":
        low = word.lower()
        if low in _ABBREV or _INITIALS.match(word):
            return False
        if len(word) == 1 and word.isalpha() and word.isupper():
            return False  # an initial: "J. Smith"
        if nxt.isdigit() and low in _ABBREV_NUM:
            return False
        if word.isdigit() and len(word) <= 3 and line_start:
            return False  # "1. item": a list marker
    return True


def sentence_spans(text: str) -> list[Sentence]:
    """Split text into sentences; blank lines always end one.

    A period ends a sentence unless it belongs to an abbreviation ("e.g.",
    "Dr.", "No. 5"), an initial ("J. Smith"), a number ("3.5"), a URL or a
    dotted name (no space after it), a list marker ("1. "), or the next word
    starts in lower case. Closing quotes and brackets after the terminator stay
    with the sentence. Empty pieces are dropped."""
    out: list[Sentence] = []
    for pm in re.finditer(r"(?:[^\n]|\n(?![ \t\r\f\v]*\n))+", text):
        para_start, para = pm.start(), pm.group()
        start = 0
        for m in _END_RE.finditer(para):
            before = para[max(0, m.start() - 40):m.start()]
            word_at = m.start() - len(_WORD_BEFORE.search(before).group(1))
            line_start = para[para.rfind("\n", 0, word_at) + 1:word_at].strip() == ""
            if _end_ok(before, m.group(), para[m.end():m.end() + 8], line_start=line_start):
                _add_sentence(out, para, para_start, start, m.end())
                start = m.end()
        _add_sentence(out, para, para_start, start, len(para))
    return out


def _add_sentence(out: list[Sentence], para: str, offset: int, start: int, end: int) -> None:
    piece = para[start:end]
    stripped = piece.strip()
    if stripped:
        lead = len(piece) - len(piece.lstrip())
        first = offset + start + lead
        out.append(Sentence(first, first + len(stripped), " ".join(stripped.split())))


def split_sentences(text: str) -> list[str]:
    """The sentences of text, white space collapsed (see sentence_spans)."""
    return [s.text for s in sentence_spans(text)]


def _line_ends_sentence(line: str, next_line: str) -> bool:
    """Does a sentence end at the end of `line`, given the line after it?"""
    body = line.rstrip()
    if not body or body[-1] not in _TERM_CHARS:
        return False
    m = _LINE_END_RE.search(body)
    if not m:
        return False
    before = body[:m.start()]
    line_start = _WORD_BEFORE.search(before).group(1) == before.lstrip()
    return _end_ok(before[-40:], m.group(), next_line[:8], line_start=line_start)


# --------------------------------------------------------------------------- structure

_PAGE_RE = re.compile(r"^\s*<!--\s*page\s+(\d+)\s*-->\s*$", re.I)
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ATX_RE = re.compile(r"^(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_ADORN_RE = re.compile(r"^([!-/:-@\[-`{-~])\1{2,}[ \t\r]*$")  # one punctuation character, 3+ times
_LIST_RE = re.compile(r"^\s*(?:[-*+\u2022]|\d{1,3}[.)]|#\.)\s+\S")
_DIRECTIVE_RE = re.compile(r"^\s*\.\.\s+[\w:.-]+::")

_BLANK, _MARKER, _CONTENT = 0, 1, 2

# Candidate classes, best first.
_C_H1, _C_H2, _C_H3, _C_PARA, _C_SENT, _C_LINE = range(6)
# How small a chunk that runs from a section start to a heading may be, as a
# share of the floor, by the tier of the heading that ends it (1: top level,
# 2: the level below, 3: deeper); other chunks hold at least the floor.
_HEADING_SHARE = {1: 0.25}
_KEY_CHARS = 32  # characters of text that the rank of a candidate depends on


class _Doc:
    """Lines of a text and what the slicer needs to know about them."""

    def __init__(self, text: str, headings: bool = True) -> None:
        lines = text.split("\n")
        newline_last = bool(lines) and lines[-1] == ""
        if newline_last:
            lines.pop()
        self.lines = lines
        n = len(lines)
        self.kind = kind = [_CONTENT] * n
        self.page: list[int | None] = [None] * n
        self.fence = fence = [False] * n  # inside a fenced code block (fence lines included)
        self.fence_open = [False] * n
        self.fence_close = [False] * n
        self.units = units = [0] * (n + 1)  # units[i]: units of lines before line i

        page = None
        first_page = None
        open_fence = ""
        for i, line in enumerate(lines):
            units[i + 1] = units[i] + _units(line) + (1 if (i < n - 1 or newline_last) else 0)
            pm = _PAGE_RE.match(line)
            if pm:  # page markers count even inside code: a stray fence must not hide them
                kind[i] = _MARKER
                page = int(pm.group(1))
                if first_page is None:
                    first_page = page
                fence[i] = bool(open_fence)
                self.page[i] = page
                continue
            if open_fence:
                fence[i] = True
                stripped = line.strip()
                if stripped.startswith(open_fence) and stripped.strip(open_fence[0]) == "":
                    self.fence_close[i] = True
                    open_fence = ""
                if not line.strip():
                    kind[i] = _BLANK
                self.page[i] = page
                continue
            if not line.strip():
                kind[i] = _BLANK
            else:
                fm = _FENCE_RE.match(line)
                if fm and fm.group(1)[0] == "~" and _ADORN_RE.match(line) and i and kind[i - 1] == _CONTENT:
                    fm = None  # a reST underline, not a fence
                if fm:
                    open_fence = fm.group(1)
                    fence[i] = True
                    self.fence_open[i] = True
            self.page[i] = page
        self.has_pages = first_page is not None
        if self.has_pages:
            self.page = [first_page if p is None else p for p in self.page]
        if headings:
            self._find_headings()
        else:
            self.headings: dict[int, tuple[int, int, str]] = {}
            self.in_heading = [False] * n
            self.top_level = 1

    def _find_headings(self) -> None:
        lines, kind, fence = self.lines, self.kind, self.fence
        n = len(lines)
        found: list[tuple[int, int, object, str]] = []  # (start, last line, style, title)
        in_heading = [False] * n
        i = 0
        if n and lines[0].rstrip() == "---":  # YAML front matter is no heading
            end = next((k for k in range(1, min(n, 200)) if lines[k].rstrip() in ("---", "...")), 0)
            i = end + 1
        while i < n:
            if kind[i] != _CONTENT or fence[i]:
                i += 1
                continue
            line = lines[i]
            m = _ATX_RE.match(line)
            if m:
                found.append((i, i, len(m.group(1)), (m.group(2) or "").strip()))
                in_heading[i] = True
                i += 1
                continue
            if (
                i + 1 < n
                and kind[i + 1] == _CONTENT
                and not fence[i + 1]
                and not _ADORN_RE.match(line)
                and _ADORN_RE.match(lines[i + 1])
            ):
                under = lines[i + 1].strip()
                prev = i - 1
                if (
                    prev >= 0
                    and kind[prev] == _CONTENT
                    and not in_heading[prev]
                    and _ADORN_RE.match(lines[prev])
                    and lines[prev].strip()[0] == under[0]
                ):
                    found.append((prev, i + 1, (under[0], True), line.strip()))
                    in_heading[prev] = in_heading[i] = in_heading[i + 1] = True
                    i += 2
                    continue
                if (prev < 0 or kind[prev] != _CONTENT) and not line[0].isspace():
                    found.append((i, i + 1, (under[0], False), line.strip()))
                    in_heading[i] = in_heading[i + 1] = True
                    i += 2
                    continue
            i += 1

        # Levels: ATX headings by their number of #; underlined ones by order of
        # first appearance (reST), except that next to ATX headings (Markdown)
        # "=" is level 1 and "-" level 2.
        markdown = any(isinstance(style, int) for _, _, style, _ in found)
        order: dict[object, int] = {("=", False): 1, ("-", False): 2} if markdown else {}
        self.headings: dict[int, tuple[int, int, str]] = {}  # start -> (level, last line, title)
        for start, last, style, title in found:
            if isinstance(style, int):
                level = style
            else:
                level = order.setdefault(style, len(order) + 1)
            self.headings[start] = (level, last, title)
        # The top level: the shallowest that occurs twice (a lone "# Title" above
        # "## Sections" leaves the sections on top), else the shallowest.
        levels = [level for level, _, _ in self.headings.values()]
        repeated = [level for level in set(levels) if levels.count(level) > 1]
        self.top_level = min(repeated or levels or [1])
        self.in_heading = in_heading


# --------------------------------------------------------------------------- candidates


class _Cand(NamedTuple):
    pos: int  # units before the cut
    cut: int  # 0-based line that starts the next chunk
    cls: int
    rank: int  # hash of the text around the boundary
    j: int  # last content line before the cut
    k: int  # first content line after it
    level: int  # tier of the heading at line k (1 top, 2 next, 3 deeper), 0 for none


def _norm(text: str) -> str:
    return " ".join(text.split())


def _block_opening(doc: _Doc, start: int, j: int) -> str:
    """The first _KEY_CHARS characters of lines start..j, white space normalised."""
    parts: list[str] = []
    size = 0
    for i in range(start, j + 1):
        if doc.kind[i] == _CONTENT:
            parts.append(doc.lines[i])
            size += len(parts[-1])
            if size > 2 * _KEY_CHARS:
                break
    return _norm(" ".join(parts))[:_KEY_CHARS]


def _sentence_opening(doc: _Doc, start: int, j: int) -> str:
    """The first _KEY_CHARS characters of the sentence that ends at line j (or
    of the list item on it), looking back at most a few lines of its block."""
    lo = max(start, j - 5)
    for i in range(j, lo - 1, -1):
        if _LIST_RE.match(doc.lines[i]):
            lo = i
            break
    spans = sentence_spans("\n".join(doc.lines[lo:j + 1]))
    return spans[-1].text[:_KEY_CHARS] if spans else ""


def _hash(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big")


def _candidates(doc: _Doc) -> list[_Cand]:
    """Every place a chunk may start, in line order."""
    lines, kind, fence, in_heading, headings = doc.lines, doc.kind, doc.fence, doc.in_heading, doc.headings
    out: list[_Cand] = []
    prev = -1  # last content line seen
    marker = -1  # first marker line after prev
    blank = False
    block = 0  # first line of the block (lines not parted by blank ones) that prev is in
    for k, kd in enumerate(kind):
        if kd == _BLANK:
            blank = True
            continue
        if kd == _MARKER:
            if marker < 0:
                marker = k
            continue
        j, j_block = prev, block
        prev = k
        cut_marker, had_blank = marker, blank
        marker, blank = -1, False
        if had_blank or j < 0:
            block = k
        if j < 0:
            continue
        head = headings.get(k)
        if in_heading[j] or (in_heading[k] and head is None):
            continue  # never end a chunk on a heading, nor cut through one
        if head is not None:
            level = 1 if head[0] <= doc.top_level else 2 if head[0] == doc.top_level + 1 else 3
            cls = _C_H1 - 1 + level
            key = "#" + head[2]
        else:
            level = 0
            if had_blank:
                if fence[j] and fence[k] and not doc.fence_close[j] and not doc.fence_open[k]:
                    cls = _C_SENT  # a blank line inside a code block
                elif _DIRECTIVE_RE.match(lines[j]):
                    cls = _C_LINE  # ".. code-block::" and the block it introduces
                elif lines[j].rstrip().endswith(":") or (lines[j][:1].isspace() and lines[k][:1].isspace()):
                    cls = _C_SENT  # an introduction and what it introduces; inside an indented block
                else:
                    cls = _C_PARA
            elif fence[j] or fence[k]:
                cls = _C_SENT if (doc.fence_open[k] or doc.fence_close[j]) else _C_LINE
            elif _LIST_RE.match(lines[k]) or _line_ends_sentence(lines[j], lines[k].lstrip()):
                cls = _C_SENT
            else:
                cls = _C_LINE
            # The rank of a place comes from the opening of the paragraph (or
            # sentence) that it closes: not from the text right at it, so that
            # editing the sentences on either side of a boundary seldom moves it.
            # Plain line ends are many and seldom needed: ranked on demand (_ranked).
            if cls == _C_LINE:
                key = ""
            elif had_blank:
                key = _block_opening(doc, j_block, j)
            else:
                key = _sentence_opening(doc, j_block, j)
        cut = cut_marker if cut_marker >= 0 else k
        out.append(_Cand(doc.units[cut], cut, cls, _hash(key) if key else -1, j, k, level))
    return out


def _ranked(doc: _Doc, c: _Cand) -> _Cand:
    if c.rank >= 0:
        return c
    key = _norm(doc.lines[c.j])[:48] + "\x00" + _norm(doc.lines[c.k])[:16]
    return c._replace(rank=_hash(key))


# --------------------------------------------------------------------------- boundaries


class _Bound(NamedTuple):
    pos: int
    cut: int
    level: int  # tier of the heading that starts the chunk after it; 1 for the end; 0 for none
    section: bool  # the start of the text, a heading or the end of the text


def _min_gap(a: _Bound, b: _Bound, floor_units: int) -> float:
    """The smallest chunk allowed from boundary a to boundary b."""
    if a.section and b.section:
        return floor_units * _HEADING_SHARE.get(b.level, 1.0)
    return floor_units


def _as_bound(c: _Cand) -> _Bound:
    return _Bound(c.pos, c.cut, c.level, c.level > 0)


def _greedy(doc: _Doc, cands: list[_Cand], bounds: list[_Bound], floor_units: int) -> list[_Bound]:
    """Accept candidates best first unless one would leave a chunk below the
    floor next to an accepted boundary. `bounds` (sorted) are accepted already."""
    pos = [b.pos for b in bounds]
    bounds = list(bounds)

    def fits(c: _Cand) -> int:
        """Where c goes in the accepted boundaries, or 0 if it does not fit."""
        i = bisect.bisect_left(pos, c.pos)
        if i == 0 or i >= len(pos) or pos[i] == c.pos:
            return 0
        b = _as_bound(c)
        if c.pos - pos[i - 1] < _min_gap(bounds[i - 1], b, floor_units):
            return 0
        if pos[i] - c.pos < _min_gap(b, bounds[i], floor_units):
            return 0
        return i

    def accept(ordered: list[_Cand]) -> None:
        for c in ordered:
            i = fits(c)
            if i:
                pos.insert(i, c.pos)
                bounds.insert(i, _as_bound(c))

    # Plain line ends are left to _split_range, for chunks still over the cap.
    accept(sorted((c for c in cands if c.cls < _C_LINE), key=lambda c: (c.cls, c.rank, c.pos)))
    return bounds


def _split_oversize(doc: _Doc, bounds: list[_Bound], cands: list[_Cand], floor_units: int,
                    cap_units: int) -> list[_Bound]:
    """Split every chunk above the cap that has more than one line, at the best
    candidate inside it (keeping both parts above the floor when possible)."""
    cpos = [c.pos for c in cands]
    out = [bounds[0]]
    for b in bounds[1:]:
        out.extend(_split_range(doc, out[-1], b, cands, cpos, floor_units, cap_units))
        out.append(b)
    return out


def _split_range(doc: _Doc, a: _Bound, b: _Bound, cands: list[_Cand], cpos: list[int],
                 floor_units: int, cap_units: int) -> list[_Bound]:
    if b.pos - a.pos <= cap_units:
        return []
    inside = [_ranked(doc, c) for c in cands[bisect.bisect_right(cpos, a.pos):bisect.bisect_left(cpos, b.pos)]]
    if not inside:
        return []  # one line, or lines that may not be parted: over the cap alone
    # The best-ranked place of the best kind that leaves both parts at the
    # floor, or short of it by at most a quarter of it (a paragraph break a
    # little short beats a plain line end); failing that, the cut that falls
    # short the least. Parts still over the cap are split again.
    def badness(c: _Cand) -> tuple:
        m = _as_bound(c)
        short = (max(0, _min_gap(a, m, floor_units) - (c.pos - a.pos))
                 + max(0, _min_gap(m, b, floor_units) - (b.pos - c.pos)))
        return (short > floor_units / 4 and short, c.cls, short, c.rank, c.pos)

    best = min(inside, key=badness)
    m = _as_bound(best)
    return (_split_range(doc, a, m, cands, cpos, floor_units, cap_units) + [m]
            + _split_range(doc, m, b, cands, cpos, floor_units, cap_units))


def _strict_window_minima(cands: list[_Cand], radius: int) -> list[_Cand]:
    """Candidates ranked strictly better than every other within `radius` units."""
    out = []
    n = len(cands)
    keys = [(c.cls, c.rank, c.pos) for c in cands]
    # Sliding-window minimum with a deque of indices over [pos - radius, pos + radius].
    dq: deque[int] = deque()
    hi = 0
    for i, c in enumerate(cands):
        while hi < n and cands[hi].pos <= c.pos + radius:
            while dq and keys[dq[-1]] >= keys[hi]:
                dq.pop()
            dq.append(hi)
            hi += 1
        while dq and cands[dq[0]].pos < c.pos - radius:
            dq.popleft()
        if dq and dq[0] == i:
            out.append(c)
    return out


def _last_sentence(doc: _Doc, c: _Cand) -> str:
    """The sentence a candidate boundary ends (for choose_end)."""
    parts: list[str] = []
    i = c.j
    while i >= 0 and len(parts) < 40:
        if doc.kind[i] == _BLANK or doc.in_heading[i]:
            break
        if doc.kind[i] == _CONTENT:
            parts.append(doc.lines[i])
        i -= 1
    sentences = split_sentences("\n".join(reversed(parts)))
    return sentences[-1] if sentences else ""


def _choose(doc: _Doc, fixed: list[_Bound], cands: list[_Cand], floor_units: int, cap_units: int,
            choose_end: Callable[[list[str]], int]) -> list[_Bound]:
    cpos = [c.pos for c in cands]
    fixed_pos = {b.pos for b in fixed}
    out = [fixed[0]]
    for b in fixed[1:]:
        s = out[-1]
        while b.pos - s.pos > cap_units:
            inside = [c for c in cands[bisect.bisect_right(cpos, s.pos):bisect.bisect_left(cpos, b.pos)]
                      if c.pos not in fixed_pos and c.pos - s.pos <= cap_units]
            window = [c for c in inside
                      if c.pos - s.pos >= _min_gap(s, _as_bound(c), floor_units)
                      and b.pos - c.pos >= _min_gap(_as_bound(c), b, floor_units)]
            if not window:
                window = [c for c in inside if c.pos - s.pos >= _min_gap(s, _as_bound(c), floor_units)]
            if not window:
                window = inside[-1:]
            if not window:
                break  # nothing to cut at before the cap: the cap pass splits or keeps it
            if any(c.cls < _C_LINE for c in window):
                window = [c for c in window if c.cls < _C_LINE]
            if len(window) == 1:
                index = 0
            else:
                index = choose_end([_last_sentence(doc, c) for c in window])
                if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(window):
                    raise ValueError(f"choose_end returned {index!r} for {len(window)} candidates")
            s = _as_bound(window[index])
            out.append(s)
        out.append(b)
    return out


# --------------------------------------------------------------------------- slicing


def slice_text(
    text: str,
    floor_tokens: int = 2000,
    cap_tokens: int = 4000,
    choose_end: Callable[[list[str]], int] | None = None,
    *,
    headings: bool = True,
) -> list[Chunk]:
    """Split text (the text of a text.md) into chunks of whole lines.

    Chunks tile the text. Each ends at a heading, a paragraph break or the end
    of a line that ends a sentence (a line end of any kind only when a
    paragraph has no such place before the cap). Chunks hold at least
    `floor_tokens` (or half the cap, if that is less), except the only chunk of
    a short text and sections that end at a heading (see docs/slicing.md), and
    at most `cap_tokens`, except a single line bigger than the cap, which is a
    chunk of its own.

    choose_end, when given, picks where a chunk ends: it is called with the
    sentences that end at the candidate places between the floor and the cap
    (white space collapsed, in order) and returns the index of the one to end
    at. It is called only where there is a choice between two or more, and
    never across headings that start a section of their own. Without it the
    choice is a content-defined rule that keeps chunks stable under edits.

    headings=False treats "# ..." and underlined lines as text (for code,
    where they are comments).
    """
    if floor_tokens < 1 or cap_tokens < 1:
        raise ValueError("floor_tokens and cap_tokens must be positive")
    if cap_tokens < floor_tokens:
        raise ValueError("cap_tokens must not be smaller than floor_tokens")
    doc = _Doc(text, headings)
    n = len(doc.lines)
    if n == 0:
        return []
    floor_units = min(floor_tokens * _UNITS_PER_TOKEN, cap_tokens * _UNITS_PER_TOKEN // 2)
    cap_units = cap_tokens * _UNITS_PER_TOKEN
    cands = _candidates(doc)
    ends = [_Bound(0, 0, 0, True), _Bound(doc.units[n], n, 1, True)]

    if choose_end is None:
        bounds = _greedy(doc, cands, ends, floor_units)
    else:
        heads = [c for c in cands if c.level]
        structural = _greedy(doc, heads, ends, floor_units)
        # Resynchronisation points between which the chooser's choices cannot
        # drift: the best-ranked paragraph or sentence end within two caps.
        spos = [b.pos for b in structural]
        anchors = []
        for c in _strict_window_minima([c for c in cands if not c.level and c.cls <= _C_SENT],
                                       2 * cap_units):
            i = bisect.bisect_left(spos, c.pos)
            if 0 < i < len(spos) and spos[i] != c.pos:
                b = _as_bound(c)
                if (c.pos - spos[i - 1] >= _min_gap(structural[i - 1], b, floor_units)
                        and spos[i] - c.pos >= _min_gap(b, structural[i], floor_units)):
                    anchors.append(b)
        fixed = sorted(structural + anchors, key=lambda b: b.pos)
        bounds = _choose(doc, fixed, cands, floor_units, cap_units, choose_end)
    bounds = _split_oversize(doc, bounds, cands, floor_units, cap_units)
    return _make_chunks(doc, [b.cut for b in bounds])


def _make_chunks(doc: _Doc, cuts: list[int]) -> list[Chunk]:
    n = len(doc.lines)
    cuts = sorted(set(cuts) | {0, n})
    stack: list[tuple[int, str]] = []
    heading_starts = sorted(doc.headings)
    h = 0
    chunks = []
    for s, e in zip(cuts, cuts[1:]):
        first = s
        while first < e and doc.kind[first] != _CONTENT:
            first += 1
        while h < len(heading_starts) and heading_starts[h] <= first:
            level, _, title = doc.headings[heading_starts[h]]
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
            h += 1
        pages = None
        if doc.has_pages:
            content = [i for i in (first, _last_content(doc, s, e)) if 0 <= i < e and doc.kind[i] == _CONTENT]
            lo = doc.page[content[0]] if content else doc.page[s]
            hi = doc.page[content[-1]] if content else doc.page[e - 1]
            pages = (lo, hi)
        tokens = -(-(doc.units[e] - doc.units[s]) // _UNITS_PER_TOKEN)
        chunks.append(Chunk(s + 1, e, tuple(t for _, t in stack), pages, tokens))
    return chunks


def _last_content(doc: _Doc, s: int, e: int) -> int:
    i = e - 1
    while i >= s and doc.kind[i] != _CONTENT:
        i -= 1
    return i


def chunk_texts(text: str, chunks: list[Chunk]) -> list[str]:
    """The text of each chunk: its lines with their line ends."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return ["".join(lines[c.start - 1:c.end]) for c in chunks]
