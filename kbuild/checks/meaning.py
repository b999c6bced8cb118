"""Does a rebuilt page mean the same as the old one? The cutoff that stops a rebuild climbing.

A false "same" leaves a stale page standing, so the cascade is tuned for zero false "same"
first and cutoff rate second, cheapest stage first:

1. exact: equal after normalising white space and Markdown formatting (free);
2. guards: any change in the numbers, negations, RFC 2119 keywords, link targets, code
   identifiers or quoted terms forces "different";
3. edit: the only changes are typo-sized words (each replaced word of four letters or more
   within two edits of its replacement and with the same first two letters), capitalisation,
   punctuation and quoting, a repeated word said once, filler words (articles, "that", "it",
   "just", "also"...) added or removed, a leading "Q:"/"A:" label, and a cross-reference
   added around words already there: "same". Nothing else may be added, removed or moved.
   Similarity scores alone call a sentence and its reversal "same", so nothing looser is
   trusted without a model;
4. model: only where a model is configured, one yes/no call whose probability of "yes" (from
   logprobs) must reach the threshold (default 0.99).
"""
from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Protocol

from kbuild.text.keywords import KEYWORD

MARKUP = re.compile(r"(\*\*|__|\*|_|`|~~|^#+\s*|^>\s*)", re.M)
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
NEGATION = re.compile(r"\b(not|no|never|none|nor|cannot|without|neither|n't)\b|n't\b", re.I)
LINK = re.compile(r"\]\(([^)\s]+)")
CODE = re.compile(r"``([^`]+)``|`([^`]+)`|\b([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+|[a-z]+_[a-z0-9_]+|[a-z]+[A-Z]\w*)\b")
QUOTED = re.compile(r"\"([^\"]{1,80})\"|“([^”]{1,80})”")
WORD = re.compile(r"\w+|[^\w\s]")
# An internal cross-reference (reStructuredText's :ref:, :term:, :doc:) shows its words; its
# target names a place in the documents, not a fact. A link to an address keeps its target.
CROSS_REFERENCE = re.compile(r":(?:ref|term|doc):`([^`<]+?)\s*<(?![^`>]*://)[^`>]+>`")
# Words whose presence changes no fact: adding or dropping one is an edit of style. Not
# "only", "all", "first", "some": they change what a sentence claims.
FILLER = frozenset({"a", "an", "the", "that", "it", "just", "simply", "really", "actually", "basically", "also"})
# A word written twice by mistake ("the the"). Not "had", "that" or "is": "had had" is English.
REPEATABLE = frozenset({"a", "an", "the", "to", "of", "in", "on", "for", "with", "and", "or", "it", "be", "by", "as",
                        "at", "from"})
LABEL = (frozenset({"q", "a"}), ":")  # a FAQ's "Q:" / "A:" before its question or answer


@dataclass(frozen=True)
class Decision:
    same: bool
    stage: str  # exact, guard, edit, model
    probability: float
    reason: str


def normalise(text: str) -> str:
    return " ".join(MARKUP.sub("", CROSS_REFERENCE.sub(r"\1", text)).split())


def _features(text: str) -> dict[str, Counter[str]]:
    text = CROSS_REFERENCE.sub(r"\1", text)
    return {
        "numbers": Counter(n.replace(",", "") for n in NUMBER.findall(text)),
        "negations": Counter(m.group(0).lower() for m in NEGATION.finditer(text)),
        "requirement keywords": Counter(KEYWORD.findall(text)),
        "link targets": Counter(LINK.findall(text)),
        "code identifiers": Counter(a or b or c for a, b, c in CODE.findall(text)),
        "quoted terms": Counter(a or b for a, b in QUOTED.findall(text)),
    }


def _typo(a: str, b: str) -> bool:
    """Two words within two single-character edits of each other (a typo, not another word)."""
    if a.lower() == b.lower():
        return True
    if abs(len(a) - len(b)) > 2 or min(len(a), len(b)) < 4 or a[:2].lower() != b[:2].lower():
        return False  # short words, and changed beginnings (increase/decrease, enable/disable) are other words
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1] <= 2


def _words(text: str) -> list[str]:
    return [w.lower() for w in WORD.findall(text) if not _is_punctuation(w)]


def _is_punctuation(token: str) -> bool:
    return not any(c.isalnum() for c in token)


def _style_only(removed: list[str], added: list[str], before: list[str], after: list[str], at_start: bool) -> bool:
    """A change of words that states the same thing: a filler word, a repeated word, a Q:/A: label."""
    words = [w.lower() for w in removed + added if not _is_punctuation(w)]
    if removed and added and [w for w in removed if not _is_punctuation(w)] and [w for w in added if not _is_punctuation(w)]:
        return False  # words replaced by other words: typos are judged apart
    if all(w in FILLER for w in words):
        return True
    changed = removed or added
    neighbours = {w.lower() for w in (before[-1:] + after[:1])}
    if len(words) == 1 and words[0] in REPEATABLE and words[0] in neighbours:
        return True
    return at_start and len(changed) == 2 and changed[0].lower() in LABEL[0] and changed[1] == LABEL[1]


def classify_text(old: str, new: str) -> Decision:
    """Stages 1 to 3, which need no model."""
    a, b = normalise(old), normalise(new)
    if a == b:
        return Decision(True, "exact", 1.0, "equal after normalising white space and formatting")
    fa, fb = _features(old), _features(new)
    # "x" that lost its quotes says the same words: only quoting changed
    unquoted = _words(CROSS_REFERENCE.sub(r"\1", old)) == _words(CROSS_REFERENCE.sub(r"\1", new))
    for kind in fa:
        if unquoted and kind == "quoted terms":
            continue
        if fa[kind] != fb[kind]:
            gone, added = sorted((fa[kind] - fb[kind]).elements()), sorted((fb[kind] - fa[kind]).elements())
            return Decision(False, "guard", 0.0, f"{kind} changed: {gone} -> {added}")
    wa, wb = WORD.findall(a), WORD.findall(b)
    matcher = difflib.SequenceMatcher(None, [w.lower() for w in wa], [w.lower() for w in wb], autojunk=False)
    style = False
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        if all(_is_punctuation(w) for w in wa[i1:i2] + wb[j1:j2]):
            continue
        if op == "replace" and i2 - i1 == j2 - j1 and all(_typo(x, y) for x, y in zip(wa[i1:i2], wb[j1:j2])):
            continue
        if _style_only(wa[i1:i2], wb[j1:j2], wa[:i1], wa[i2:], at_start=i1 == 0 and j1 == 0):
            style = True
            continue
        return Decision(False, "edit", round(matcher.ratio(), 3), "words were added, removed, moved or replaced")
    if style:
        return Decision(True, "edit", 0.99, "only filler or repeated words, labels, typos and punctuation changed")
    return Decision(True, "edit", 0.99, "only typo-sized word changes, capitalisation and punctuation")


class Judge(Protocol):
    """What the model stage asks of a backend (kbuild.model.Backend answers it)."""

    async def yes_probability(self, ctx: Any, task: str, question: str, context: str) -> tuple[float, bool] | None: ...


async def classify(ctx: Any, old: str, new: str, backend: Judge | None = None, threshold: float = 0.99) -> Decision:
    """The whole cascade; the model stage only where the backend can answer yes/no."""
    decision = classify_text(old, new)
    if decision.same or decision.stage != "edit" or backend is None:
        return decision
    question = ("Do the two texts above state exactly the same facts, numbers, requirements and conditions, "
                "so that a reader of one learns nothing different from the other?")
    judged = await backend.yes_probability(ctx, "same meaning", question, f"TEXT A:\n{old}\n\nTEXT B:\n{new}")
    if judged is None:  # a backend that cannot judge: the edit stage's answer stands
        return decision
    p, from_logprobs = judged
    if not from_logprobs:  # a bare "yes" is no evidence: a server that ignores logprobs may say it to anything
        return Decision(False, "model", 0.0, "the server gave no logprobs: no evidence of the same meaning")
    return Decision(p >= threshold, "model", round(p, 4), "p(same) from the model's logprobs")
