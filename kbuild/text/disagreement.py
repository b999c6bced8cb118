"""Whether two statements disagree: the same subject, the same attribute, another value.

Two sentences of different sources speak of the same thing when they share their subject: their
content words, numbers and the words of their limits taken out ("Refunds MUST be requested
within 90 days" and "... within 30 days" share "refund request"). They disagree on an attribute
when one states a limit the other states otherwise (another number of the same kind of unit, or
the same number compared the other way: "at least 8" against "at most 8"), or obliges with
another force (MUST against SHOULD, MUST against MUST NOT). A restatement ("within 24 hours" and
"within 1 day", "must" and "MUST") is no disagreement.

Code picks and decides candidates; a model may judge them after (rules/contradictions.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from typing import Protocol

from .keywords import KEYWORD
from .obligations import STRENGTH, normative_keyword
from .prose import NUMBER, STOPWORDS
from .quantities import CUES, Quantity, _singular, is_unit, quantities
from .ranking import tokens

# each unit of a kind as a multiple of the kind's smallest, so "24 hours" is "1 day"
SCALES: dict[str, tuple[str, Decimal]] = {}
for _kind, _units in {
    "time": {"nanosecond": "0.000000001", "microsecond": "0.000001", "millisecond": "0.001", "ms": "0.001",
             "second": "1", "s": "1", "sec": "1", "secs": "1", "minute": "60", "min": "60", "mins": "60",
             "hour": "3600", "h": "3600", "hr": "3600", "hrs": "3600", "day": "86400", "week": "604800",
             "month": "2592000", "year": "31536000"},
    "size": {"bit": "0.125", "byte": "1", "b": "1", "kb": "1000", "mb": "1000000", "gb": "1000000000",
             "tb": "1000000000000", "kib": "1024", "mib": "1048576", "gib": "1073741824", "tib": "1099511627776"},
    "share": {"percent": "1", "%": "1"},
}.items():
    SCALES.update({unit: (_kind, Decimal(scale)) for unit, scale in _units.items()})

# lower-case modal verbs, as force: an RFC 2119 keyword in capitals is read by obligations
MODAL = re.compile(r"\b(must|shall|should|may|is required to|are required to|is recommended to|are recommended to)"
                   r"(\s+not|n't)?\b", re.I)
MODAL_FORCE = {"must": "MUST", "shall": "MUST", "should": "SHOULD", "may": "MAY", "is required to": "MUST",
               "are required to": "MUST", "is recommended to": "SHOULD", "are recommended to": "SHOULD"}
# the words of a limit ("within", "at least") say what it allows, not what it is about
LIMIT_WORDS = frozenset(w for _, cue in CUES for w in re.findall(r"[a-z]+", cue))
SHARED = 0.6  # the share of the shorter subject's words the other must hold: the same subject
SHARED_OF_LONGER = 0.4  # and of the longer's: "the pepper is stored apart from the password database" is not
                        # "stored passwords are protected ... even if the database is compromised"
# a negated condition ("if MFA is not enabled") is another subject than the plain one; the "not" of
# a modal verb ("should not") or of a limit ("not exceed", "no more than") is not one
CONDITION_NEGATION = re.compile(r"\b(?:not|without|unless)\b", re.I)
SHARED_WORDS = 2  # and at least this many words: "It MUST" and "They SHOULD" share no subject


class OneWord(Protocol):
    """Reads every name a glossary gives a term as one word (kbuild.retrieval.expansion.SameWords)."""

    def one_word(self, text: str) -> str: ...


def _read(text: str, same: OneWord | None) -> str:
    return same.one_word(text) if same is not None else text


class Attribute(Enum):
    """What two statements disagree on."""
    LIMIT = "limit"    # a number with its unit, or what the sentence allows of it
    FORCE = "force"    # the strength of an obligation: MUST, SHOULD, MAY, and their negations


@dataclass(frozen=True)
class Disagreement:
    """Two statements about one subject that give one attribute two values ("90 days" against "30
    days", "MUST" against "SHOULD"): `subject` their shared words, `first` and `second` each
    statement's value as it says it."""
    attribute: Attribute
    subject: str
    first: str
    second: str

    def describe(self) -> str:
        return f"{self.attribute.value}: {self.first} against {self.second}"


def force(sentence: str) -> str | None:
    """The strength a sentence obliges with ("MUST", "SHOULD NOT"...), its RFC 2119 keyword in
    capitals or its modal verb; None when it obliges nothing."""
    keyword = normative_keyword(sentence)
    if keyword is not None:
        return STRENGTH.get(keyword, keyword)
    if KEYWORD.search(sentence):
        return None  # a keyword named or defined: "the key word MUST", not a use of it
    found = MODAL.search(sentence)
    if found is None:
        return None
    return MODAL_FORCE[found.group(1).lower()] + (" NOT" if found.group(2) else "")


def subject(sentence: str, same: OneWord | None = None) -> frozenset[str]:
    """The stems a sentence is about: its words but numbers, units, stop words, modal verbs and
    the words of its limits. `same` reads every name a glossary gives a term as one word."""
    text = _read(sentence, same)
    text = NUMBER.sub(" ", text)
    words = [w for w in re.findall(r"[A-Za-z][A-Za-z-]*", text)]
    kept = [w for w in words if w.lower() not in STOPWORDS and w.lower() not in LIMIT_WORDS
            and not _is_unit(w) and w.lower() not in {"required", "recommended", "optional", "not"}]
    return frozenset(t for t in tokens(" ".join(kept)) if len(t) > 1)


def _is_unit(word: str) -> bool:
    return is_unit(word) or _singular(word.lower()) in SCALES or word == "%"


def _words_of(sentence: str, stems: frozenset[str], same: OneWord | None) -> str:
    """The words of `sentence` whose stems are `stems`, each once, in its order: "refunds requested payment"."""
    shown: dict[str, str] = {}
    for word in re.findall(r"[A-Za-z][A-Za-z-]*", sentence):
        stem = next(iter(tokens(_read(word, same))), "")
        if stem in stems and stem not in shown:
            shown[stem] = word if word.isupper() else word.lower()
    return " ".join(shown.values()) or " ".join(sorted(stems))


def same_subject(a: frozenset[str], b: frozenset[str]) -> bool:
    shared = a & b
    return len(shared) >= SHARED_WORDS and len(shared) >= SHARED * min(len(a), len(b)) \
        and len(shared) >= SHARED_OF_LONGER * max(len(a), len(b))


# an obligation with an exception ("should not store keys next to the secrets, except if those keys
# are encrypted") obliges something narrower than its words: its force is not compared (the OWASP
# sheets' one false disagreement)
EXCEPTION = re.compile(r"\b(?:except|unless|other than|apart from|save for)\b", re.I)


LIMIT_NEGATION = re.compile(r"\b(?:not|no)\s+(?:to\s+)?(?=" + "|".join(w for w in LIMIT_WORDS if len(w) > 2) + r")", re.I)


def negated(sentence: str) -> bool:
    """Whether a sentence holds a negation of its own, not its modal verb's nor its limit's."""
    text = KEYWORD.sub(" ", MODAL.sub(" ", sentence))
    return CONDITION_NEGATION.search(LIMIT_NEGATION.sub(" ", text)) is not None


def _measure(q: Quantity) -> tuple[str, Decimal]:
    """A quantity's kind of unit and its value in the kind's smallest unit: ("time", 86400) for
    1 day; a unit that converts to nothing is its own kind ("attempt", 5)."""
    head = q.unit.split(" per ")[0].split(" ")[-1] if q.unit else ""
    one = _singular(head.lower()) if head != "%" else "%"
    rate = " per " + q.unit.split(" per ", 1)[1] if " per " in q.unit else ""
    if one in SCALES:
        kind, scale = SCALES[one]
        modifiers = " ".join(q.unit.split(" per ")[0].split(" ")[:-1]).lower()
        return f"{modifiers} {kind}{rate}".strip(), q.value * scale
    return (f"{q.unit.lower()}".strip() or "number"), q.value


Limits = dict[str, list[tuple[Decimal, str, str]]]  # a kind of unit: each (value, comparison, as written)


def _limits(sentence: str) -> Limits:
    """Each kind of unit a sentence states, with its (value, comparison, as written) in order. A
    bare number that no word compares ("SP 800-57", "see 12") is no limit to disagree on."""
    found: Limits = {}
    for q in quantities(sentence):
        if not q.unit and q.comparison is None:
            continue
        kind, value = _measure(q)
        comparison = q.comparison.value if q.comparison else ""
        written = f"{comparison} {q.amount()}".strip()
        found.setdefault(kind, []).append((value, comparison, written))
    return found


def _same_limits(mine: list[tuple[Decimal, str, str]], theirs: list[tuple[Decimal, str, str]]) -> bool:
    """The same values in the same order, each compared the same way where both say how ("a
    minimum configuration of 19 MiB" says none, and is "at least 19 MiB")."""
    return len(mine) == len(theirs) and all(v == w and (c == d or not c or not d)
                                            for (v, c, _), (w, d, _) in zip(mine, theirs))


@dataclass(frozen=True)
class Claim:
    """A statement as the comparison reads it, read once however many others it is compared with."""
    sentence: str
    subject: frozenset[str]
    negated: bool
    limits: Limits
    force: str | None
    same: OneWord | None = None


def claim(sentence: str, same: OneWord | None = None) -> Claim:
    return Claim(sentence, subject(sentence, same), negated(sentence), _limits(sentence), force(sentence), same)


def compare(first: Claim, second: Claim) -> Disagreement | None:
    """The disagreement of two statements, or None when they do not share their subject or give
    no attribute two values. Limits are compared kind by kind of unit ("30 days" and "1 month"
    are both time; "5 attempts" and "5 minutes" are never compared); a number without a unit is
    compared only with one without a unit."""
    if not same_subject(first.subject, second.subject) or first.negated != second.negated:
        return None
    about = _words_of(first.sentence, first.subject & second.subject, first.same)
    shared = first.limits.keys() & second.limits.keys()
    for kind in sorted(shared):
        mine, theirs = first.limits[kind], second.limits[kind]
        if (len(mine) == len(theirs) or kind != "number") and not _same_limits(mine, theirs):
            return Disagreement(Attribute.LIMIT, about, "; ".join(w for _, _, w in mine),
                                "; ".join(w for _, _, w in theirs))
    strength_a, strength_b = first.force, second.force
    if shared and strength_a and strength_b:
        # they agree on their limits, so a "not" is the limit's: "should not exceed 254" is "should be at most 254"
        strength_a, strength_b = strength_a.removesuffix(" NOT"), strength_b.removesuffix(" NOT")
    if strength_a and strength_b and strength_a != strength_b and not any(
            EXCEPTION.search(c.sentence) for c in (first, second)):
        return Disagreement(Attribute.FORCE, about, strength_a, strength_b)
    return None


def candidate(first: str, second: str, same: OneWord | None = None) -> Disagreement | None:
    """The disagreement of two statements (`compare`), each read here."""
    return compare(claim(first, same), claim(second, same))
