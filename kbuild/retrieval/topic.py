"""What a view on request is about: the sentences of a project that speak to its subject.

A sentence speaks to a request when it, with the headings it sits under, holds enough of the
request's content words, each weighted by how rare it is in the sentence's source (a word every
sentence of a source uses says little there), or holds a phrase of the request. One shared common
word is not enough: "kubernetes pod scheduling" must not find a sentence about release schedules.
A request that no sentence speaks to is a gap, not a page of near misses.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from kbuild.text.keywords import KEYWORD
from kbuild.text.prose import STOPWORDS, clean
from kbuild.text.markdown import ATX_MARK as MD_HEADING, LIST_ITEM as LIST_MARK, UNDERLINE as RST_UNDERLINE
from kbuild.text.obligations import with_lead_in
from kbuild.text.ranking import tokens
from kbuild.text.sentences import split_sentences

from .expansion import SameWords

# Words a request uses to ask, not to name its subject: "the rules about imports" is about imports;
# and prepositions the stop words lack: "imports inside with blocks" is about imports and with blocks.
ASKING = frozenset("""rule rules guideline guidelines guidance recommendation recommendations requirement
    requirements check checks checking advice convention conventions practice practices regarding concerning
    how what which kind kinds way ways thing things aspect aspects detail details topic view
    inside within across along among around via per onto toward towards beside besides beyond""".split())
WORD = re.compile(r"[a-z0-9]+")
# words that join any two others: "tabs or spaces", "assignability of TypeForm" make no phrase of them
GLUE = frozenset("a an the of and or to for in on at by as is are be".split())
# ... of which these relate the words on either side: "assignability of TypeForm" is said by a
# sentence that holds both words in any order ("`TypeForm[B]` is assignable to ...")
RELATING = frozenset("of for to".split())
# reST directives whose body is code, whatever follows the "::" (clean() reads only a bare "::")
CODE_DIRECTIVE = re.compile(r"^\s*\.\.\s+(?:code-block|code|sourcecode|highlight|doctest|productionlist|"
                            r"literalinclude|testcode|testoutput)::")
# what a page's check refuses as markup (rules/guard.py MARKUP): "<mode>", "f[T](x)" read as HTML or a link
LOOKS_LIKE_MARKUP = re.compile(r"<[a-zA-Z/!?][^>]*>|\]\(", re.I)
# A number with its unit ("within 90 days", "79 characters") is what a request for a limit asks for
QUANTITY = re.compile(r"\b\d[\d,.]*\s*(?:%|[a-z]{2,})", re.I)
MEASURES = frozenset(tokens("limit limits maximum minimum time timeout deadline period duration length size "
                            "count number amount threshold expiry"))
PHRASE_WEIGHT = 0.5  # a phrase of the request weighs this much of a word as rare
COVERAGE = 0.67  # the share of the request's weight a sentence and its headings must hold
PHRASE_COVERAGE = 0.4  # ... or this much, with two of its words side by side as the request has them
TITLE_WEIGHT = 0.5  # a word only in the source's title counts half: the title is over every sentence
HEADING_BONUS = 0.5  # what the share of the request a sentence's headings name adds to its rank in its section
PARAGRAPH_SHARE = 0.9  # each sentence after a hit in its paragraph carries on this share of its coverage
BELOW_BEST = 0.4  # how far below the project's best coverage a sentence may stand
PER_SOURCE = 24  # sentences per source at most, the best first


@dataclass(frozen=True)
class Passage:
    """One sentence of a fact as a view would state it, with the headings it sits under."""
    text: str
    headings: tuple[str, ...]  # the source's title first, then each heading down to the sentence
    paragraph: int = 0  # which paragraph (or list item) of its fact: sentences after the first lean on it


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


def _paragraphs(body: str) -> list[tuple[int, str]]:
    """The cleaned paragraphs of a part, each with the number of the block it belongs to: a
    top-level paragraph, or a list item with the paragraphs indented under it, which go on
    about what the item says."""
    blocks: list[list[str]] = [[]]
    fenced = False
    previous = ""
    for line in body.splitlines():
        if line.strip().startswith(("```", "~~~")):
            fenced = not fenced
        starts = line[:1].strip() and (not previous.strip() or LIST_MARK.match(line))
        if starts and not fenced and blocks[-1]:
            blocks.append([])
        blocks[-1].append(line)
        previous = line
    return [(n, paragraph) for n, block in enumerate(blocks)
            for paragraph in clean("\n".join(block)).split("\n\n") if paragraph]


def passages(span: str, headings: Sequence[str]) -> list[Passage]:
    """The prose sentences of a fact's span, each with the headings it sits under (the chunk's
    own, then the last heading inside the span above it). A list item carries its lead-in's words
    (see requirements.with_lead_in); a lead-in to code stands as a sentence of its own ("Imports
    should usually be on separate lines."), as it is often the rule the code shows. No code,
    tables or markup."""
    found: list[Passage] = []
    paragraphs = 0
    for heading, body in _parts(span):
        # a heading inside the span starts a section beside the one the span starts in (a fact
        # holds small neighbouring sections): it takes that section's place, under the same parents
        where = tuple(headings) if not heading or heading in headings else (*headings[:max(1, len(headings) - 1)], heading)
        lead_in: str | None = None  # the last sentence of a paragraph, when it ends in a colon
        carried = False  # ... and a list item after it has taken its words

        def close() -> None:
            if lead_in and not carried and _words(lead_in) >= 5:  # not "Correct:", "Don't do this:"
                found.append(Passage(lead_in.removeprefix("- ")[:-1].rstrip() + ".", where, paragraphs))

        for group, paragraph in _paragraphs(body):
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
            found += [Passage(s, where, paragraphs + group) for s in sentences
                      if not s.endswith(":") and _words(s) >= 2 and not LOOKS_LIKE_MARKUP.search(s)]
            if sentences[-1].endswith(":"):
                # an item's own colon introduces its code, not the items after it
                lead_in, carried = (("- " if item else "") + sentences[-1]), False
        close()
        paragraphs += len(body.splitlines()) + 1
    return found


def content_terms(text: str) -> list[str]:
    """The stemmed words of a text that name things, in order: no stop words, no asking words."""
    words = [w for w in WORD.findall(text.lower()) if w not in STOPWORDS and w not in ASKING and len(w) > 1]
    return tokens(" ".join(words))


def phrases(text: str) -> set[tuple[str, str]]:
    """Two stemmed words side by side, one of them at least naming something: "with blocks" is a
    phrase of a request about lazy imports in `with` blocks, though "with" alone is a stop word."""
    words = WORD.findall(text.lower())
    stems = tokens(" ".join(words))
    named = content_terms(text)
    return {(stems[i], stems[i + 1]) for i in range(len(words) - 1)
            if not ({words[i], words[i + 1]} & GLUE) and not ({words[i], words[i + 1]} <= STOPWORDS)
            and not ({words[i], words[i + 1]} & ASKING)} | set(zip(named, named[1:]))


def related(text: str) -> set[tuple[str, str]]:
    """Two stemmed content words of a request with one RELATING word between them: "assignability
    of TypeForm", "docstrings for public", "comparisons to None"."""
    words = WORD.findall(text.lower())
    stems = tokens(" ".join(words))
    return {(stems[i], stems[i + 2]) for i in range(len(words) - 2)
            if words[i + 1] in RELATING and stems[i] != stems[i + 2]
            and not {words[i], words[i + 2]} & (STOPWORDS | ASKING) and min(len(words[i]), len(words[i + 2])) > 1}


# "how MFA devices work": the verb a reader asks with, not a word of the subject
HOW_IT_WORKS = re.compile(r"^\s*how\b(.*?)\b(?:work|works|function|functions|operate|operates)\b", re.I)


def asked_about(about: str) -> str:
    """The request without the verb of "how ... work": "how MFA devices work and their
    requirements" asks about MFA devices, as "MFA devices and their requirements" does."""
    return HOW_IT_WORKS.sub(r"\1", about)


# "password length, throttling and reauthentication": a list of subjects, each asked for
LISTED_SUBJECTS = re.compile(r"\s*,\s*(?:(?:and|or)\s+)?|\s+(?:and|or)\s+")


def subjects(about: str) -> list[str]:
    """The subjects a request lists, split at its commas and the "and" or "or" before its last;
    one subject where it has no comma ("tabs or spaces for indentation", "blank lines around
    functions and classes" ask for one thing each)."""
    if "," not in about:
        return [about]
    parts = [part for part in LISTED_SUBJECTS.split(about) if content_terms(part)]
    return parts if len(parts) > 1 else [about]


ONE_CONJUNCTION = re.compile(r"^(?P<left>.+?)\s+(?:and|or)\s+(?P<right>.+)$", re.IGNORECASE)


def conjoined(subject: str) -> list[str]:
    """The two subjects a request joins with one "and" or "or", each with the words the two share:
    "passphrase length and storage rules" asks for "passphrase length rules" and "passphrase
    storage rules", "order and grouping of imports" for "order of imports" and "grouping of
    imports". None where it joins nothing, or more than two."""
    match = ONE_CONJUNCTION.match(subject.strip())
    if not match or ONE_CONJUNCTION.match(match.group("right")):
        return []
    left, right = match.group("left").split(), match.group("right").split()
    shared_before, shared_after = left[:-1], right[1:]
    return [" ".join([*shared_before, left[-1], *shared_after]), " ".join([*shared_before, right[0], *shared_after])]


def _said_once(candidates: Sequence[Candidate], kept: list[int]) -> list[int]:
    """The kept candidates, but a sentence said again (in another fact or source) only where it
    first stands: a view states it once."""
    seen: set[str] = set()
    once = []
    for n in kept:
        key = " ".join(candidates[n].passage.text.lower().split())
        if key not in seen:
            seen.add(key)
            once.append(n)
    return once


def rank(about: str, candidates: Sequence[Candidate], per_source: int = PER_SOURCE,
         same: SameWords | None = None) -> list[Hit]:
    """The candidates that speak to `about`, in candidate order, at most `per_source` (the best)
    per section.

    A word's weight is its inverse document frequency among the candidates of its section (a word
    a source lacks weighs most there, so a request about something absent cannot be met by its
    common words); a phrase of the request that the project holds ("with blocks") counts as one
    more word, at PHRASE_WEIGHT, and so does a relation of two of its words ("assignability of
    TypeForm"), held by a sentence that holds both. A candidate's coverage is the share of the
    request's weight that it and its headings hold; it must name one of the request's words
    itself, as its headings are over every sentence under them. It speaks to the request with
    COVERAGE, or PHRASE_COVERAGE and a phrase; the sentences after it in its paragraph or list
    item carry its coverage on, a little less each. Of these, the ones within BELOW_BEST of the
    best in the whole project are kept, those under a heading named for the subject first when a
    section has more than `per_source`.

    With `same` (the project's glossary), every name of a term is one word: "multi-factor
    authentication" is "MFA". A sentence said again is kept once, where it first stands. A
    request that lists its subjects (`subjects`) keeps what speaks to any of them, and so does one
    that joins two with "and" or "or" (`conjoined`) where nothing speaks to both."""
    listed = subjects(asked_about(about))
    if len(listed) == 1:
        hits = _rank_subject(listed[0], candidates, per_source, same)
        listed = [] if hits else conjoined(listed[0])
        if not listed:
            return hits
    place = {(c.ref, c.passage.text): n for n, c in enumerate(candidates)}
    best: dict[int, Hit] = {}
    for subject in listed:
        for hit in rank(subject, candidates, per_source, same):
            n = place[(hit.ref, hit.sentence)]
            if n not in best or hit.score > best[n].score:
                best[n] = hit
    return [best[n] for n in _said_once(candidates, sorted(best))]


# a name glued to its version: "OAuth2", "HTTP2", "Python3"
GLUED = re.compile(r"([a-z]{3,})\d{1,2}")
SELDOM = 3  # sentences: a glued name fewer hold than this, where more hold the name alone, is that name


def _unglued(wanted: list[str], candidates: Sequence[Candidate]) -> list[str]:
    """The request's words, a glued name ("OAuth2") read as the name the sources write apart
    ("OAuth 2.0") where they seldom write it glued: a view on "OAuth2" held one sentence of a sheet
    that says "OAuth 2.0" throughout. A glued name they write often stays itself ("AAL2" is not
    "AAL1")."""
    glued = {t: m.group(1) for t in wanted if (m := GLUED.fullmatch(t))}
    if not glued:
        return wanted
    asked = set(glued) | set(glued.values())
    held = Counter(t for c in candidates for t in set(content_terms(c.passage.text)) & asked)
    return list(dict.fromkeys(name if (name := glued.get(t)) and held[t] < SELDOM <= held[name] else t
                              for t in wanted))


def _rank_subject(about: str, candidates: Sequence[Candidate], per_source: int, same: SameWords | None) -> list[Hit]:
    """`rank` for one subject."""
    shown = candidates
    if same:
        about = same.one_word(about)
        candidates = [Candidate(c.section, c.ref, Passage(same.one_word(c.passage.text),
                                                          tuple(same.one_word(h) for h in c.passage.headings),
                                                          c.passage.paragraph)) for c in candidates]
    wanted = list(dict.fromkeys(content_terms(about)))
    if not wanted or not candidates:
        return []
    wanted = _unglued(wanted, candidates)
    relations = related(about)
    pairs = phrases(about) | relations
    said = [phrases(c.passage.text) & pairs for c in candidates]
    for c, found in zip(candidates, said):
        # a relation of the request is said by a sentence holding both its words, in its text or
        # under a heading: "`TypeForm` has a single type parameter" under "Assignability"
        held = set(content_terms(c.passage.text)) | {t for h in c.passage.headings[1:] for t in content_terms(h)}
        found |= {p for p in relations if set(p) <= held}
    heading_terms: dict[tuple[str, ...], tuple[set[str], set[str]]] = {}
    for c in candidates:
        where = c.passage.headings
        if where not in heading_terms:
            title = set(content_terms(where[0])) | {" ".join(p) for p in phrases(where[0]) & pairs} if where else set()
            below = {t for h in where[1:] for t in content_terms(h)} | {" ".join(p) for h in where[1:]
                                                                         for p in phrases(h) & pairs}
            heading_terms[where] = (title, below)
    # a phrase of the request that the project has ("with blocks") counts as one more word of it
    present = {" ".join(p) for p in pairs if any(p in found for found in said)
               or any(" ".join(p) in below for _, below in heading_terms.values())}
    keys = wanted + sorted(present)
    texts = [set(content_terms(c.passage.text)) | (MEASURES if QUANTITY.search(c.passage.text) else set())
             | {" ".join(p) for p in found} for c, found in zip(candidates, said)]
    # a word's weight in the source it stands in: "TypeForm" in the PEP that defines it says little
    frequency: dict[str, Counter[str]] = {}
    sizes: Counter[str] = Counter()
    for candidate, terms in zip(candidates, texts):
        frequency.setdefault(candidate.section, Counter()).update(t for t in terms if t in keys)
        sizes[candidate.section] += 1
    weights = {section: {t: math.log((sizes[section] + 1) / (found[t] + 0.5))
                         * (PHRASE_WEIGHT if t in present else 1.0) for t in keys}
               for section, found in frequency.items()}

    def coverage(own: set[str], where: tuple[str, ...], weight: dict[str, float]) -> float:
        title, sections = heading_terms[where]
        return sum(weight[t] * (1.0 if t in own or t in sections else TITLE_WEIGHT if t in title else 0.0)
                   for t in keys) / (sum(weight.values()) or 1.0)

    own_score: dict[int, float] = {}
    named_bonus: dict[int, float] = {}
    for n, (candidate, own) in enumerate(zip(candidates, texts)):
        where = candidate.passage.headings
        _, sections = heading_terms[where]
        weight = weights[candidate.section]
        if not any(t in own for t in wanted) and not (
                KEYWORD.search(candidate.passage.text) and coverage(set(), where, weight) >= COVERAGE):
            # headings alone are over every sentence under them: a sentence on the subject names
            # it itself ("Backslashes may still be appropriate at times." under "Maximum Line
            # Length" does not), or goes on from one that does (below). But a requirement (an
            # RFC 2119 keyword) under headings that name the subject is on it: a standard states
            # its rules under "Rate Limiting (Throttling)" without saying "throttling" again.
            continue
        alone = coverage(own, where, weight)
        phrase = any(t in own or t in sections for t in present)
        # a sentence under a heading named for the subject speaks to it more than one naming it in passing
        named = sum(weight[t] for t in keys if t in sections) / (sum(weight.values()) or 1.0)
        if alone >= COVERAGE or (phrase and alone >= PHRASE_COVERAGE):
            own_score[n] = alone
            named_bonus[n] = HEADING_BONUS * named
    # the sentences after one that speaks to the subject, in its paragraph or list item, go on
    # about it ("It improves readability."), less surely the further they are
    scored: list[tuple[float, int]] = []
    carried, block = 0.0, None
    for n, candidate in enumerate(candidates):
        here = (candidate.ref, candidate.passage.paragraph)
        carried = PARAGRAPH_SHARE * carried if here == block else 0.0
        block = here
        score = max(own_score.get(n, 0.0), carried)
        carried = score
        if score:
            scored.append((score, n))
    if not scored:
        return []
    bar = max(score for score, _ in scored) - BELOW_BEST
    taken: Counter[str] = Counter()
    kept: list[int] = []
    for score, n in sorted(scored, key=lambda sn: (-sn[0] - named_bonus.get(sn[1], 0.0), sn[1])):
        if score >= bar and taken[candidates[n].section] < per_source:
            taken[candidates[n].section] += 1
            kept.append(n)
    score_of = {n: score for score, n in scored}
    return [Hit(shown[n].section, shown[n].ref, shown[n].passage.text, round(score_of[n], 4))
            for n in _said_once(shown, sorted(kept))]
