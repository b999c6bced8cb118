"""The offline backend: deterministic, no network, extractive.

It cleans spans of markup for rewrites and picks sentences for summaries (the most central
ones by shared content words, not the first N words). It lets the whole pipeline run on a fresh
machine with no key, and it is the test double of every rule. Everything it writes says it is
extractive.
"""
from __future__ import annotations

import math
import re
import sys
from collections import Counter

from ..text import inline, injection, keywords, markdown, obligations, prose, quantities, sentences
from ..text.markdown import LIST_ITEM
from ..text.prose import ANGLED, STOPWORDS, WORD, clean, prose_sentences
from .backend import Backend

NAME = "offline"
LABEL = "extractive (offline backend)"

def _terms(sentence: str) -> list[str]:
    return [w.lower() for w in WORD.findall(sentence) if w.lower() not in STOPWORDS]


def central_sentences(text: str, count: int, max_words: int = 40, in_order: bool = True) -> list[str]:
    """The `count` sentences that share most content words with the rest, in text order (or,
    with `in_order` false, the most central first): whole statements of its prose, each once (a
    summary of summaries meets the same sentence twice)."""
    sentences = [s for s in dict.fromkeys(prose_sentences(text)) if len(_terms(s)) >= 3]
    if not sentences:  # a part with no statement of three content words: its first words, code or table
        words = (clean(text, prose_only=True)
                 or "\n".join(line for line in clean(text).splitlines() if not line.lstrip().startswith(("```", "~~~")))).split()
        words = ANGLED.sub(" ", LIST_ITEM.sub("", " ".join(words))).split()  # "<mail at host>" of a header reads as a tag
        head = " ".join(words[:max_words]) + (" …" if len(words) > max_words else "")
        return [head] if words and not injection.find_injections(head) else []
    frequency = Counter(t for s in sentences for t in set(_terms(s)))

    def score(item: tuple[int, str]) -> tuple[float, int]:
        index, sentence = item
        terms = _terms(sentence)
        weight = sum(frequency[t] for t in set(terms)) / math.sqrt(len(terms))
        return (-weight, index)  # ties go to the earlier sentence, so the choice is stable

    chosen = sorted(enumerate(sentences), key=score)[:count]
    if in_order:
        chosen.sort()
    result = []
    for _, sentence in chosen:
        words = sentence.split()
        result.append(" ".join(words[:max_words]) + (" …" if len(words) > max_words else ""))
    return result


def rewrite(span: str, headings: list[str], title: str, figures: dict[str, str]) -> str:
    """The span cleaned of markup, framed by where it stands, with its tables and figures as text."""
    chain = headings[1:] if headings and headings[0] == title else headings
    where = " › ".join([title, *chain])
    body = clean(span)
    parts = [f"From {where}:", body or "(this part has no text)"]
    for name, text in figures.items():
        parts.append(f"{name.replace('-', ' ').capitalize()}:\n\n{text.strip()}")
    return "\n\n".join(parts)


def summarise(text: str, sentences: int = 2) -> str:
    return " ".join(central_sentences(text, sentences)) or "(no text)"


def summarise_parts(parts: list[str], sentences: int = 2) -> str:
    """A summary of summaries: their most central sentences, each from another part while parts
    are left, so that a source's summary does not say one fact's index line over again."""
    joined = "\n\n".join(parts)
    ranked = central_sentences(joined, len(joined), in_order=False)

    def part(sentence: str) -> int:
        flat = sentence.removesuffix(" …")
        return next((i for i, p in enumerate(parts) if flat in " ".join(p.split())), -1)

    chosen: list[str] = []
    used: set[int] = set()
    for sentence in ranked:
        if len(chosen) < sentences and (part(sentence) not in used or len(used) == len(parts)):
            chosen.append(sentence)
            used.add(part(sentence))
    chosen += [s for s in ranked if s not in chosen][:sentences - len(chosen)]
    return " ".join(s for s in ranked_in_order(joined, chosen)) or "(no text)"


def ranked_in_order(text: str, chosen: list[str]) -> list[str]:
    """`chosen` sentences of `text` in the order the text has them."""
    order = {s: i for i, s in enumerate(central_sentences(text, len(text)))}
    return sorted(chosen, key=lambda s: order.get(s, len(order)))


CUES = {
    "user": re.compile(r"\b(you|your|users?|run|runs|command|option|flag|prints?|shows?|returns?|exit|error|"
                       r"install|configur\w*|example|usage|can|must|should|may|limit|default)\b", re.I),
    "developer": re.compile(r"\b(module|function|class|method|rule|engine|implement\w*|internal\w*|algorithm|"
                            r"query|queries|hash\w*|cache|database|sqlite|graph|schema|api|architecture|code|"
                            r"thread|async\w*|process|file format|lock)\b", re.I),
    "agreements": re.compile(r"\b(agree\w*|disagree\w*|however|but|unlike|whereas|in contrast|instead|rejected|"
                             r"open question|open issue|unclear|unresolved|tbd|to be decided|controvers\w*|"
                             r"alternative\w*|objection\w*|consensus)\b|\?", re.I),
}
PER_SECTION = {"digest": 4, "user": 8, "developer": 8, "agreements": 8}


def select_statements(kind: str, facts: list[dict[str, object]]) -> list[dict[str, object]]:
    """Sentences of the facts for one section of a view, each citing its fact, in fact order.

    A digest takes the most central sentences; user, developer and agreements views the
    sentences with the most cue words; a requested view every hit it was given (kbuild.retrieval.topic
    chose them, and how many).
    """
    rows = [(i, f["ref"], str(sentence)) for i, f in enumerate(facts)
            for sentence in f["sentences"] if len(_terms(str(sentence))) >= 3]  # type: ignore[union-attr]
    if kind == "requested":
        chosen = rows
    elif kind == "digest":
        limit = PER_SECTION[kind]
        frequency = Counter(t for _, _, s in rows for t in set(_terms(s)))
        ranked = sorted(range(len(rows)), key=lambda k: (-sum(frequency[t] for t in set(_terms(rows[k][2])))
                                                          / math.sqrt(len(_terms(rows[k][2]))), k))
        chosen = [rows[k] for k in sorted(ranked[:limit])]
    else:
        limit = PER_SECTION[kind]
        cue = CUES[kind]
        scored = [(len(cue.findall(s)), k) for k, (_, _, s) in enumerate(rows)]
        best = sorted((k for n, k in scored if n > 0), key=lambda k: (-scored[k][0], k))[:limit]
        chosen = [rows[k] for k in sorted(best)]
    return [{"text": " ".join(s.split()[:60]), "cites": [ref]} for _, ref, s in chosen]


def select_requirements(statements: list[dict[str, object]]) -> list[dict[str, object]]:
    """The statements of a view that oblige (an RFC 2119 keyword used as one, or, in a view that
    writes none in capitals, its lower-case must, shall or should), as requirements, each with how
    to test it (kbuild.text.obligations)."""
    found = []
    previous: dict[str, str] = {}  # the subject of the last requirement citing a fact, for "It SHOULD ..."
    plain = obligations.plain_obligations([str(st["text"]) for st in statements])
    for st in statements:
        cites = [str(c) for c in st["cites"]]  # type: ignore[attr-defined]
        req = obligations.requirement(str(st["text"]), next((previous[c] for c in cites if c in previous), None), plain)
        if req is not None:
            found.append({"statement": req.statement, "cites": st["cites"], "acceptance": req.acceptance})
            who = obligations.subject(req.statement, req.keyword, plain)
            if who.lower() not in obligations.PRONOUN:
                previous.update(dict.fromkeys(cites, who))
    return found


class OfflineBackend(Backend):
    """What the rules ask of a model, answered by the functions above."""

    name = NAME
    label = LABEL
    asks_model = False  # it answers by code: `kbuild status` expects no model call of it

    def params(self, task: str) -> dict[str, object]:
        return {"backend": NAME, "task": task}

    def prompts(self, task: str) -> list[object]:
        return []  # it asks no model

    @property
    def code(self) -> tuple[object, ...]:
        """What decides this backend's answers: part of the fingerprint of every rule that asks."""
        return (sys.modules[__name__], inline, keywords, markdown, prose, sentences, obligations, quantities, injection)

    async def read_chunk(self, ctx: object, span: str, headings: list[str], title: str, figures: dict[str, str],
                         previous: str, views: dict[str, str], picks: int, check: object = None) -> dict[str, object]:
        prose = [{"ref": "", "sentences": prose_sentences(span)}]
        summary = summarise(span, 2)
        if len(re.findall(r"[^\W\d_]{2,}", summary)) < 2:  # a part of code or figures: say where it stands
            summary = f"{' › '.join(dict.fromkeys([title, *headings]))}: {summary}"
        return {"rewrite": rewrite(span, headings, title, figures), "summary": summary,
                "picks": {view: [str(st["text"]) for st in select_statements(view, prose)][:picks] for view in views}}

    async def describe_figure(self, ctx: object, png: bytes, nearby: str, name: str, title: str) -> str:
        return nearby  # the converter's text: the caption and what stands around the figure

    async def summarise_source(self, ctx: object, title: str, summaries: list[str], check: object = None) -> str:
        return summarise_parts(summaries, 2)

    async def write_section(self, ctx: object, kind: str, about: str, title: str, facts: list[dict[str, object]],
                            check: object = None) -> list[dict[str, object]]:
        return select_statements(kind, facts)  # sentences of the facts themselves: checked by the rule

    async def ground(self, ctx: object, doubts: object) -> list[int]:
        return []  # no judge here: what code refuses is the whole check (its rewrites are the sources' words)

    async def judge_disagreement(self, ctx: object, first: str, second: str, attribute: str, values: str) -> bool:
        return True  # no judge here: the code that found the disagreement is the verdict

    async def write_spec(self, ctx: object, name: str, statements: list[dict[str, object]]) -> list[dict[str, object]]:
        return select_requirements(statements)

    async def abstract(self, ctx: object, title: str, summaries: list[str], check: object = None) -> str:
        return summarise("\n\n".join(summaries), 2)
