"""A cheap, deterministic token estimate: about four characters a token, one a CJK character.

No tokenizer: a budget and a chunk size, not a bill. Counted in quarter tokens ("units") so that
the tokens of a span of lines are exactly the sum over its lines (the slicer relies on it).
"""
from __future__ import annotations

import re

# Characters of scripts written without spaces count as a token each; anything else as a quarter.
_WIDE = re.compile(
    "[\u1100-\u11ff\u2e80-\u2fdf\u3000-\u9fff\ua000-\ua4cf\uac00-\ud7af"
    "\uf900-\ufaff\uff00-\uffef\U00020000-\U0003ffff]"
)
UNITS_PER_TOKEN = 4


def units(text: str) -> int:
    """The size of text in quarter tokens."""
    n = len(text)
    if n and not text.isascii():
        n += (UNITS_PER_TOKEN - 1) * len(_WIDE.findall(text))
    return n


def estimate_tokens(text: str) -> int:
    """About four characters a token, one token per CJK character."""
    return -(-units(text) // UNITS_PER_TOKEN)
