"""A heading (or any title) as a file name."""
from __future__ import annotations

import re

LIMIT = 48
# A name cut short does not end on a word that leads into the next ("...-authentication-of").
_DANGLING = frozenset("a an and as at by for from in into of on or the to with".split())


def slug(text: str, limit: int = LIMIT) -> str:
    """Lower-case letters and digits joined by "-", at most `limit` characters, cut where a word
    ends and not on "of", "for" or the like; "part" for a text with no letter or digit."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    kept: list[str] = []
    for word in words:
        if len("-".join([*kept, word])) > limit:
            while len(kept) > 1 and kept[-1] in _DANGLING:
                kept.pop()
            return "-".join(kept) or word[:limit]  # a first word over the limit is cut: nothing better
        kept.append(word)
    return "-".join(kept) or "part"


def unique(base: str, taken: set[str]) -> str:
    """`base`, or `base-2`, `base-3`... the first not in `taken`, which it joins."""
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    taken.add(name)
    return name
