"""The terms a text defines: acronyms and what they stand for, other names it gives a thing
("X, commonly referred to as Y", "hereafter Y", "also known as Y") and what it says a term
means ("X means ...", "X is defined as ..."), each with the sentence that defines it.

Pure text: the glossary rule (rules/glossary.py) reads a fact's words through this, and search,
context and views on request read the glossary to take a reader's word for the source's.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from .inline import inline_words
from .markdown import ATX_HEADING, FENCED_BLOCK, visible_text
from .prose import STOPWORDS, prose_sentences

Kind = Literal["acronym", "alias", "meaning"]


@dataclass(frozen=True)
class Definition:
    term: str  # as the source spells it: "MFA", "Velvet Sweatshop"
    means: str  # what it stands for (an acronym), the other name (an alias), or its definition
    kind: Kind
    sentence: str  # the sentence that defines it


NAME = r"[A-Za-z][\w'’-]*"
# "Multi-Factor Authentication (MFA)", "Web Application Firewalls (WAFs)", and with a remark
# after it, "Proof Key for Code Exchange (PKCE, pronounced "pixy")"
SPELLED_THEN_SHORT = re.compile(rf"((?:{NAME}[ ]){{0,7}}{NAME}) \(([A-Z][A-Za-z0-9]{{1,9}})(?:[,;] [^()]{{1,40}})?\)")
# "DOM (Document Object Model)"
SHORT_THEN_SPELLED = re.compile(rf"\b([A-Z][A-Z0-9]{{1,9}}s?) \(({NAME}(?: {NAME}){{1,7}})\)")
QUOTED = r"[\"“'‘]([^\"”'’]{2,60})[\"”'’]"
OTHER_NAME = rf"(?:{QUOTED}|((?:{NAME}[ ]){{0,4}}{NAME}))"
# "X, commonly referred to as Y", "X (also known as Y)", "X is often called Y"
# ... "X are now referred to as Y", "X, referred to in this document as Y", "X (formerly Y)"
ALIAS = re.compile(rf"((?:{NAME}[ ]){{0,5}}{NAME})(?: \([^()]{{1,12}}\))?,? \(?(?:is |are )?"
                   rf"(?:now |commonly |often |also |sometimes |usually |informally |popularly |otherwise |formerly |"
                   rf"previously |collectively )?"
                   rf"(?:referred to(?: in (?:this|these|the) (?:document|guidelines?|standard|specification|volume)s?)? as|"
                   rf"known as|called|a\.k\.a\.?|aka|(?<=\()(?:formerly|previously)) (?:an? |the )?{OTHER_NAME}")
# "The Open Web Application Security Project (hereafter "OWASP")", "..., hereinafter referred to as Y"
HEREAFTER = re.compile(rf"((?:{NAME}[ ]){{0,6}}{NAME}),? \(?(?:hereafter|hereinafter)(?:,? (?:referred to as|called))?,? "
                       rf"{OTHER_NAME}", re.I)
# "the session ID (or token)", "the subscriber (i.e., the user)": a name, then another in
# brackets; "(or the linter)", with an article, is another thing, not another name
BRACKETED = re.compile(rf"((?:{NAME}[ ]){{0,5}}{NAME}) \((or |i\.e\.,? (?:an? |the )?)({NAME}(?: {NAME}){{0,3}})\)")
# "multiple customers (tenants)", "the right output method (sink)": a common noun, then another
# in bare brackets. One word each side, no hyphen, neither a participle, an adverb nor a small
# word, both in the same number: over the sheets and PEPs here most of what is left is another
# name ("libraries (gems)", "output (stdout)": 11 of the 15 pairs; not "accesses (ports)" nor
# "a checker (beartype)"), where two words in the brackets were mostly a remark ("iterations
# (recommended)", "time (international format)").
ONE_WORD_ASIDE = re.compile(r"\b([a-z]{4,}) \(([a-z]{3,})\)")
# what "(or Y)" and "(i.e., Y)" hold that is no name: "(or more)", "(or later)", "(i.e., all)"
NOT_ANOTHER_NAME = frozenset("""both either more less fewer higher lower later earlier newer older greater
smaller larger bigger equivalent similar above below not none all any other others so vice same
another each every its their his her whatever whichever""".split())
# at a sentence's start: "The term X means ...", "A nonce is defined as ...", "`TypeForm` refers to ..."
MEANING = re.compile(rf"^(?:(?:The|A|An) )?(?:term |word |phrase )?[\"“'`]?((?:{NAME}[ ]){{0,3}}{NAME})[\"”'`]? "
                     r"(?:means|is defined as|are defined as|refers to|stands for) (.{8,})$")
# words that start a clause, not a name: "This means", "It refers to"
NOT_A_NAME = frozenset("this that it these those which what there here they we he she".split())
# words between a name and "referred to as": "The company is often referred to as"
LINKING = frozenset("is are was were often commonly also sometimes usually generally now formerly previously collectively".split())
# letters a spelled-out word may give its acronym: "Cross-Site Scripting (XSS)", "eXtensible"
STANDS_FOR = {"cross": "x", "trans": "x", "extensible": "x", "exchange": "x"}
# small words an acronym may pass over inside its name: "Proof Key for Code Exchange (PKCE)"
PASSED_OVER = frozenset("a an and at by for in of on or the to with".split())


def _letters(word: str) -> tuple[set[str], list[str]]:
    """The letters a word may give an acronym: its first (or the letter a prefix such as "Cross"
    stands for), then, in order, each hyphenated part's first and each capital inside it."""
    parts = [p for p in re.split(r"[-–]", word) if p]
    if not parts:  # a dash standing for a word: "| AB | - |"
        return set(), []
    first = {word[0].lower()} | ({STANDS_FOR[parts[0].lower()]} if parts[0].lower() in STANDS_FOR else set())
    if word[0].islower():  # "eXternal" gives its X
        first |= {c.lower() for c in word if c.isupper()}
    others = [c.lower() for part in parts[1:] for c in part[:1]]
    others += [c.lower() for c in parts[0][1:] if c.isupper()]
    return first, others


def _spells(words: list[str], short: str) -> bool:
    """Whether the words, in order, give the acronym's letters: each word its first letter, and
    then perhaps some of its other letters (_letters) in turn ("XML eXternal Entity (XXE)")."""
    letters = short.lower()

    def match(w: int, at: int) -> bool:
        if w == len(words):
            return at == len(letters)
        if w and words[w].lower() in PASSED_OVER and match(w + 1, at):
            return True
        first, others = _letters(words[w])
        if at == len(letters) or letters[at] not in first:
            return False
        at += 1
        if match(w + 1, at):
            return True
        for c in others:
            if at < len(letters) and letters[at] == c:
                at += 1
                if match(w + 1, at):
                    return True
        return False

    return match(0, 0)


def _acronym(words: str, short: str) -> str | None:
    """The longest tail of `words` that spells `short` (its plural "s" aside), or None."""
    short = short[:-1] if short.endswith("s") and len(short) > 2 and short[:-1].isupper() else short
    if not any(c.isupper() for c in short[1:]) and len(short) > 2 and not short.isupper():
        return None  # "(Note)", "(Optional)": a word in brackets, not an acronym
    parts = words.split()
    for n in range(len(parts), 0, -1):
        tail = parts[-n:]
        if tail[0].lower() in STOPWORDS:
            continue
        if _spells(tail, short):
            return " ".join(tail)
    return None


def _name(words: str) -> str:
    """A name before a defining phrase, cut after the last word that cannot be in it: "The
    company" -> "company", "Access tokens are" -> ..."""
    parts = words.split()
    while parts and parts[-1].lower() in LINKING:
        parts.pop()
    for n in range(len(parts) - 1, -1, -1):
        if parts[n].lower() in STOPWORDS or parts[n].lower() in NOT_A_NAME:
            return " ".join(parts[n + 1:])
    return " ".join(parts)


def _other(match: re.Match[str], first: int) -> str:
    quoted, bare = match.group(first), match.group(first + 1)
    if quoted:
        return quoted.strip()
    words = bare.split()
    # "known as tokens that expire": the name ends before the first word that cannot be in it
    for n, word in enumerate(words):
        if word in STOPWORDS:  # "Point Of View" is a name, "nodes that run" is not
            return " ".join(words[:n])
    return bare


def _after(match: re.Match[str], name: str) -> str:
    """What a match holds after the name it found: ", also known as Y", " called Y"."""
    whole = match.group(0)
    return whole[whole.index(name) + len(name):] if name in whole else ""


def _bare(match: re.Match[str], name: str) -> bool:
    """"X, known as Y" with nothing but a comma between: Y may name the clause that ends in X
    ("attacks between hosts of the same domain, known as cross-subdomain cookies"), not X."""
    return bool(re.match(r", (?:known as|called|referred to as) ", _after(match, name)))


# words that make "X ... called Y" give another name of X; without one, "called" and "known as"
# may name one thing of a kind ("an ORM called ActiveRecord", "a process is known as vendor
# lock-in") or be a verb ("Gates called MITS")
ANOTHER_NAME = re.compile(r"\b(?:now|commonly|often|also|sometimes|usually|informally|popularly|otherwise|formerly|"
                          r"previously|collectively|referred|hereafter|hereinafter|a\.k\.a|aka)\b", re.I)


def _one_of_a_kind(match: re.Match[str], name: str, sentence: str) -> bool:
    """Whether "X called Y" or "X known as Y", with no word saying Y is X's other name, names one
    thing of the kind X rather than X: "called" straight after X (a verb, or "a tool called
    Y"), X a bare common noun ("a process is known as Y"), or X brought in by "a" or "an"."""
    rest = _after(match, name)
    if ANOTHER_NAME.search(rest):
        return False
    before = sentence[:match.start(1) + (match.group(1).rfind(name) if name in match.group(1) else 0)]
    return (re.match(r" called ", rest) is not None or (" " not in name and name.islower())
            or re.search(r"\b(?:an?|An?)\s+$", before) is not None)


def _differ_in_number(name: str, other: str) -> bool:
    """One name plural and the other not ("domain", "cookies"); an acronym or a name that is not
    all letters says nothing of it."""
    def plural(words: str) -> bool | None:
        last = words.split()[-1]
        if last.isupper() or not last.replace("-", "").isalpha():
            return None
        return last.lower().endswith("s") and not last.lower().endswith(("ss", "us", "is"))

    first, second = plural(name), plural(other)
    return first is not None and second is not None and first != second


def sentence_definitions(sentence: str) -> list[Definition]:
    """The terms one sentence defines."""
    found: list[Definition] = []
    for words, short in SPELLED_THEN_SHORT.findall(sentence):
        spelled = _acronym(words, short)
        if spelled:
            found.append(Definition(short.rstrip("s") if short[:-1].isupper() else short, spelled, "acronym", sentence))
    for short, words in SHORT_THEN_SPELLED.findall(sentence):
        bare = short[:-1] if short.endswith("s") and short[:-1].isupper() else short
        if _spells(words.split(), bare):
            found.append(Definition(bare, words, "acronym", sentence))
    # "X — commonly referred to as Y — is ...": a dash sets a name off as a comma does
    commas = re.sub(r"\s+(?:—|–|--)\s+|—", ", ", sentence)
    for name, connective, other in BRACKETED.findall(commas):
        name, words = _name(name), other.split()
        # one word before "(or Y)" is mostly a quality and Y another ("known (or suspected)",
        # "empty (or invalid)"); a name of two or three words is a thing ("session ID (or token)")
        if (1 if connective != "or " else 2) <= len(name.split()) <= 3 and not name.endswith("ed") \
                and name.lower() != other.lower() \
                and not {w.lower() for w in words} & (NOT_ANOTHER_NAME | STOPWORDS | {"even"}):
            found.append(Definition(other, name, "alias", sentence))
    for name, other in ONE_WORD_ASIDE.findall(sentence):
        if name != other and not {name, other} & (NOT_ANOTHER_NAME | STOPWORDS) \
                and not any(w.endswith(("ed", "ly", "ing")) for w in (name, other)) \
                and not _differ_in_number(name, other):
            found.append(Definition(other, name, "alias", sentence))
    for pattern in (ALIAS, HEREAFTER):
        for match in pattern.finditer(commas):
            name, other = _name(match.group(1)), _other(match, 2)
            # "what developers have defined, also known as ...": a verb, not a name
            if name and other and name.lower() != other.lower() and not name.endswith("ed") \
                    and not (_bare(match, name) and _differ_in_number(name, other)) \
                    and not (pattern is ALIAS and _one_of_a_kind(match, name, commas)):
                found.append(Definition(other, name, "alias", sentence))
    meaning = MEANING.match(sentence)  # a lead-in's meaning goes on in its list: no meaning in it alone
    if meaning and not sentence.endswith(":") and meaning.group(1).split()[0].lower() not in NOT_A_NAME | STOPWORDS:
        found.append(Definition(meaning.group(1), meaning.group(2).rstrip(". "), "meaning", sentence))
    return found


# A standard's lists of abbreviations and of definitions, as Markdown writes them: a definition
# list (kramdown, Pandoc, PHP Markdown Extra: the term on a line, ": what it means" on the next),
# a table row ("| AAL | Authentication Assurance Level |") and a list item ("- PAD: Presentation
# Attack Detection", "- **KBV** — ..."). Where its words spell the term, an acronym; a definition
# list's other terms have a meaning; a table's or list's, nothing (a note, a heading's word).
DEFINITION_LIST = re.compile(r"^(?P<term>[A-Za-z0-9][^\n:|#>]{0,60}?)[ \t]*\n: +(?P<means>\S[^\n]*)", re.MULTILINE)
SHORT = r"(?:\*\*|__)?(?P<term>[A-Z][A-Za-z0-9]{1,9})(?:\*\*|__)?"
LISTED = (re.compile(rf"^\|[ \t]*{SHORT}[ \t]*\|[ \t]*(?P<means>[^|\n]+?)[ \t]*\|", re.MULTILINE),
          re.compile(rf"^[ \t]*[-*+][ \t]+{SHORT}[ \t]*(?::|—|–| -)[ \t]+(?P<means>[^\n]+)", re.MULTILINE))


# A section that is a glossary, and its entries as a list writes them: "## Terminology" over
# "- **Client**: Generally refers to an application ..." (the OWASP OAuth 2.0 sheet), "- **Term:**
# meaning", "- Term — meaning". Only under such a heading: elsewhere a bold lead-in is a point
# made, not a term defined.
GLOSSARY_HEADING = re.compile(r"^(?:terminology|glossary|definitions?|key (?:terms|concepts)|terms(?: and definitions)?|"
                              r"vocabulary|concepts|terms used)\b", re.I)
ASIDES = frozenset("note notes example examples warning tip important caution see source sources".split())
GLOSSARY_ITEM = re.compile(r"^[ \t]*[-*+][ \t]+(?:(?:\*\*|__)(?P<bold>[^*_\n:]{1,60}?):?(?:\*\*|__):?|"
                           r"(?P<plain>[A-Za-z][^:\n]{0,40}?):)[ \t]*(?:—|–| -)?[ \t]*(?P<means>[A-Za-z][^\n]*)$")


# A glossary's entry that is only another name: "memorized secret: See password." ("See also"
# points to a neighbour, not to the same thing)
SEE = re.compile(rf"^See (?!also\b)(?:the )?((?:{NAME}[ ]){{0,4}}{NAME})\.?$")
# ... or that gives one in its words: "This concept has historically been known as a blacklist",
# "In previous editions, this was referred to as electronic authentication"
ENTRY_ALIAS = re.compile(rf"\b(?:[Tt]his|[Tt]he (?:term|concept|idea|practice)|[Ii]t)(?: \w+)? (?:is|was|are|were|has|had)"
                         rf"(?: (?:historically|formerly|previously|also|sometimes|commonly|often|been))* "
                         rf"(?:known as|called|referred to as) (?:an? |the )?{OTHER_NAME}")
# a term with another name of it in brackets: "electronic authentication (e-authentication)"
TERM_AND_BRACKETED = re.compile(r"^(?P<name>[^()]+?) \((?P<other>[^()]{2,40})\)$")


def _spelled_out(term: str, means: str) -> bool:
    """Whether a listed term is an acronym its listed words spell ("AAL": "Authentication Assurance Level")."""
    return re.fullmatch(r"[A-Z][A-Za-z0-9]{1,9}", term) is not None and _spells(means.split(), term.rstrip("s"))


def listed_definitions(text: str) -> list[Definition]:
    """The terms a text's lists of abbreviations and definitions give, in the order they stand."""
    found: list[tuple[int, Definition]] = []
    for pattern in (DEFINITION_LIST, *LISTED):
        for match in pattern.finditer(text):
            term = inline_words(match.group("term")).strip()
            means = inline_words(match.group("means")).strip().rstrip(".").strip()
            entry = f"{term}: {means}"
            if _spelled_out(term, means):
                found.append((match.start(), Definition(term, means, "acronym", entry)))
            elif pattern is DEFINITION_LIST and len(term.split()) <= 8:
                found += [(match.start(), d) for d in _glossary_entry(term, means, entry)]
    found += _glossary_sections(text)
    return [d for _, d in sorted(found, key=lambda f: f[0])]


def _glossary_sections(text: str) -> list[tuple[int, Definition]]:
    """The entries of the lists under a heading that names a glossary ("Terminology"), outside code."""
    found: list[tuple[int, Definition]] = []
    inside, at = False, 0
    for line in FENCED_BLOCK.sub("", text).splitlines(keepends=True):
        heading = ATX_HEADING.match(line)
        if heading:
            inside = bool(GLOSSARY_HEADING.match(visible_text(heading.group(2) or "").strip()))
        elif inside and (item := GLOSSARY_ITEM.match(line.rstrip("\n"))):
            term = inline_words(item.group("bold") or item.group("plain")).strip()
            means = inline_words(item.group("means")).strip().rstrip(".").strip()
            if term and len(term.split()) <= 6 and term.lower() not in ASIDES and not _spelled_out(term, means):
                found += [(at, d) for d in _glossary_entry(term, means, f"{term}: {means}")]
        at += len(line)
    return found


def _glossary_entry(term: str, means: str, entry: str) -> list[Definition]:
    """What a definition list's entry defines: its term's meaning, or the other name it points
    to; and the other name its term gives in brackets or its words give."""
    bracketed = TERM_AND_BRACKETED.match(term)
    if bracketed:  # "credential service provider (CSP)": the acronym is read from the entry as prose
        term = bracketed.group("name")
    see = SEE.match(means)
    if see and re.search(r"\b(?:and|or)\b", see.group(1)):
        see = None  # "See X and Y" points to two terms, and is no other name of either
    found = [Definition(term, see.group(1), "alias", entry) if see else Definition(term, means, "meaning", entry)]
    if bracketed and not _acronym(term, bracketed.group("other")) and len(bracketed.group("other").split()) <= 3:
        found.append(Definition(bracketed.group("other"), term, "alias", entry))
    for match in ENTRY_ALIAS.finditer(means):
        other = _other(match, 1)
        if other and other.lower() != term.lower():
            found.append(Definition(other, term, "alias", entry))
    return found


def heading_definitions(text: str) -> list[Definition]:
    """The acronyms a text's headings spell out ("## Encryption as a Service (EaaS)"), outside its
    code: a sheet may name one only there (10 over the 24 OWASP sheets of the wild corpus, none
    wrong; none in the PEPs). Only acronyms, whose words must spell them: a heading's other
    brackets are mostly a remark ("Examples (Python)", "Setup (Optional)")."""
    found = []
    for line in FENCED_BLOCK.sub("", text).splitlines():
        heading = ATX_HEADING.match(line)
        if heading and heading.group(2) and "(" in line:
            found += [d for d in sentence_definitions(visible_text(heading.group(2))) if d.kind == "acronym"]
    return found


def definitions(text: str) -> list[Definition]:
    """The terms a text defines, in its lists of them, then in its prose (code and markup aside),
    then in its headings, each once: a term defined again keeps its first definition of each kind."""
    seen: set[tuple[str, str]] = set()
    found = []
    prose = [d for sentence in prose_sentences(text, lead_ins=True) for d in sentence_definitions(sentence)]
    for d in listed_definitions(text) + prose + heading_definitions(text):
        key = (d.term.lower(), d.kind)
        if key not in seen:
            seen.add(key)
            found.append(d)
    return found
