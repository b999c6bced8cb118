"""Code checks of written text against its sources, before any model is asked.

A number, RFC 2119 keyword, identifier or quoted term that a sentence states must appear in its
sources: a model that writes "within 30 days" from a source that says 90, or SHALL where it says
SHOULD, is caught here, for free (`unsupported`).

`triage` goes further, sentence by sentence, so that the grounding model is asked only where code
cannot decide: a sentence that states a hard fact its sources lack is refused outright; one whose
words all come from the sources and whose requirement words and numbers match its closest source
sentences passes; every other sentence is a doubt, sent to the model with the few source
sentences that match it best, not with the whole source.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from kbuild.checks.meaning import CODE, QUOTED  # a code name and a quoted term, as the meaning check sees them
from kbuild.text.keywords import KEYWORD
from kbuild.text.markdown import ATX_MARK as HEADING, FENCED_BLOCK as FENCE, without_links
from kbuild.text.prose import NUMBER, STOPWORDS
from kbuild.text.ranking import tokens
from kbuild.text.sentences import split_sentences

# Words that turn a statement's force or truth: a rewrite that adds, drops or swaps one says
# something else, even with every other word the source's
FORCE = frozenset(tokens(
    "must shall should may might can cannot required optional recommended not never no nor without only always "
    "forbidden allowed deprecated discouraged "
    # direction and degree: "before" for "after", "at most" for "at least"
    "before after above below more less fewer most least greater smaller larger higher lower earlier later "
    "increase decrease enable disable include exclude "
    # numbers in words, which the number check does not see
    "zero one two three four five six seven eight nine ten eleven twelve twenty hundred thousand million "
    "single double once twice half first second third last"))
EVIDENCE = 3  # source sentences shown to the model per doubt


def _numbers(text: str) -> list[str]:
    return [n.replace(",", "").rstrip(".") for n in NUMBER.findall(text)]


def _identifiers(text: str) -> list[str]:
    return [a or b or c for a, b, c in CODE.findall(text)]


# The backslash Markdown's escaping puts before a mark it shows as is (kbuild.text.markdown.escape_text):
# not before a backslash, a quote or a backtick, where it is most often code's own (`\"`, `\\"`)
ESCAPE = re.compile(r"\\(?=[*_\[\]&#>+.)=|!-])")
EMPHASIS_UNDERSCORE = re.compile(r"(?<!\w)_+|_+(?!\w)")  # `_word_`'s marks, never snake_case's


def _flat(text: str) -> str:
    """Text as compared letter for letter: white space folded, emphasis and code marks and
    Markdown's escapes dropped (a rewrite may set `name` where its source set name, *word* or
    _word_ where it set word, `Foo.__a` where it set Foo.\\_\\_a)."""
    text = EMPHASIS_UNDERSCORE.sub("", ESCAPE.sub("", text)) if "_" in text or "\\" in text else text
    return " ".join(text.replace("`", "").replace("*", "").split())


@functools.lru_cache(maxsize=16)
def _said(sources: str) -> tuple[str, frozenset[str], frozenset[str]]:
    """What sentences are checked against, read once per text (a page's sentences share it):
    its flat letters, its numbers and its requirement keywords, as written and as shown."""
    flat = _flat(sources)
    return (flat, frozenset(_numbers(sources)) | frozenset(_numbers(flat)),
            frozenset(KEYWORD.findall(sources)) | frozenset(KEYWORD.findall(flat)))


def unsupported(statement: str, cited: list[str]) -> list[str]:
    """The numbers, requirement keywords, code names and quoted terms of `statement` that none of
    the cited texts contains (empty when the statement passes)."""
    flat, numbers, keywords = _said("\n".join(cited))
    missing = [n for n in dict.fromkeys(_numbers(statement)) if n not in numbers]
    missing += [k for k in dict.fromkeys(KEYWORD.findall(statement)) if k not in keywords]
    missing += [f"`{name}`" for name in dict.fromkeys(_identifiers(statement)) if _flat(name) not in flat]
    missing += [f"\"{term}\"" for term in dict.fromkeys(a or b for a, b in QUOTED.findall(statement))
                if _flat(term) not in flat]
    return missing


@dataclass(frozen=True)
class Doubt:
    """A sentence code could not clear, with the source sentences closest to it."""

    sentence: str
    evidence: tuple[str, ...]
    why: str


@dataclass(frozen=True)
class Triage:
    refused: tuple[tuple[str, str], ...]  # (sentence, why): unsupported on code's word alone
    doubts: tuple[Doubt, ...]  # for the grounding model
    passed: int  # sentences code cleared


def _content(text: str) -> set[str]:
    return {t for t in tokens(text) if t not in STOPWORDS and not t.isdigit()}


def sentences_of(text: str) -> list[str]:
    """A text's statements, as written: code spans and quotes kept (they are checked letter for
    letter), a link's words without its target (links have a guardrail of their own). A fenced
    block is one statement, its body as it stands."""
    blocks = [m.group(2).strip() for m in FENCE.finditer(text)]
    plain = HEADING.sub("", without_links(FENCE.sub("\n\n", text)))  # code holds no links: `f['a'](0)` is code
    return [s for s in split_sentences(plain) if any(ch.isalnum() for ch in s)] + [b for b in blocks if b]


def triage(text: str, sources: list[str], framing: str = "") -> Triage:
    """Sort the sentences of `text` into refused, doubtful and passed against `sources`.

    `framing` (a title, the headings) may be named without a source sentence saying it."""
    source_sentences = [s for source in sources for s in sentences_of(source)] or [""]
    known = " ".join([*sources, framing])
    vocabulary = _content(known)
    bags = [(_content(s), set(tokens(s)) & FORCE, set(_numbers(s))) for s in source_sentences]
    refused: list[tuple[str, str]] = []
    doubts: list[Doubt] = []
    passed = 0
    blocks = {m.group(2).strip() for m in FENCE.finditer(text)}
    flat_known = _flat(known)
    for sentence in dict.fromkeys(sentences_of(text)):
        if sentence in blocks:  # code is copied, not rewritten: a block the sources lack is a doubt
            if _flat(sentence) in flat_known:
                passed += 1
            else:
                doubts.append(Doubt(sentence, (), "a block of code or text the sources do not hold as it stands"))
            continue
        hard = unsupported(sentence, [known])
        if hard:
            refused.append((sentence, f"says {', '.join(hard)}, which its sources do not"))
            continue
        words = _content(sentence)
        ranked = sorted(range(len(bags)), key=lambda i: (-len(words & bags[i][0]), i))[:EVIDENCE]
        evidence = tuple(source_sentences[i] for i in ranked)
        near_force = set().union(*(bags[i][1] for i in ranked))
        near_numbers = set().union(*(bags[i][2] for i in ranked))
        why = []
        new_words = sorted(words - vocabulary)
        if new_words:
            why.append("words its sources do not use: " + ", ".join(new_words[:5]))
        said_force = set(tokens(sentence)) & FORCE
        added = said_force - near_force
        if added:
            why.append("force words its closest source sentences lack: " + ", ".join(sorted(added)))
        # a source sentence this one restates: most of the words of each are the other's
        restated = [bags[i] for i in ranked
                    if words and len(words & bags[i][0]) >= 0.6 * max(len(words), len(bags[i][0]))]
        dropped = set().union(*(force for _, force, _ in restated)) - said_force
        if dropped:
            why.append("drops force words of the source sentence it restates: " + ", ".join(sorted(dropped)))
        numbers = set(_numbers(sentence)) - near_numbers
        if numbers:
            why.append("numbers its closest source sentences lack: " + ", ".join(sorted(numbers)))
        if why:
            doubts.append(Doubt(sentence, evidence, "; ".join(why)))
        else:
            passed += 1
    return Triage(tuple(refused), tuple(doubts), passed)
