"""Requirements for a spec: which sentences oblige (an RFC 2119 keyword, used normatively), what a
list item says with its lead-in, and how to test one (its numbers, limits and conditions as
Given / When / Then).

A standard's sentences that carry MUST or SHOULD are not all requirements: the definition of the
keywords ("SHOULD: This word, or the adjective ...") uses them, and a bullet of a "when to use
this" list is a condition of other requirements. A list item ("- time out after 5 minutes") only
obliges someone with its lead-in ("The server MUST:"), so the two are read as one sentence.

A text that writes no keyword in capitals (a guide, a README: the OWASP cheat sheets) states its
rules in plain English, "passwords must be at least 8 characters long". RFC 8174 leaves lower case
to its ordinary meaning, and that meaning obliges: where no statement a spec is written from
uses a capital keyword, its lower-case "must", "shall" and "should" are read as theirs, and
nowhere else (a standard that writes SHALL means nothing by "should").
"""
from __future__ import annotations

import difflib
import re
import unicodedata
from dataclasses import dataclass

from .keywords import KEYWORD, KEYWORDS
from .prose import NUMBER
from .quantities import quantities

# a keyword in quotes or code marks is named, not used: 'the key word "SHOULD" ...'
NAMED_KEYWORD = re.compile(r"[\"'`\u201c\u2018]\s*" + KEYWORD.pattern + r"\s*[\"'`\u201d\u2019]")
DEFINITION = re.compile(r"\bthis (?:word|phrase)\b|\bthe adjective\b|\bkey ?words?\b|\bRFC ?(?:2119|8174)\b|"
                        r"\bBCP ?14\b|\bare to be interpreted\b", re.I)
# a lead-in that introduces conditions, not obligations: "Use this when:", "When to use this:"
CONDITION_LEAD = re.compile(r"^\s*(?:when|if|where|unless|in case|use (?:it|this|them)|applies|this applies|"
                            r"conditions?|prerequisites?|suitable)\b|\b(?:when|if) to use\b|\bapplies (?:when|if)\b|"
                            r"\buse (?:it|this|them) (?:when|if|only)\b|"
                            r"\b(?:conditions?|when|if|where|unless|whenever)\s*$", re.I)
# the keywords a text without capitals obliges with; "may" is left out, as in English it says
# what can happen far more often than what is allowed ("attackers may guess the token")
PLAIN_WORDS = r"\b(?:must not|shall not|should not|must|shall|should)\b"
PLAIN_KEYWORD = re.compile(f"({PLAIN_WORDS})")
# plain sentences with those words that oblige nobody: an aside ("it should be noted"), an
# inference ("must have been leaked"), an expectation ("this should help")
NOT_AN_OBLIGATION = re.compile(r"\b(?:must|should|shall) be (?:noted|mentioned|remembered|said|clear)\b|"
                               r"\b(?:must|should) have (?:been|had)\b|"
                               r"\bshould (?:help|work|suffice|be (?:enough|sufficient|fine))\b", re.I)
# whom a plain sentence's "must" or "should" cannot oblige: an attacker, or what merely exists
# ("there are factors that should be considered")
NO_ONE_OBLIGED = re.compile(r"\b(?:attackers?|adversar(?:y|ies)|intruders?)\b|^\s*there (?:is|are)\b", re.I)
# where a lead-in stops mid-clause, its item completes it: "The server MUST:" + "time out ..."
OPEN_END = re.compile(KEYWORD.pattern + r"\s*$|\b(?:must|shall|should|may|will|can|to|be|is|are|that|"
                      r"the following|following|these|as follows)\s*$", re.I)
# a condition a requirement holds under: a clause that opens the sentence, or one after the keyword
OPENING_CONDITION = re.compile(r"^(?:if|when|whenever|where|unless|once|while|for each|for every)\b[^,]*", re.I)
TRAILING_CONDITION = re.compile(r"\b(?:if|when|whenever|unless|while)\b[^,;]*", re.I)
# a clause that says where a rule is written, not whom it obliges: "As § 3.2 says, uploads MUST ..."
WHERE_STATED = re.compile(r"^(?:as|according to|per|following|under|in line with)\b[^,]*,\s*", re.I)
# what a test shows, for each strength of keyword: {who} is the requirement's subject, {what} its action
THEN = {"MUST": "a test passes only if {who} can be seen to {what}",
        "MUST NOT": "a test passes only if {who} can be seen never to {what}",
        "SHOULD": "a test passes if {who} can be seen to {what}, or the case is a documented exception",
        "SHOULD NOT": "a test passes if {who} can be seen not to {what}, or the case is a documented exception",
        "MAY": "a test passes whether or not {who} can be seen to {what}"}
THEN.update({"SHALL": THEN["MUST"], "REQUIRED": THEN["MUST"], "SHALL NOT": THEN["MUST NOT"],
             "RECOMMENDED": THEN["SHOULD"], "NOT RECOMMENDED": THEN["SHOULD NOT"], "OPTIONAL": THEN["MAY"]})


@dataclass(frozen=True)
class Requirement:
    statement: str
    keyword: str  # the RFC 2119 keyword as the statement uses it, "MUST NOT" whole
    acceptance: str


def with_lead_in(lead_in: str, item: str) -> str:
    """A list item as a sentence of its own: its lead-in's words with it. A lead-in that stops
    mid-clause ("The server MUST:") runs into the item; another ("Use this credential when:")
    stands before it with its colon, so the item still reads as what it is, a condition."""
    lead = lead_in.rstrip().rstrip(":").rstrip()
    if not lead:
        return item
    if OPEN_END.search(lead):
        return f"{lead} {item}"
    return f"{lead}: {item}"


def normative_keyword(sentence: str, plain: bool = False) -> str | None:
    """The RFC 2119 keyword a sentence obliges with, or None: the keyword must be in capitals (RFC
    8174), used rather than named or defined, and not inside a condition bullet. `plain`: the
    sentence is of a text that writes no keyword in capitals (`plain_obligations`), so its lower-case
    "must", "shall" and "should" oblige, given in capitals ("should not" is "SHOULD NOT")."""
    if DEFINITION.search(sentence):
        return None
    pattern = PLAIN_KEYWORD if plain else KEYWORD
    lead, colon, rest = sentence.partition(": ")
    if colon and CONDITION_LEAD.search(lead) and not pattern.search(lead):
        return None  # a bullet of a "when to use this" list: a condition, not an obligation
    used = sentence if plain else NAMED_KEYWORD.sub(" ", sentence)
    match = pattern.search(used)
    if not match:
        return None
    if plain and (used.rstrip().endswith("?") or NOT_AN_OBLIGATION.search(used)
                  or NO_ONE_OBLIGED.search(used[:match.start()].rsplit(": ", 1)[-1])):
        return None
    keyword = match.group(1).upper()
    if keyword == "RECOMMENDED" and re.search(r"\bNOT\s+RECOMMENDED\b", used):
        return "NOT RECOMMENDED"
    return keyword


def plain_obligations(texts: list[str]) -> bool:
    """Whether texts state their rules in plain English: none uses an RFC 2119 keyword in capitals,
    and one at least obliges in lower case."""
    return (not any(normative_keyword(text) for text in texts)
            and any(normative_keyword(text, plain=True) for text in texts))


# a second obligation of the same subject: "... SHOULD wait at least 2 seconds and MUST NOT retry ..."
NEXT_OBLIGATION = re.compile(r",?\s+(?:and|but)\s+(?=\b(?:" + "|".join(KEYWORDS) + r")\b)")
NEXT_PLAIN_OBLIGATION = re.compile(rf",?\s+(?:and|but)\s+(?={PLAIN_WORDS})")


def _lower_first(text: str) -> str:
    return text[0].lower() + text[1:] if text[:2].istitle() else text


PRONOUN = frozenset("it they this these he she".split())


def acceptance(sentence: str, keyword: str, antecedent: str | None = None, plain: bool = False) -> str:
    """How to test a requirement: Given whom it obliges, When it applies (its conditions), Then
    what a test must see, with each number's edge named, so that a test can be written from it.
    A subject that is a pronoun ("It SHOULD limit attempts") is `antecedent`, when known: the
    subject of the requirement before it in the same fact. `plain`: its keyword is in lower case
    (`normative_keyword`)."""
    lead, colon, rest = sentence.partition(": ")
    if plain:
        body = rest if colon and not PLAIN_KEYWORD.search(lead) else sentence
        found = PLAIN_KEYWORD.search(body)
        subject, action = (body[:found.start()], body[found.end():]) if found else (body, "")
    else:
        body = rest if colon and keyword not in lead else sentence
        subject, _, action = body.partition(keyword)
    # the clause that holds the keyword: "See Section 4 for resets; as § 3.2 says, uploads MUST ..."
    subject = WHERE_STATED.sub("", subject.rsplit(";", 1)[-1].strip())
    conditions = []
    opening = OPENING_CONDITION.match(subject.strip())
    if opening and "," in subject:
        conditions.append(opening.group().strip())
        subject = subject.strip()[opening.end():].lstrip(", ")
    subject = _lower_first(subject.strip().rstrip(",").strip()) or "the system"
    if subject.lower() in PRONOUN and antecedent:
        subject = antecedent
    action = action.strip().rstrip(".;,").strip() or "do what is required"
    # each obligation the sentence joins ("SHOULD wait ... and MUST NOT retry ...") is tested at its own strength
    clauses: list[tuple[str, str]] = []
    for part in (NEXT_PLAIN_OBLIGATION if plain else NEXT_OBLIGATION).split(action):
        strength = (PLAIN_KEYWORD if plain else KEYWORD).match(part)
        if clauses and strength:
            clauses.append((strength.group(1).upper(), part[strength.end():].strip()))
        elif clauses:
            continue  # the keyword's own group of the split
        else:
            clauses.append((keyword, part))
    thens = []
    for strength, what in clauses:
        what = what.strip().rstrip(".;,").strip() or "do what is required"
        if strength.endswith("NOT"):
            what = re.sub(r"^NOT\s+", "", what)
        conditions += [c.strip() for c in TRAILING_CONDITION.findall(what)]
        thens.append(THEN[strength].format(who=subject, what=what))
    limits = [q.edge() for q in quantities(body)]
    # "if X" and "whenever X" read "when X"; "unless X", "once X", "while X" keep their word
    # ("when unless otherwise specified" said nothing)
    when = "; ".join(re.sub(r"^(?:if|when|whenever)\s+", "when ", _lower_first(c), flags=re.I) for c in conditions) \
        if conditions else "when it is exercised"
    if limits:
        when += ", at each limit"
    then = "; and ".join(thens)
    edges = " and ".join(f"({edge})" for edge in limits)  # each limit's two sides together
    return f"Given {subject}; {when}; then {then}" + (f" {edges}" if edges else "") + "."


def subject(sentence: str, keyword: str, plain: bool = False) -> str:
    """Whom a requirement obliges, as its acceptance's Given names it."""
    return acceptance(sentence, keyword, plain=plain).removeprefix("Given ").split(";", 1)[0]


def requirement(sentence: str, antecedent: str | None = None, plain: bool = False) -> Requirement | None:
    """The requirement a view's statement makes, with how to test it; None when it obliges
    nothing. `antecedent`: the subject of the requirement before it in its fact, for a pronoun;
    `plain`: the statement is of a text whose rules are in plain English (`plain_obligations`)."""
    keyword = normative_keyword(sentence, plain)
    if keyword is None:
        return None
    return Requirement(sentence, keyword, acceptance(sentence, keyword, antecedent, plain))


def acceptance_failures(statement: str, acceptance_text: str) -> list[str]:
    """What is wrong with an acceptance criterion written for a requirement (by a model): it must
    test every limit of the requirement with its unit (a section number is no limit) and say more
    than the requirement's own words."""
    failures = []
    have = {n.replace(",", "").rstrip(".") for n in NUMBER.findall(acceptance_text)}
    words = set(re.findall(r"[\w%$€£]+", acceptance_text.lower()))
    missing = [q.amount() for q in quantities(statement) if str(q.value) not in have
               and q.written.replace(",", "") not in have and q.word.lower() not in words]
    if missing:
        failures.append(f"does not test its limit{'s' if len(missing) > 1 else ''} {', '.join(dict.fromkeys(missing))}")
    unitless = [q.amount() for q in quantities(statement) if q.unit and q.amount() not in missing
                and not set(re.findall(r"[\w%]+", q.unit.lower())) & words]
    if unitless:
        failures.append(f"tests {', '.join(dict.fromkeys(unitless))} without the unit; name it with each value")
    flat = " ".join(acceptance_text.lower().split())
    if " ".join(statement.lower().split()).rstrip(".") in flat and not re.search(r"\b(given|when|then)\b", flat):
        failures.append("restates the requirement; say how to test it (Given ... When ... Then ...)")
    return failures


# keywords of one strength (RFC 2119): "SHALL" obliges as "MUST" does
STRENGTH = {"SHALL": "MUST", "REQUIRED": "MUST", "SHALL NOT": "MUST NOT", "RECOMMENDED": "SHOULD",
            "NOT RECOMMENDED": "SHOULD NOT", "OPTIONAL": "MAY"}
ARTICLES = frozenset({"a", "an", "the"})
# words that turn what a requirement says when added or dropped: never a difference of wording only
TURNING = frozenset("not never no nor only without except unless before after more less fewer most least above "
                    "below over under always".split())
WORDING = 2  # words a restatement may add or drop, none of them TURNING, and still be the same obligation


def _wording(statement: str) -> list[str]:
    """A requirement's words as compared: NFKC, case and punctuation folded, articles dropped,
    each keyword as its strength."""
    text = unicodedata.normalize("NFKC", statement)
    text = KEYWORD.sub(lambda m: STRENGTH.get(m.group(1), m.group(1)), text)
    return [w for w in re.findall(r"[\w%$€£.]+", text.casefold().replace(",", "")) if w.strip(".") and w not in ARTICLES]


def same_obligation(first: str, second: str) -> bool:
    """Whether two requirements oblige the same, worded the same or nearly: the same strength, the
    same limits (value, unit and comparison), and words that differ by at most a couple added or
    dropped, none that turns the meaning ("not", "before", "only" ...)."""
    strengths = [normative_keyword(s) or "" for s in (first, second)]
    if len({STRENGTH.get(k, k) for k in strengths}) > 1:
        return False
    if quantities(first) != quantities(second):
        return False
    a, b = [w.strip(".") for w in _wording(first)], [w.strip(".") for w in _wording(second)]
    if a == b:
        return True
    changed: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "replace":
            return False
        if op != "equal":
            changed += a[i1:i2] + b[j1:j2]
    return len(changed) <= WORDING and not set(changed) & TURNING
