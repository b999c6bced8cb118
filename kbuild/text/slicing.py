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
  chunk smaller than the floor next to an already accepted one: small
  neighbouring sections share a chunk, and since a higher heading ranks
  first, the sections that share one are those under a common parent;
* a chunk still over the cap is split at its best-ranked place.

What decides a boundary is therefore the text within about a floor's distance
of it, never how far it is from the start of the document: after an edit the
boundaries further away stay where they were, and the chunks between them keep
their exact text.

Top-level headings are weighed before any other place, among themselves alone, so the ones
accepted part the text into *regions* that are sliced independently (`layout`, `slice_region`):
a build re-slices the region an edit falls in, not the whole text.

Each chunk names the headings it covers, and `fact_names` turns those into
file names that hold still when the text around them changes.

No tokenizer, model or download.
"""
from __future__ import annotations

import bisect
import functools
import hashlib
import itertools
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, NamedTuple

from kbuild.text.markdown import ATX_HEADING, FENCE, LIST_ITEM, PAGE_MARKER, UNDERLINE, visible_text
from kbuild.text.sentences import line_ends_sentence, sentence_spans
from kbuild.text.slugs import slug, unique
from kbuild.text.tokens import UNITS_PER_TOKEN, units

__all__ = ["Chunk", "Region", "chunk_texts", "fact_names", "layout", "region_texts", "slice_region", "slice_text"]


@dataclass(frozen=True)
class Chunk:
    start: int  # first line, 1-based, inclusive (line numbers of text.md)
    end: int  # last line, 1-based, inclusive
    headings: tuple[str, ...]  # heading chain in force at the chunk's start, outermost first
    pages: tuple[int, int] | None  # first and last page covered; None without page markers
    tokens: int  # estimate_tokens() of the span's text
    # Every section the chunk holds text of, in order: the one in force at its start, then each
    # heading inside it (visible text). A chunk of several small sections lists them all, so that
    # its index line and breadcrumb name each.
    covers: tuple[str, ...] = ()
    continued: bool = False  # it starts inside a section that an earlier chunk started
    levels: tuple[int, ...] = ()  # the level of each heading in covers (1 for "#", 2 for "##"...)


# --------------------------------------------------------------------------- structure

_DIRECTIVE_RE = re.compile(r"^\s*\.\.\s+[\w:.-]+::")

_BLANK, _MARKER, _CONTENT = 0, 1, 2
_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")  # UNDERLINE's first character: [!-/:-@\[-`{-~]

# Candidate classes, best first.
_C_H1, _C_H2, _C_H3, _C_PARA, _C_SENT, _C_LINE = range(6)
_KEY_CHARS = 32  # characters of text that the rank of a candidate depends on


def _count_units(before: list[int], lines: list[str], newline_last: bool, ascii: bool) -> None:
    """before[i]: the units of lines before line i, each with its newline (the last one's only
    when the text ends with one). ASCII lines' units are their lengths: summed without a call a line."""
    sizes = map(len, lines) if ascii else map(units, lines)
    before[1:] = itertools.accumulate(size + 1 for size in sizes)
    if lines and not newline_last:
        before[len(lines)] -= 1


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
        self.units = before = [0] * (n + 1)  # before[i]: units of the lines before line i

        _count_units(before, lines, newline_last, text.isascii())
        page = None
        first_page = None
        open_fence = ""
        pages = self.page  # None until the first page marker, which most texts never have
        for i, line in enumerate(lines):
            # each pattern is tried only on a line that holds the character it needs: most hold none
            pm = PAGE_MARKER.match(line) if "<!--" in line else None
            if pm:  # page markers count even inside code: a stray fence must not hide them
                kind[i] = _MARKER
                page = int(pm.group(1))
                if first_page is None:
                    first_page = page
                fence[i] = bool(open_fence)
                pages[i] = page
                continue
            if open_fence:
                fence[i] = True
                stripped = line.strip()
                if stripped.startswith(open_fence) and stripped.strip(open_fence[0]) == "":
                    self.fence_close[i] = True
                    open_fence = ""
                if not stripped:
                    kind[i] = _BLANK
                if page is not None:
                    pages[i] = page
                continue
            if not line.strip():
                kind[i] = _BLANK
            else:
                fm = FENCE.match(line) if "`" in line or "~" in line else None
                if fm and fm.group(1)[0] == "~" and UNDERLINE.match(line) and i and kind[i - 1] == _CONTENT:
                    fm = None  # a reST underline, not a fence
                if fm:
                    open_fence = fm.group(1)
                    fence[i] = True
                    self.fence_open[i] = True
            if page is not None:
                pages[i] = page
        self.has_pages = first_page is not None
        if self.has_pages:
            self.page = [first_page if p is None else p for p in self.page]
        if headings:
            self._find_headings()
        else:
            self.headings: dict[int, tuple[int, str]] = {}
            self.in_heading = [False] * n
            self.top_level = 1

    @classmethod
    def of_region(cls, region: Region) -> _Doc:
        """A region's lines as the slicer sees them, numbered from its first (0)."""
        doc = cls.__new__(cls)
        doc.lines = lines = region.lines
        n = len(lines)
        doc.kind = [int(k) for k in region.kinds]
        doc.has_pages = region.pages is not None
        doc.page = list(region.pages) if region.pages is not None else [None] * n
        doc.headings = {line: (level, title) for line, level, title in region.headings}
        doc.units = [0] * (n + 1)
        _count_units(doc.units, lines, region.newline_last, all(map(str.isascii, lines)))
        return doc

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
            m = ATX_HEADING.match(line) if line[:1] == "#" else None
            if m:
                found.append((i, i, len(m.group(1)), (m.group(2) or "").strip()))
                in_heading[i] = True
                i += 1
                continue
            if (
                i + 1 < n
                and kind[i + 1] == _CONTENT
                and not fence[i + 1]
                and lines[i + 1][:1] in _PUNCTUATION  # what an underline starts with, looked at first
                and not UNDERLINE.match(line)
                and UNDERLINE.match(lines[i + 1])
            ):
                under = lines[i + 1].strip()
                prev = i - 1
                if (
                    prev >= 0
                    and kind[prev] == _CONTENT
                    and not in_heading[prev]
                    and UNDERLINE.match(lines[prev])
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
        self.headings: dict[int, tuple[int, str]] = {}  # start -> (level, title)
        for start, _, style, title in found:
            if isinstance(style, int):
                level = style
            else:
                level = order.setdefault(style, len(order) + 1)
            self.headings[start] = (level, visible_text(title))
        # The top level: the shallowest that occurs twice (a lone "# Title" above
        # "## Sections" leaves the sections on top), else the shallowest.
        levels = [level for level, _ in self.headings.values()]
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
        if LIST_ITEM.match(doc.lines[i]):
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
            tier = 1 if head[0] <= doc.top_level else 2 if head[0] == doc.top_level + 1 else 3
            cls = _C_H1 - 1 + tier
            key = "#" + head[1]
        else:
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
            elif LIST_ITEM.match(lines[k]) or line_ends_sentence(lines[j], lines[k].lstrip()):
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
        out.append(_Cand(doc.units[cut], cut, cls, _hash(key) if key else -1, j, k))
    return out


def _ranked(doc: _Doc, c: _Cand) -> _Cand:
    if c.rank >= 0:
        return c
    key = _norm(doc.lines[c.j])[:48] + "\x00" + _norm(doc.lines[c.k])[:16]
    return c._replace(rank=_hash(key))


# --------------------------------------------------------------------------- boundaries


class _Bound(NamedTuple):
    pos: int  # units before it
    cut: int  # 0-based line that starts the chunk after it


def _as_bound(c: _Cand) -> _Bound:
    return _Bound(c.pos, c.cut)


def _greedy(cands: list[_Cand], bounds: list[_Bound], floor_units: int) -> list[_Bound]:
    """Accept candidates best first unless one would leave a chunk below the
    floor next to an accepted boundary. `bounds` (sorted) are accepted already."""
    pos = [b.pos for b in bounds]
    bounds = list(bounds)
    # Plain line ends are left to _split_range, for chunks still over the cap.
    for c in sorted((c for c in cands if c.cls < _C_LINE), key=lambda c: (c.cls, c.rank, c.pos)):
        i = bisect.bisect_left(pos, c.pos)
        if 0 < i < len(pos) and c.pos - pos[i - 1] >= floor_units and pos[i] - c.pos >= floor_units:
            pos.insert(i, c.pos)
            bounds.insert(i, _as_bound(c))
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
    # floor, or short of it by at most a quarter of it (a heading or a
    # paragraph break a little short beats a plain line end); failing that,
    # the cut that falls short the least. Parts still over the cap are split again.
    def badness(c: _Cand) -> tuple:
        short = max(0, floor_units - (c.pos - a.pos)) + max(0, floor_units - (b.pos - c.pos))
        return (short > floor_units / 4 and short, c.cls, short, c.rank, c.pos)

    m = _as_bound(min(inside, key=badness))
    return (_split_range(doc, a, m, cands, cpos, floor_units, cap_units) + [m]
            + _split_range(doc, m, b, cands, cpos, floor_units, cap_units))


# --------------------------------------------------------------------------- slicing


def slice_text(text: str, floor_tokens: int = 2000, cap_tokens: int = 4000, *, headings: bool = True) -> list[Chunk]:
    """Split text (the text of a text.md) into chunks of whole lines.

    Chunks tile the text. Each ends at a heading, a paragraph break or the end
    of a line that ends a sentence (a line end of any kind only when a
    paragraph has no such place before the cap). Chunks hold at least
    `floor_tokens` (or half the cap, if that is less), except the only chunk of
    a text smaller than that (see docs/slicing.md for the one other exception),
    and at most `cap_tokens`, except a single line bigger than the cap, which is a
    chunk of its own.

    headings=False treats "# ..." and underlined lines as text (for code,
    where they are comments).
    """
    return [chunk for region in layout(text, [(floor_tokens, cap_tokens)], headings=headings)
            for chunk in slice_region(region, floor_tokens, cap_tokens)]


@dataclass(frozen=True)
class Region:
    """A stretch of a text between two of its top-level headings where every slicing asked of
    `layout` cuts: all a slicing of it needs, positions counted from its own start, so that an
    edit elsewhere that adds no line leaves it equal. Plain lists, strings and numbers: a query
    value as it is (vars(region)), and the same when read back (Region(**value)).

    Why it is exact: `_greedy` weighs top-level headings before any other place, among
    themselves, so the ones it accepts are decided by them alone; every later place sees only
    its accepted neighbours, which never lie beyond a region's ends; and a chunk over the cap is
    split between its own ends. tests/test_slicing.py holds region-by-region slicing equal to
    the whole text's.
    """

    first: int  # its first line, 0-based, in text.md
    lines: list[str]
    kinds: str  # each line's kind: "0" blank, "1" a page marker, "2" content
    pages: list[int] | None  # each line's page; None without page markers
    headings: list[list[Any]]  # [line, level, visible title] of each heading in it
    stack: list[list[Any]]  # [level, title] of each heading in force at its start, outermost first
    places: list[list[int]]  # every place inside it a chunk may start (_Cand's fields)
    accepted: list[list[list[int]]]  # for each slicing asked, the top-level headings inside it that it cuts at
    newline_last: bool  # its last line ends in a line end (every region's but a text's without a final one)


def _sizes(floor_tokens: int, cap_tokens: int) -> tuple[int, int]:
    """The floor and the cap in units."""
    if floor_tokens < 1 or cap_tokens < 1:
        raise ValueError("floor_tokens and cap_tokens must be positive")
    if cap_tokens < floor_tokens:
        raise ValueError("cap_tokens must not be smaller than floor_tokens")
    return min(floor_tokens * UNITS_PER_TOKEN, cap_tokens * UNITS_PER_TOKEN // 2), cap_tokens * UNITS_PER_TOKEN


# The least a region holds, in floors of the largest slicing asked (and at least 2,048 tokens):
# a region costs a build a few queries (and the lock their entries), paid where re-slicing it
# alone saves slicing dozens of chunks; a text of fewer is one region.
REGION_FLOORS, REGION_UNITS = 32, 8192


def layout(text: str, sizes: list[tuple[int, int]], *, headings: bool = True,
           region_units: int | None = None) -> list[Region]:
    """The text's regions: parted at top-level headings where a slicing at each of `sizes`
    (floor_tokens, cap_tokens) cuts, each region with all `slice_region` needs. A text without
    top-level headings (or headings=False) is one region.

    Of those headings, the ones that part regions are chosen as slicing chooses boundaries, best
    ranked first and at least `region_units` apart (by default REGION_FLOORS of the largest
    floor): by the text around them, so an edit moves only the region ends near it."""
    units_at = [_sizes(floor, cap)[0] for floor, cap in sizes]
    if region_units is None:
        region_units = max(REGION_UNITS, REGION_FLOORS * max(units_at))
    doc, cands = _analysed(text, headings)
    n = len(doc.lines)
    if n == 0:
        return []
    ends = [_Bound(0, 0), _Bound(doc.units[n], n)]
    tops = [c for c in cands if c.cls == _C_H1]
    accepted = [_greedy(tops, ends, floor_units) for floor_units in units_at]
    everywhere = set.intersection(*(set(a) for a in accepted))
    common = _greedy([c for c in tops if _as_bound(c) in everywhere], ends, max(1, region_units))
    cpos = [c.pos for c in cands]
    heading_starts = sorted(doc.headings)
    h = 0
    stack: list[tuple[int, str]] = []
    regions = []
    for a, b in zip(common, common[1:]):
        while h < len(heading_starts) and heading_starts[h] < a.cut:
            level, title = doc.headings[heading_starts[h]]
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
            h += 1
        inside = cands[bisect.bisect_right(cpos, a.pos):bisect.bisect_left(cpos, b.pos)]
        regions.append(Region(
            first=a.cut, lines=doc.lines[a.cut:b.cut], kinds="".join(map(str, doc.kind[a.cut:b.cut])),
            pages=doc.page[a.cut:b.cut] if doc.has_pages else None,
            headings=[[line - a.cut, *doc.headings[line]] for line in heading_starts[h:] if line < b.cut],
            stack=[list(s) for s in stack],
            places=[[c.pos - a.pos, c.cut - a.cut, c.cls, c.rank, c.j - a.cut, c.k - a.cut] for c in inside],
            accepted=[[[t.pos - a.pos, t.cut - a.cut] for t in tier if a.pos < t.pos < b.pos] for tier in accepted],
            newline_last=b.cut < n or text.endswith("\n")))
    return regions


def slice_region(region: Region, floor_tokens: int, cap_tokens: int, which: int = 0) -> list[Chunk]:
    """The chunks of one region, at the sizes `layout` was asked for as its `which`th, with
    lines numbered as in text.md: what slice_text gives for the region's lines."""
    floor_units, cap_units = _sizes(floor_tokens, cap_tokens)
    doc = _Doc.of_region(region)
    n = len(doc.lines)
    cands = [_Cand(*place) for place in region.places]
    accepted = [_Bound(pos, cut) for pos, cut in region.accepted[which]]
    # Its top-level headings are decided (`accepted`, or refused): the others are weighed between them.
    bounds = _greedy([c for c in cands if c.cls != _C_H1], [_Bound(0, 0), *accepted, _Bound(doc.units[n], n)],
                     floor_units)
    bounds = _split_oversize(doc, bounds, cands, floor_units, cap_units)
    return _make_chunks(doc, [b.cut for b in bounds], [(level, title) for level, title in region.stack],
                        region.first)


def region_texts(region: Region, chunks: list[Chunk]) -> list[str]:
    """The text of each of a region's chunks: its lines with their line ends."""
    ends = ["\n"] * len(region.lines)
    if ends and not region.newline_last:
        ends[-1] = ""
    lines = [line + end for line, end in zip(region.lines, ends)]
    return ["".join(lines[c.start - 1 - region.first:c.end - region.first]) for c in chunks]


@functools.lru_cache(maxsize=4)
def _analysed(text: str, headings: bool) -> tuple[_Doc, list[_Cand]]:
    """A text's lines and the places it may be cut, which no size changes: a build cuts a
    source's text twice (its chunks, its search sections), and each found them anew. Neither is
    changed after they are found."""
    doc = _Doc(text, headings)
    return doc, _candidates(doc)


def _make_chunks(doc: _Doc, cuts: list[int], stack: list[tuple[int, str]], first_line: int) -> list[Chunk]:
    """The chunks between `cuts` (lines of `doc`), under the headings `stack` in force at its
    start, numbered as lines of text.md from `first_line` (0-based) on."""
    n = len(doc.lines)
    cuts = sorted(set(cuts) | {0, n})
    stack = list(stack)
    heading_starts = sorted(doc.headings)
    h = 0
    chunks = []
    for s, e in zip(cuts, cuts[1:]):
        first = s
        while first < e and doc.kind[first] != _CONTENT:
            first += 1
        while h < len(heading_starts) and heading_starts[h] <= first:
            level, title = doc.headings[heading_starts[h]]
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
            h += 1
        continued = bool(stack) and first not in doc.headings
        inside = heading_starts[h:bisect.bisect_left(heading_starts, e, lo=h)]
        covers = [(level, title) for level, title in stack[-1:] + [doc.headings[i] for i in inside] if title]
        pages = None
        if doc.has_pages:
            content = [i for i in (first, _last_content(doc, s, e)) if 0 <= i < e and doc.kind[i] == _CONTENT]
            lo = doc.page[content[0]] if content else doc.page[s]
            hi = doc.page[content[-1]] if content else doc.page[e - 1]
            pages = (lo, hi)
        tokens = -(-(doc.units[e] - doc.units[s]) // UNITS_PER_TOKEN)
        chunks.append(Chunk(first_line + s + 1, first_line + e, tuple(t for _, t in stack), pages, tokens, covers=tuple(t for _, t in covers),
                            levels=tuple(level for level, _ in covers), continued=continued))
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


# --------------------------------------------------------------------------- names


def fact_names(chunks: list[Chunk], reserved: Collection[str] = ()) -> list[str]:
    """A file name for each chunk, unique within its source, from its first heading.

    The name is the visible text of the first heading in the chunk, cut where a word ends, or
    for a chunk with no heading of its own, of the section it continues: never an HTML anchor,
    never the chunk's own words, so that editing a sentence renames nothing. A chunk that starts
    a little before a heading is named after that heading, as it is when it starts at it: a
    boundary that moves by a paragraph keeps the name. A section whose title an earlier section
    already took is named with its parent's title too; further chunks of one section are
    numbered (`motivation-2`). "opening" only for a chunk with no heading before or in it. A
    name in `reserved` gets the prefix `section-`.
    """
    taken: set[str] = set(reserved)
    names = []
    for c in chunks:
        # the highest of its own headings, the first of equals, else the section it continues
        own = range(1 if c.continued else 0, len(c.covers)) or range(len(c.covers))
        title = c.covers[min(own, key=lambda i: (c.levels[i], i))] if c.covers else ""
        base = slug(title) if title else "opening"
        if base in reserved:
            base = f"section-{base}"
        name = base
        if name in taken and not c.continued and len(c.headings) > 1 and c.headings[-1] == title:
            name = slug(f"{c.headings[-2]} {title}")
        names.append(unique(base if name in taken else name, taken))  # numbered from the heading's own name
    return names
