"""A question in the reader's words, taken into the source's: the glossary of each project
(rules/glossary.py) names the terms its sources define, and a question that uses one name of a
term (an acronym, its expansion, another name a source gives it) asks for the others too.

Search, `kbuild context` and the MCP tools expand a question before ranking (`expand`); views on
request count every name of a term as one word (`SameWords`, read by kbuild.retrieval.topic).
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from ..text.definitions import Definition
from ..text.prose import STOPWORDS
from ..text.ranking import WORD, tokens

GLOSSARY_FILE = "glossary.json"  # kb/PROJECT/glossary.json, beside glossary.md
GLOSSARY_FORMAT = 1


class GlossaryTerm(BaseModel):
    """A term a project's sources define, with the facts that define it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    term: str  # as the source spells it: "MFA"
    means: str  # what it stands for, its other name, or what it is defined as
    kind: Literal["acronym", "alias", "meaning"]
    sentence: str  # the sentence that first defines it
    cites: list[str]  # the facts that define it, "<source>/<slug>"

    @classmethod
    def of(cls, found: Definition, ref: str) -> GlossaryTerm:
        return cls(term=found.term, means=found.means, kind=found.kind, sentence=found.sentence, cites=[ref])

    @property
    def names(self) -> tuple[str, str] | None:
        """The two names of one thing, or None for a term given a meaning (not another name)."""
        return None if self.kind == "meaning" else (self.term, self.means)


class Glossary(BaseModel):
    """A project's glossary: each term once, in the order of its sources."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    terms: list[GlossaryTerm]

    def file(self) -> bytes:
        return json.dumps({"format": GLOSSARY_FORMAT, **self.model_dump()}, indent=1, ensure_ascii=False).encode()


def read_glossaries(store: Path, projects: Iterable[str]) -> list[GlossaryTerm]:
    """The terms of these projects' glossary files; a project built before glossaries, or whose
    file is not this format, has none (its next build writes one)."""
    found: list[GlossaryTerm] = []
    for project in projects:
        path = store / project / GLOSSARY_FILE
        try:
            data = json.loads(path.read_text("utf-8"))
            if data.get("format") == GLOSSARY_FORMAT:
                found += Glossary.model_validate({"terms": data["terms"]}).terms
        except (OSError, ValueError, KeyError, ValidationError):
            continue
    return found


def _stems(name: str) -> tuple[str, ...]:
    return tuple(tokens(name))


def _holds(stems: Sequence[str], name: tuple[str, ...]) -> bool:
    n = len(name)
    return bool(n) and any(tuple(stems[i:i + n]) == name for i in range(len(stems) - n + 1))


@dataclass(frozen=True)
class Expansion:
    """A question and the source's names it also asks for: (the name the question used, the other)."""

    question: str
    added: tuple[tuple[str, str], ...]

    @property
    def query(self) -> str:
        """What ranking reads: the question, then each other name it asks for."""
        return f"{self.question} {self.also}".rstrip()

    @property
    def also(self) -> str:
        """The other names alone, which ranking counts at a weight of their own."""
        return " ".join(other for _, other in self.added)

    def trace(self) -> list[str]:
        """What `--trace` shows of it: one line, or none when the glossary added nothing."""
        if not self.added:
            return []
        return ["expanded by the glossary: " + "; ".join(f"{used} -> {other}" for used, other in self.added)]


def _short(name: str) -> bool:
    return len(name) <= 3 and name.isupper()


def _used(question: str, stems: Sequence[str], name: str) -> bool:
    """Whether a question uses a name: an acronym of three letters or fewer only as written in
    capitals ("IT" is not "it", "CR" not "cr"), every other name by its stemmed words."""
    if _short(name):
        return re.search(rf"\b{re.escape(name)}s?\b", question) is not None
    return _holds(stems, _stems(name))


# A question that describes a term the way its glossary defines it asks for the term: "the
# cluster's backing key-value database" for etcd, "a consistent and highly-available key-value
# store used as Kubernetes' backing store". At least DESCRIBED words of the definition's first
# sentence (its first HEAD content words) must be the question's, and a third of them at least.
DESCRIBED = 3
HEAD = 12
# words any definition uses to define, which describe nothing
DEFINING = frozenset(tokens("refers refer generally usually typically used use uses using means mean called known "
                            "defined term something someone thing things way kind type form part set process act "
                            "e.g i.e etc"))
NOT_DESCRIBING = frozenset(tokens(" ".join(STOPWORDS))) | DEFINING


def _described(content: set[str], means: str) -> list[str]:
    """The stems of a definition's first sentence the question holds, when they describe it."""
    head = re.split(r"(?<=[.;])\s", means, maxsplit=1)[0]
    said = list(dict.fromkeys(t for t in tokens(head) if t not in NOT_DESCRIBING and not t.isdigit()))[:HEAD]
    shared = [t for t in said if t in content]
    return shared if len(shared) >= DESCRIBED and 3 * len(shared) >= len(said) else []


def expand(question: str, terms: Iterable[GlossaryTerm]) -> Expansion:
    """The question with the other name of each term it names and does not name the other way,
    and each term whose definition it describes (`_described`) and does not name."""
    stems = tokens(question)
    added: dict[str, tuple[str, str]] = {}
    described: list[GlossaryTerm] = []
    for term in terms:
        if term.names is None:
            described.append(term)
            continue
        a, b = term.names
        for used, other in ((a, b), (b, a)):
            if other.lower() not in added and _used(question, stems, used) and not _used(question, stems, other):
                added[other.lower()] = (used, other)
    content = set(stems) - NOT_DESCRIBING
    for term in described:
        if term.term.lower() in added or _used(question, stems, term.term):
            continue
        shared = _described(content, term.means)
        if shared:
            words = [w for w in dict.fromkeys(WORD.findall(question.lower())) if tokens(w) and tokens(w)[0] in shared]
            added[term.term.lower()] = (f"a description ({', '.join(words)})", term.term)
    return Expansion(question, tuple(added.values()))


TWICE = re.compile(r"\b(zz[a-z0-9]+)\s*\(\1\)")


class SameWords:
    """The names of each term a glossary gives two of, read as one word: a text is rewritten so
    that every name of a term becomes the same token, which no other word spells."""

    def __init__(self, terms: Iterable[GlossaryTerm]) -> None:
        groups: list[set[str]] = []
        for term in terms:
            if term.names is None:
                continue
            names = {n for n in term.names if n.strip()}
            joined = [g for g in groups if g & names or {x.lower() for x in g} & {x.lower() for x in names}]
            for g in joined:
                names |= g
                groups.remove(g)
            groups.append(names)
        self._names: list[tuple[re.Pattern[str], str]] = []
        for group in groups:
            word = "zz" + re.sub(r"[^a-z0-9]", "", min(group, key=lambda n: (len(n), n)).lower())
            for name in sorted(group, key=len, reverse=True):  # the longest first: "MFA devices" before "MFA"
                parts = [re.escape(p) for p in re.split(r"[\s\-–]+", name.strip()) if p]
                flags = 0 if _short(name) else re.I
                self._names.append((re.compile(r"(?<![\w-])" + r"[\s\-–]+".join(parts) + r"s?(?![\w-])", flags), word))
        self._names.sort(key=lambda p: -len(p[0].pattern))

    def __bool__(self) -> bool:
        return bool(self._names)

    def one_word(self, text: str) -> str:
        for pattern, word in self._names:
            text = pattern.sub(word, text)
        # "Multi-Factor Authentication (MFA)" names it once, not twice side by side
        return TWICE.sub(r"\1", text) if self._names else text
