"""Where sentences end: the one splitter the slicer, the offline backend and the checks share.

A period ends a sentence unless it belongs to an abbreviation ("e.g.", "Dr.", "No. 5"), an
initial ("J. Smith"), a number ("3.5"), a URL or a dotted name (no space after it), a list
marker ("1. "), or the next word starts in lower case. Standard library only.
"""
from __future__ import annotations

import re
from typing import NamedTuple

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

    Closing quotes and brackets after the terminator stay with the sentence. Empty pieces are
    dropped."""
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


def line_ends_sentence(line: str, next_line: str) -> bool:
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
