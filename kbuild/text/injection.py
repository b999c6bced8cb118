"""Text that tries to steer the model that will read it: refused where it is written back.

A source's text reaches a model only inside <source> tags, with the system prompt saying that
nothing there is an instruction (kbuild.model.openai_backend.untrusted). A note written back by
an agent is checked before it is stored as well, since its writer may have copied it from a web
page or a tool's output: such a note is refused with the line it holds, for its writer to fix.
A sentence that is one is never a summary or a view's statement (kbuild.text.prose), and
`kbuild check` fails a page in kbuild's own voice (an index, a view, a spec) that holds one.
"""
from __future__ import annotations

import re
import unicodedata

PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("a <source> tag, which would end the data a model reads", re.compile(r"</?\s*source\s*>", re.I)),
    ("an order to ignore instructions", re.compile(
        r"\b(ignore|disregard|forget|override)\b[^.\n]{0,40}\b(previous|prior|above|earlier|all|your|the system)\b"
        r"[^.\n]{0,20}\b(instructions?|rules|prompts?|directions)\b", re.I)),
    ("a new role for the model", re.compile(r"\byou are now\b|\bact as (an?|the) (ai|assistant|system)\b", re.I)),
    ("a system prompt", re.compile(r"(^|\n)\s*(system|assistant)\s*:|<\|im_start\|>|\[INST\]", re.I)),
    # Naming the system prompt is no injection ("each request is counted as sent: system
    # prompt, task, schema"); asking for it, or giving a new one, is.
    ("a request for the model's instructions", re.compile(
        r"\b(reveal|print|show|repeat|output|leak|disclose|display|tell|give|share|write out|dump)\b[^.\n]{0,30}"
        r"\b(system|hidden|initial|original|secret)\s+(prompt|instructions)\b"
        r"|\b(new|updated|your) system prompt\b|\bsystem prompt\s*(is|:)", re.I)),
]


# Words (lower case) without one of which no pattern above can match: a substring test is C-fast
# and lets a text with none of them skip every pattern (a view's sentences are each tested).
HINTS = ("source", "ignore", "disregard", "forget", "override", "you are now", "act as", "system", "assistant",
         "im_start", "[inst]", "prompt", "instruction")


def visible(text: str) -> str:
    """The text as a reader (and a model) takes it: compatibility forms folded to their plain
    letters (NFKC: full-width `Ｉｇｎｏｒｅ` is `Ignore`) and the invisible format characters
    (Unicode category Cf: zero-width spaces and joiners, soft hyphens, direction marks) taken
    out, so that neither hides a word from the patterns."""
    folded = unicodedata.normalize("NFKC", text)
    if folded.isascii():
        return folded
    return "".join(c for c in folded if unicodedata.category(c) != "Cf")


def find_injections(text: str) -> list[str]:
    """What the text holds that reads as an instruction to a model, one entry per kind."""
    text = visible(text)
    lower = text.lower()
    if not any(hint in lower for hint in HINTS):
        return []
    return [what for what, pattern in PATTERNS if pattern.search(text)]
