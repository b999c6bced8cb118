"""Concepts in prose: the terms several texts share, one key for every spelling of a name, and
the sentences that mention a concept by any of its names.

Pure text, deterministic: the concept pages (rules/concepts.py) pick a project's concepts from
its glossary (kbuild.text.definitions) and from the phrases its facts share (`phrases`), join the
names of one thing (`Names`: a plural, a hyphenation, "multifactor" and "multi-factor", an
acronym and its expansion as a glossary pairs them) and find each fact's statements about one
(`mentions`). No part of speech is tagged: a phrase is a run of two or three content words,
and a phrase that only ever stands inside a longer one is that longer one (`closed`).
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .prose import STOPWORDS

# an acronym as a text writes it: "MFA", "MFAs", "OAuth2" is no acronym, "TLS" is
ACRONYM = re.compile(r"\b([A-Z][A-Z0-9]{1,7})(s?)\b")
# RFC 2119 keywords and words often set in capitals that name nothing
NOT_ACRONYMS = frozenset("MUST SHALL SHOULD MAY NOT REQUIRED RECOMMENDED OPTIONAL AND OR NOTE TODO ALL NO "
                         "IF THE OF TO IN ON IS IT".split())
WORD = re.compile(r"[A-Za-z][A-Za-z'’]*(?:[-–][A-Za-z]+)*(?:\(s\))?|[^\sA-Za-z]+")
# words that lead into or qualify a phrase rather than name a thing: never at a phrase's edge
FILLER = STOPWORDS | frozenset(
    """within without per via every each many much several new using use used uses least most
    also always never often usually e.g i.e etc like unlike see whether either neither yet
    non based following follows same different another other others able unless additional certain
    various potential possible specific include includes including need needs make makes provide
    provides allow allows given even though although
    across among amongst around along beyond behind beside besides despite inside outside throughout
    toward towards onto whereas multiple few fewer any anything something somewhere anywhere
    everywhere elsewhere else instead rather take takes get gets gain gains give gives
    et al vs cf viz""".split())
LONGEST = 3  # words in a phrase: "session token lifetime", not a clause


def singular(word: str) -> str:
    """A word's singular as a key compares it, by the regular English endings only: "tokens" ->
    "token", "policies" -> "policy", "hashes" -> "hash", "ids" -> "id"; "access", "status",
    "analysis" stay. "cookie" and "cookies" are both "cooky": which of "-ie" or "-y" a word in
    "-ies" had no ending tells, and a key needs only to be the same for both."""
    w = word.lower()
    if w.endswith("ie"):
        return w[:-2] + "y"
    if len(w) <= 2 or w.endswith(("ss", "us", "is", "ous")):
        return w
    if w.endswith("ies") and len(w) > 4:
        return w[:-3] + "y"
    if w.endswith(("ches", "shes", "xes", "sses", "zes")):
        return w[:-2]
    return w[:-1] if w.endswith("s") else w


def name_words(name: str) -> tuple[str, ...]:
    """A name's words as one key compares them: lower case, each singular, split at hyphens and
    dashes, "token(s)" as "token", a leading article dropped."""
    name = re.sub(r"\b([A-Z][A-Za-z]*[A-Z])s\b", r"\1", re.sub(r"\(s\)", "", name))  # "XSSs", "IdPs": a plural
    words = re.findall(r"[a-z0-9]+", name.lower().replace("’", "'").replace("'s", ""))
    while words and words[0] in ("a", "an", "the"):
        words.pop(0)
    return tuple(singular(w) for w in words)


def concept_key(name: str) -> str:
    """One key for every spelling of a name: "Session-Tokens", "session token(s)" and "session
    tokens" are "sessiontoken", "multifactor" and "multi-factor" the same."""
    return "".join(name_words(name))


def _content(word: str) -> bool:
    return (word.isalpha() or bool(re.fullmatch(r"[A-Za-z]+(?:[-–][A-Za-z]+)*(?:\(s\))?", word))) \
        and len(word) > 1 and word.lower() not in FILLER


def phrases(sentence: str) -> dict[str, str]:
    """The terms a sentence may share with others, by key, each as this sentence writes it: its
    acronyms, and each run of two or three content words inside a run of them (no stop word,
    number or punctuation between), never starting with an adverb nor ending with a past form."""
    found: dict[str, str] = {}
    for short, _ in ACRONYM.findall(sentence):
        if short not in NOT_ACRONYMS and not short.isdigit():
            found.setdefault(concept_key(short), short)
    run: list[str] = []
    for token in [*WORD.findall(sentence), "."]:
        if _content(token):
            run.append(token)
            continue
        # a hyphenated word is a phrase of its parts: "session-tokens" is "session tokens"
        for n in range(1, LONGEST + 1):
            for i in range(len(run) - n + 1):
                words = run[i:i + n]
                if len(name_words(" ".join(words))) < 2 or len(name_words(" ".join(words))) > LONGEST:
                    continue
                if words[0].lower().endswith("ly") or words[-1].lower().endswith(("ed", "ly")):
                    continue
                if all(w.isupper() for w in words):
                    continue  # "MUST NOT", a heading in capitals
                found.setdefault(concept_key(" ".join(words)), " ".join(words))
        run = []
    return found


def closed(found: Mapping[str, frozenset[str]], names: Mapping[str, str]) -> list[str]:
    """Of phrases found in these sets of places (key -> places), those not standing only inside a
    longer one: "factor authentication" is left out where every place that says it says
    "multi-factor authentication". `names` gives each key's words."""
    words = {k: name_words(names[k]) for k in found}
    kept = []
    for key, places in found.items():
        inside = any(len(words[other]) > len(words[key]) and _contains(words[other], words[key])
                     and places <= found[other] for other in found if other != key)
        if not inside:
            kept.append(key)
    return kept


def _contains(longer: Sequence[str], shorter: Sequence[str]) -> bool:
    n = len(shorter)
    return any(tuple(longer[i:i + n]) == tuple(shorter) for i in range(len(longer) - n + 1))


class Names:
    """Which names are one concept: every spelling of a name (concept_key), and the names a
    glossary pairs (an acronym and its expansion, another name), joined transitively."""

    def __init__(self) -> None:
        self._parent: dict[str, str] = {}

    def _root(self, key: str) -> str:
        self._parent.setdefault(key, key)
        while self._parent[key] != key:
            self._parent[key] = self._parent[self._parent[key]]
            key = self._parent[key]
        return key

    def join(self, *names: str) -> None:
        keys = [concept_key(n) for n in names if concept_key(n)]
        for key in keys[1:]:
            a, b = self._root(keys[0]), self._root(key)
            if a != b:
                self._parent[max(a, b)] = min(a, b)  # the same root whatever the order joined

    def of(self, name: str) -> str:
        """The concept a name belongs to: the key that stands for all of its names."""
        return self._root(concept_key(name))


def _spelled(name: str) -> str:
    """A pattern for a name in any of its spellings: its words apart, hyphenated or run
    together, the last one singular or plural; an acronym of three letters or fewer only in
    capitals ("IT" is not "it")."""
    if _short(name):
        return "(?-i:" + re.escape(name[:-1] if name.endswith("s") else name) + "s?)"
    words = name_words(name)
    parts = [re.escape(w) + "(?:s|es)?" for w in words[:-1]]  # "attributes include" is "attribute include"
    last = words[-1]
    if last.endswith("y") and len(last) > 3:
        parts.append(re.escape(last[:-1]) + "(?:y|ies|ie)")
    elif last.endswith(("ch", "sh", "x", "z", "s")):
        parts.append(re.escape(last) + "(?:es)?")
    else:
        parts.append(re.escape(last) + "(?:s|es)?")
    return r"(?:[\s\-–]+|)".join(parts) + r"(?:\(s\))?"


def _short(name: str) -> bool:
    return len(name) <= 4 and name.rstrip("s").isupper()


@dataclass(frozen=True)
class Concept:
    """What finds a concept in a sentence: a pattern of all its names."""

    pattern: re.Pattern[str]

    @classmethod
    def named(cls, names: Iterable[str]) -> Concept:
        spelled = sorted({_spelled(n) for n in names if name_words(n)}, key=len, reverse=True)
        return cls(re.compile(r"(?<![\w-])(?:" + "|".join(spelled) + r")(?![\w-])", re.I))

    def mentioned_in(self, sentence: str) -> bool:
        return self.pattern.search(sentence) is not None


def mentions(sentences: Sequence[str], concepts: Mapping[str, Concept]) -> dict[str, list[int]]:
    """For each concept these sentences mention, which of them do (their numbers, in order)."""
    found: dict[str, list[int]] = {}
    for name, concept in concepts.items():
        said = [i for i, s in enumerate(sentences) if concept.mentioned_in(s)]
        if said:
            found[name] = said
    return found
