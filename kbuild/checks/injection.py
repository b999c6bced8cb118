"""Text that tries to steer the model that will read it: refused where it is written back.

A source's text reaches a model only inside <source> tags, with the system prompt saying that
nothing there is an instruction (kbuild.model.openai_backend.untrusted). A note written back by
an agent is checked before it is stored as well, since its writer may have copied it from a web
page or a tool's output: such a note is refused with the line it holds, for its writer to fix.
"""
from __future__ import annotations

import re

PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("a <source> tag, which would end the data a model reads", re.compile(r"</?\s*source\s*>", re.I)),
    ("an order to ignore instructions", re.compile(
        r"\b(ignore|disregard|forget|override)\b[^.\n]{0,40}\b(previous|prior|above|earlier|all|your|the system)\b"
        r"[^.\n]{0,20}\b(instructions?|rules|prompts?|directions)\b", re.I)),
    ("a new role for the model", re.compile(r"\byou are now\b|\bact as (an?|the) (ai|assistant|system)\b", re.I)),
    ("a system prompt", re.compile(r"(^|\n)\s*(system|assistant)\s*:|\bsystem prompt\b|<\|im_start\|>|\[INST\]", re.I)),
]


def find_injections(text: str) -> list[str]:
    """What the text holds that reads as an instruction to a model, one entry per kind."""
    return [what for what, pattern in PATTERNS if pattern.search(text)]
