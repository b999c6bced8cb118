"""What a view on request is about: the sentences of a project that speak to its subject.

A sentence speaks to a request when it, with the headings it sits under, holds enough of the
request's content words, each weighted by how rare it is across the whole project (a word every
source uses says little), or holds two of them side by side as the request has them. One shared
common word is not enough: "kubernetes pod scheduling" must not find a sentence about release
schedules. A request that no sentence speaks to is a gap, not a page of near misses.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from kbuild.model.offline import LIST_MARK, MD_HEADING, RST_UNDERLINE, STOPWORDS, clean
from kbuild.requirements import with_lead_in
from kbuild.search import tokens
from kbuild.slicing import split_sentences

# Words a request uses to ask, not to name its subject: "the rules about imports" is about imports.
ASKING = frozenset("""rule rules guideline guidelines guidance recommendation recommendations requirement
    requirements check checks checking advice convention conventions practice practices regarding concerning
    how what which kind kinds way ways thing things aspect aspects detail details topic view""".split())
WORD = re.compile(r"[a-z0-9]+")
# reST directives whose body is code, whatever follows the "::" (clean() reads only a bare "::")
CODE_DIRECTIVE = re.compile(r"^\s*\.\.\s+(?:code-block|code|sourcecode|highlight|doctest|productionlist|"
                            r"literalinclude|testcode|testoutput)::")
COVERAGE = 0.67  # the share of the request's weight a sentence and its headings must hold
PHRASE_COVERAGE = 0.4  # ... or this much, with two of its words side by side as the request has them
TITLE_WEIGHT = 0.5  # a word only in the source's title counts half: the title is over every sentence
PER_SOURCE = 24  # sentences per source at most, the best first


@dataclass(frozen=True)
class Passage:
    """One sentence of a fact as a view would state it, with the headings it sits under."""
    text: str
    headings: tuple[str, ...]  # the source's title first, then each heading down to the sentence


@dataclass(frozen=True)
class Candidate:
    """A passage of a fact, and the section of the view it would stand in (origin/source)."""
    section: str
    ref: str
    passage: Passage


@dataclass(frozen=True)
class Hit:
    section: str
    ref: str
    sentence: str
    score: float


def _heading_text(line: str) -> str:
    return " ".join(clean(MD_HEADING.sub("", line.strip())).replace("**", "").split())


def _parts(span: str) -> list[tuple[str | None, str]]:
    """The span cut at its headings: (heading or None before the first, the lines under it).
    A heading is an unindented Markdown `#` line or a reST title over its underline, outside code."""
    parts: list[tuple[str | None, list[str]]] = [(None, [])]
    lines = span.splitlines()
    fenced = False
    skip = -1
    code_indent = -1  # inside a reST code directive: the directive's own indent
    for i, line in enumerate(lines):
        stripped = line.strip()
        if code_indent >= 0:
            if not stripped or len(line) - len(line.lstrip()) > code_indent:
                continue
            code_indent = -1
        if CODE_DIRECTIVE.match(line):
            code_indent = len(line) - len(line.lstrip())
            parts[-1][1].extend(["", "```", "```", ""])  # code stood here: a colon before it introduced it
            continue
        following = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if i == skip:
            continue  # a reST title's underline
        if stripped.startswith(("```", "~~~")):
            fenced = not fenced
        if not fenced and stripped and line == line.lstrip():
            if MD_HEADING.match(stripped):
                parts.append((_heading_text(stripped), []))
                continue
            if RST_UNDERLINE.match(following) and len(following) >= len(stripped) and not RST_UNDERLINE.match(stripped):
                parts.append((_heading_text(stripped), []))
                skip = i + 1
                continue
        parts[-1][1].append(line)
    return [(heading, "\n".join(body)) for heading, body in parts]


def _words(sentence: str) -> int:
    return len(WORD.findall(sentence.lower()))


def passages(span: str, headings: Sequence[str]) -> list[Passage]:
    """The prose sentences of a fact's span, each with the headings it sits under (the chunk's
    own, then the last heading inside the span above it). A list item carries its lead-in's words
    (see requirements.with_lead_in); a lead-in to code stands as a sentence of its own ("Imports
    should usually be on separate lines."), as it is often the rule the code shows. No code,
    tables or markup."""
    found: list[Passage] = []
    for heading, body in _parts(span):
        where = tuple(headings) + ((heading,) if heading and heading not in headings else ())
        lead_in: str | None = None  # the last sentence of a paragraph, when it ends in a colon
        carried = False  # ... and a list item after it has taken its words

        def close() -> None:
            if lead_in and not carried and _words(lead_in) >= 5:  # not "Correct:", "Don't do this:"
                found.append(Passage(lead_in.removeprefix("- ")[:-1].rstrip() + ".", where))

        for paragraph in clean(body).split("\n\n"):
            if "\n" in paragraph or paragraph[:1].isspace() or paragraph.startswith(("```", "~~~", "|")):
                close()  # code, a literal block or a table: what the colon introduced
                lead_in = None
                continue
            item = LIST_MARK.match(paragraph)
            sentences = split_sentences(LIST_MARK.sub("", paragraph))
            if not sentences:
                continue
            if item and lead_in and not lead_in.startswith("- "):
                sentences[0] = with_lead_in(lead_in, sentences[0])
                carried = True
            else:
                close()
                lead_in, carried = None, False
            found += [Passage(s, where) for s in sentences if not s.endswith(":") and _words(s) >= 2]
            if sentences[-1].endswith(":"):
                # an item's own colon introduces its code, not the items after it
                lead_in, carried = (("- " if item else "") + sentences[-1]), False
        close()
    return found


def content_terms(text: str) -> list[str]:
    """The stemmed words of a text that name things, in order: no stop words, no asking words."""
    words = [w for w in WORD.findall(text.lower()) if w not in STOPWORDS and w not in ASKING and len(w) > 1]
    return tokens(" ".join(words))


def _adjacent_pairs(terms: Sequence[str]) -> set[tuple[str, str]]:
    return set(zip(terms, terms[1:]))


def rank(about: str, candidates: Sequence[Candidate], per_source: int = PER_SOURCE) -> list[Hit]:
    """The candidates that speak to `about`, best first, at most `per_source` per section.

    A word's weight is its inverse document frequency over all candidates (a word no candidate
    has weighs most, so a request about something absent cannot be met by its common words).
    A candidate's coverage is the share of the request's weight its words and headings hold."""
    wanted = list(dict.fromkeys(content_terms(about)))
    if not wanted or not candidates:
        return []
    texts = [content_terms(c.passage.text) for c in candidates]
    frequency = Counter(t for terms in texts for t in set(terms))
    total = len(candidates)
    weight = {t: math.log((total + 1) / (frequency[t] + 0.5)) for t in wanted}
    whole = sum(weight.values())
    pairs = _adjacent_pairs(wanted)
    heading_terms: dict[tuple[str, ...], tuple[set[str], set[str], set[tuple[str, str]]]] = {}
    hits: list[Hit] = []
    for candidate, terms in zip(candidates, texts):
        where = candidate.passage.headings
        if where not in heading_terms:
            title = set(content_terms(where[0])) if where else set()
            below = [content_terms(h) for h in where[1:]]
            heading_terms[where] = (title, {t for h in below for t in h},
                                    {p for h in below for p in _adjacent_pairs(h)})
        title, sections, heading_pairs = heading_terms[where]
        own = set(terms)
        held = sum(weight[t] * (1.0 if t in own or t in sections else TITLE_WEIGHT if t in title else 0.0)
                   for t in wanted)
        coverage = held / whole if whole else 0.0
        said_here = sum(weight[t] for t in wanted if t in own or t in sections)
        phrase = bool(pairs & (_adjacent_pairs(terms) | heading_pairs))
        if said_here and (coverage >= COVERAGE or (phrase and coverage >= PHRASE_COVERAGE)):
            # ties go to the sentence whose own words hold more of the request
            score = coverage + 0.5 * sum(weight[t] for t in wanted if t in own) / whole
            hits.append(Hit(candidate.section, candidate.ref, candidate.passage.text, round(score, 4)))
    best: list[Hit] = []
    taken: Counter[str] = Counter()
    for hit in sorted(hits, key=lambda h: -h.score):
        if taken[hit.section] < per_source:
            taken[hit.section] += 1
            best.append(hit)
    return best
