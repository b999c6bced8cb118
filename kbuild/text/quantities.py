"""Limits in a sentence: each number with its unit and what the sentence allows of it ("within 5
working days" is at most 5 working days), and the numbers that are no limit at all (a section
number, "Section 4", "§ 3.2", "RFC 2119", a heading's "5.1", "SHA-256").

A spec tests a requirement at the edge of its limits, so the unit must come whole ("5 working
days", not "5 working") and a section number must never be read as a limit.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from enum import Enum

from .prose import NUMBER, STOPWORDS


class Comparison(Enum):
    """What a sentence allows of a value, as the test at its edge reads it."""
    AT_MOST = "at most"      # within, up to, no more than, not exceed: holds at the value, fails one step past
    AT_LEAST = "at least"    # minimum, no fewer than: holds at the value, fails one step short
    LESS_THAN = "less than"  # fewer than, under, below: fails at the value, holds one step short
    MORE_THAN = "more than"  # longer than, over, above, exceed: fails at the value, holds one step past
    EXACTLY = "exactly"      # exactly, equal to, set to
    AFTER = "after"          # a trigger: "lock after 5 failed attempts" applies at the value, not one step short


NEGATED = {Comparison.AT_MOST: Comparison.MORE_THAN, Comparison.MORE_THAN: Comparison.AT_MOST,
           Comparison.AT_LEAST: Comparison.LESS_THAN, Comparison.LESS_THAN: Comparison.AT_LEAST}

# what stands right before a number (after "the", "a maximum of"...), longest phrases first
CUES: tuple[tuple[Comparison, str], ...] = (
    (Comparison.AT_MOST, r"no more than|not more than|no longer than|not longer than|no later than|not later than|"
                         r"no greater than|not (?:to )?exceed(?:ing)?|at most|up to|within|maximum(?: of)?|"
                         r"max(?:imum)?\.?|limit(?:s|ed|ing)?(?: [\w-]+){0,5} to|capped at|no larger than"),
    (Comparison.AT_LEAST, r"no less than|not less than|no fewer than|not fewer than|no shorter than|at least|"
                          r"minimum(?: of)?|min\.?|or more"),
    (Comparison.LESS_THAN, r"less than|fewer than|shorter than|under|below|before"),
    (Comparison.MORE_THAN, r"more than|longer than|greater than|larger than|over|above|exceed(?:s|ing)?|beyond"),
    (Comparison.EXACTLY, r"exactly|equal to|equals|set to|precisely"),
    (Comparison.AFTER, r"after|once"),
)
CUE = re.compile(r"\b(?:" + "|".join(f"(?P<{c.name}>{p})" for c, p in CUES) + r")\s+(?:the\s+|a\s+|an\s+)?[*_]{0,2}$",
                 re.I)  # "at least **128 bits**": emphasis is no word
NEGATION = re.compile(r"\b(?:not|never|no)\b", re.I)

# a word naming what a number counts or measures; its plural is the word with "s" unless listed
UNITS = frozenset("""
    millisecond microsecond nanosecond second minute hour day week month year ms s sec secs min mins h hr hrs
    character char digit letter word byte bit kb mb gb tb kib mib gib tib kbit mbit gbit b px pt
    attempt try tries retry retries time request call login logon entry entries item record row line user session
    connection token round iteration redirect hop level part column field element file page sentence
    percent eur usd gbp chf jpy euro dollar pound cent
""".split())
ABBREVIATIONS = frozenset("ms s sec secs min mins h hr hrs char kb mb gb tb kib mib gib tib kbit mbit gbit b px pt "
                          "percent eur usd gbp chf jpy".split())
PLURAL = {"try": "tries", "retry": "retries", "entry": "entries", "time": "times"}
SINGULAR = {plural: word for word, plural in PLURAL.items()}
CURRENCY_SIGN = "$€£¥"
# words that say which kind of unit: "5 working days", "5 failed login attempts"
MODIFIER = re.compile(r"[a-z][a-z-]*", re.I)
WORD_AFTER = re.compile(r"\s*([A-Za-z][A-Za-z-]*|%)")
RATE = re.compile(r"\s*(?:per|a|an|each|every)\s+([A-Za-z][A-Za-z-]*)", re.I)
# a number that names rather than counts: a section, a standard, a version, a status code
LABEL = re.compile(r"(?:\b(?:sections?|sect?\.|§+|clauses?|chapters?|ch\.|parts?|appendix|annex|tables?|figures?|"
                   r"fig\.|steps?|items?|rules?|requirements?|req\.|articles?|art\.|paragraphs?|para\.|pages?|pp?\.|"
                   r"lines?|notes?|examples?|volumes?|vol\.|issues?|RFC|PEP|ISO|IEC|NIST|NISTIR|SP|FIPS|ANSI|IEEE|ETSI|"
                   r"CWE|CVE|OWASP|ASVS|"
                   r"version|ver\.|v|TLS|SSL|HTTP|HTTP/|status|code|port|level|phase|stage|tier|category|"
                   r"no\.|number|nr\.)|[§#])\s*$", re.I)
# a number joined to what stands before it by "-", ":" or "/": "800-63", "19795-1:2021", "SP800-63B"
JOINED = re.compile(r"(\S*?)(\d[\d,.]*)?[-:/]$")
# a product's version: "OAuth 2.0", "Python 3.11" (a name with a capital inside it, or one not opening the sentence)
VERSIONED = re.compile(r"(?:\b[A-Za-z]+[A-Z][A-Za-z]*|(?<=[^\s.!?]\s)[A-Z][a-z]+)\s+$")
HEADING_NUMBER = re.compile(r"^\s*\d+(?:\.\d+)*\.?\s+[A-Z]")
MONTH = r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:tember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?"
YEAR_BEFORE = re.compile(r"\b(?:" + MONTH + r"|in|since|from|until|by|of|before|after)\s+(?:\d{1,2},?\s+)?$", re.I)


@dataclass(frozen=True)
class Quantity:
    """A number as a sentence states it: its value, its unit ("working days", "%", "EUR", "" when
    it has none), and what the sentence allows of it (None when it says nothing of it)."""
    written: str  # the number as written: "10,000", "0.5"
    unit: str
    comparison: Comparison | None
    prefix: str = ""  # a currency sign before the number: "$"
    word: str = field(default="", compare=False)  # the number as a word, where it is written so: "eight"

    @property
    def value(self) -> Decimal:
        return Decimal(self.written.replace(",", ""))

    def amount(self, value: Decimal | None = None) -> str:
        """The value (or another of the same step) with its unit: "5 working days", "1 hour", "10 MB", "99.9%"."""
        value = self.value if value is None else value
        text = f"{value:,}" if "," in self.written else f"{value}"
        unit = _counted(self.unit, value)
        if not unit:
            return f"{self.prefix}{text}"
        return f"{self.prefix}{text}{unit}" if unit == "%" else f"{self.prefix}{text} {unit}"

    @property
    def step(self) -> Decimal:
        """The smallest change the number is written to: 1 for "5", 0.1 for "2.5"."""
        _, _, decimals = self.written.partition(".")
        return Decimal(1).scaleb(-len(decimals))

    def edge(self) -> str:
        """The test at the edge of the limit: where it holds and where it fails, each with its unit."""
        at, past, short = self.amount(), self.amount(self.value + self.step), self.amount(self.value - self.step)
        match self.comparison:
            case Comparison.AT_MOST:
                return f"at {at} it holds; at {past} it fails"
            case Comparison.AT_LEAST:
                return f"at {at} it holds; at {short} it fails"
            case Comparison.LESS_THAN:
                return f"at {short} it holds; at {at} it fails"
            case Comparison.MORE_THAN:
                return f"at {past} it holds; at {at} it fails"
            case Comparison.EXACTLY:
                return f"at {at} it holds; at {short} and at {past} it fails"
            case Comparison.AFTER:
                return f"at {short} it does not apply yet; at {at} it applies"
        return f"try it at {at} and at {past}"


def _counted(unit: str, value: Decimal) -> str:
    """The unit as the value counts it: "1 hour", "2 hours"; an abbreviation ("ms", "MB") or a
    word it does not know stays as written."""
    counted, per, rate = unit.partition(" per ")  # "requests per minute": the rate's word stays
    *modifiers, head = counted.split(" ")
    one = _singular(head.lower())
    if one in UNITS and one not in ABBREVIATIONS and head.islower():
        head = one if value == 1 else PLURAL.get(one, one + "s")
    return " ".join([*modifiers, head]) + per + rate


def _singular(word: str) -> str:
    if word in SINGULAR:
        return SINGULAR[word]
    return word[:-1] if word.endswith("s") and word[:-1] in UNITS else word


def is_unit(word: str) -> bool:
    return _singular(word.lower()) in UNITS


def _unit(sentence: str, end: int, cued: bool) -> str:
    """The unit after a number: a known unit word, with up to three words before it that say which
    ("working days", "failed login attempts") and a rate after it ("requests per second"); else,
    after a comparison, the next plural word ("at least 3 rounds")."""
    words: list[str] = []
    pos = end
    for _ in range(4):
        match = WORD_AFTER.match(sentence, pos)
        if not match:
            break
        word = match.group(1)
        if word == "%" or is_unit(word):
            words.append(word)
            pos = match.end()
            while word != "%" and (more := WORD_AFTER.match(sentence, pos)) and is_unit(more.group(1)) \
                    and more.group(1).islower():
                words.append(more.group(1))  # a compound: "login attempts"
                pos = more.end()
            rate = RATE.match(sentence, pos)
            if rate and word != "%" and rate.group(1).lower() not in STOPWORDS:
                words.append(f"per {rate.group(1)}")
            return " ".join(words)
        if word.lower() in STOPWORDS or not MODIFIER.fullmatch(word) or word[0].isupper():
            break
        words.append(word)
        pos = match.end()
    rate = RATE.match(sentence, end)
    if rate and sentence[end:rate.start(1)].strip().lower() == "per" and rate.group(1).lower() not in STOPWORDS:
        return f"per {rate.group(1)}"  # "5 per passcode"
    first = WORD_AFTER.match(sentence, end)
    if cued and first and first.group(1).islower() and first.group(1).endswith("s") \
            and not first.group(1).endswith("ss") and first.group(1) not in STOPWORDS:
        return first.group(1)
    return ""


def is_reference(sentence: str, start: int, end: int) -> bool:
    """Whether the number at sentence[start:end] names a section, standard, version or code rather
    than a limit: after a label ("Section 4", "§ 3.2", "RFC 2119", "status 401"), joined to a name
    ("SHA-256"), three parts or more ("1.2.3"), or a heading's number at the sentence's start."""
    before = sentence[max(0, start - 20):start]
    if LABEL.search(before):
        return True
    joined = JOINED.search(before)
    if joined and ((before.endswith("-") and re.search(r"[A-Za-z]", joined.group(1))) or (
            joined.group(2) and is_reference(sentence, joined.start(2) + start - len(before), joined.end(2) + start - len(before)))):
        return True  # "SHA-256", "SP800-63B", and each part after a name's number: "SP 800-63-4", "FIPS 140-3"
    written = sentence[start:end]
    if "." in written and VERSIONED.search(before):
        return True  # "OAuth 2.0 tokens"
    if "." in written and re.match(r"\.\d", sentence[end:]):
        return True  # "1.2.3": NUMBER stopped after "1.2"
    if not sentence[:start].strip() and HEADING_NUMBER.match(sentence[start:]):
        return True  # "5.1 Session handling Sessions MUST ..."
    if re.fullmatch(r"(?:19|20)\d\d", written) and YEAR_BEFORE.search(before) and not _unit(sentence, end, cued=False):
        return True  # "launched in May 2013": a year
    if "." in written and not _unit(sentence, end, cued=False) and re.search(r"\b(?:see|in|under|of|from|per)\s+$",
                                                                              before, re.I):
        return True  # "as described in 5.1": a decimal without a unit, where a reference stands
    return False


# a count written as a word: "a minimum of eight characters", "at least six decimal digits"
NUMBER_WORDS = {word: n for n, word in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())} | {"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
                                                     "ninety": 90}
# ... alone: "one hundred", "twenty-four" are read as no number rather than as the wrong one
NUMBER_WORD = re.compile(r"(?<![\w-])(?:" + "|".join(NUMBER_WORDS) + r")\b(?![-\s]+(?:hundred|thousand|million|billion)\b|-)",
                         re.I)


def _numbers(sentence: str) -> list[tuple[int, int, str, str]]:
    """Each number of a sentence that is no reference, in order: (start, end, its digits, the word
    it is written as, or "")."""
    found = []
    for m in NUMBER.finditer(sentence):
        written = m.group().rstrip(".,")
        if not is_reference(sentence, m.start(), m.start() + len(written)):
            found.append((m.start(), m.start() + len(written), written, ""))
    for m in NUMBER_WORD.finditer(sentence):
        found.append((m.start(), m.end(), str(NUMBER_WORDS[m.group().lower()]), m.group()))
    return sorted(found)


def quantities(sentence: str) -> list[Quantity]:
    """The limits a sentence states, in order: each number that is no reference, with its unit and
    comparison. A negation before the comparison turns it ("MUST NOT retry more than 5 times" is
    at most 5 times); "between 8 and 64 characters" is at least 8 and at most 64 characters. A
    number written as a word is a limit only where a word compares it and a unit follows ("a
    minimum of eight characters"): "one of the" and "two factors" are none."""
    found: list[Quantity] = []
    numbers = _numbers(sentence)
    for k, (start, end, written, word) in enumerate(numbers):
        before = sentence[max(0, start - 60):start]
        prefix = before[-1] if before and before[-1] in CURRENCY_SIGN and not word else ""
        if prefix:
            before = before[:-1]
        comparison: Comparison | None = None
        cue = CUE.search(before)
        if cue:
            comparison = Comparison[cue.lastgroup or ""]
            clause = re.split(r"[,;:]", before[:cue.start()])[-1]
            if comparison in NEGATED and NEGATION.search(clause) and not re.match(r"(?:no|not)\b", cue.group(), re.I):
                comparison = NEGATED[comparison]
        elif re.search(r"\bbetween\s+(?:the\s+)?$", before, re.I):
            comparison = Comparison.AT_LEAST
        elif re.search(r"\bbetween\s+\S+\s+and\s+$", before, re.I) and found:
            comparison = Comparison.AT_MOST
        elif re.match(r"\s+or\s+(?:more|longer|greater|higher)\b", sentence[end:]):
            comparison = Comparison.AT_LEAST
        elif re.match(r"\s+or\s+(?:less|fewer|shorter|lower)\b", sentence[end:]):
            comparison = Comparison.AT_MOST
        unit = _unit(sentence, end, cued=comparison is not None)
        if comparison is None and unit and re.match(r"\s*(?:" + re.escape(unit) + r")\s+(?:after|since|from)\b",
                                                     sentence[end:]):
            comparison = Comparison.AFTER  # "expire 15 minutes after it was issued"
        if not unit and prefix == "" and k + 1 < len(numbers) and re.fullmatch(r"\s*(?:and|to|or|-|–)\s*",
                                                                                 sentence[end:numbers[k + 1][0]]):
            unit = _unit(sentence, numbers[k + 1][1], cued=True)
        if word and (comparison is None or not is_unit(unit.split(" per ")[0].split(" ")[-1] if unit else "")):
            continue
        found.append(Quantity(written, unit, comparison, prefix, word))
    return found
