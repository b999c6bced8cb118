"""Does a rebuilt page mean the same as the old one? The cutoff that stops a rebuild climbing.

A false "same" leaves a stale page standing, so the cascade is tuned for zero false "same"
first and cutoff rate second, cheapest stage first:

1. exact: equal after normalising white space and Markdown formatting (free);
2. guards: any change in the numbers, negations, RFC 2119 keywords, link targets, code
   identifiers or quoted terms forces "different";
3. edit: the only word changes are typo-sized (each replaced word of four letters or more
   within two edits of its replacement and with the same first two letters, nothing added,
   removed or moved): "same". Similarity scores alone call a
   sentence and its reversal "same", so nothing looser is trusted without a model;
4. model: only where a model is configured, one yes/no call whose probability of "yes" (from
   logprobs) must reach the threshold (default 0.99).
"""
from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from kbuild.text.keywords import KEYWORD

MARKUP = re.compile(r"(\*\*|__|\*|_|`|~~|^#+\s*|^>\s*)", re.M)
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
NEGATION = re.compile(r"\b(not|no|never|none|nor|cannot|without|neither|n't)\b|n't\b", re.I)
LINK = re.compile(r"\]\(([^)\s]+)")
CODE = re.compile(r"``([^`]+)``|`([^`]+)`|\b([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+|[a-z]+_[a-z0-9_]+|[a-z]+[A-Z]\w*)\b")
QUOTED = re.compile(r"\"([^\"]{1,80})\"|“([^”]{1,80})”")
WORD = re.compile(r"\w+|[^\w\s]")


@dataclass(frozen=True)
class Decision:
    same: bool
    stage: str  # exact, guard, edit, model
    probability: float
    reason: str


def normalise(text: str) -> str:
    return " ".join(MARKUP.sub("", text).split())


def _features(text: str) -> dict[str, Counter[str]]:
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


def classify_text(old: str, new: str) -> Decision:
    """Stages 1 to 3, which need no model."""
    a, b = normalise(old), normalise(new)
    if a == b:
        return Decision(True, "exact", 1.0, "equal after normalising white space and formatting")
    fa, fb = _features(old), _features(new)
    for kind in fa:
        if fa[kind] != fb[kind]:
            gone, added = sorted((fa[kind] - fb[kind]).elements()), sorted((fb[kind] - fa[kind]).elements())
            return Decision(False, "guard", 0.0, f"{kind} changed: {gone} -> {added}")
    wa, wb = WORD.findall(a), WORD.findall(b)
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, wa, wb, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        punctuation_only = all(not w.isalnum() for w in wa[i1:i2] + wb[j1:j2])
        if punctuation_only:
            continue
        if op != "replace" or i2 - i1 != j2 - j1 or not all(_typo(x, y) for x, y in zip(wa[i1:i2], wb[j1:j2])):
            ratio = difflib.SequenceMatcher(None, wa, wb, autojunk=False).ratio()
            return Decision(False, "edit", round(ratio, 3), "words were added, removed, moved or replaced")
    return Decision(True, "edit", 0.99, "only typo-sized word changes and punctuation")


async def classify(ctx: Any, old: str, new: str, backend: Any = None, threshold: float = 0.99) -> Decision:
    """The whole cascade; the model stage only where the backend can answer yes/no."""
    decision = classify_text(old, new)
    if decision.same or decision.stage != "edit" or backend is None or not hasattr(backend, "yes_probability"):
        return decision
    question = ("Do the two texts above state exactly the same facts, numbers, requirements and conditions, "
                "so that a reader of one learns nothing different from the other?")
    p, from_logprobs = await backend.yes_probability(ctx, "same meaning", question, f"TEXT A:\n{old}\n\nTEXT B:\n{new}")
    if not from_logprobs:  # a bare "yes" is no evidence: a server that ignores logprobs may say it to anything
        return Decision(False, "model", 0.0, "the server gave no logprobs: no evidence of the same meaning")
    return Decision(p >= threshold, "model", round(p, 4), "p(same) from the model's logprobs")
