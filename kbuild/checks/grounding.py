"""Code checks of a statement against the facts it cites, before any model is asked.

A number or RFC 2119 keyword that a statement states must appear in what it cites: a model that
writes "within 30 days" from a fact that says 90, or SHALL where the fact says SHOULD, is caught
here, for free.
"""
from __future__ import annotations

import re

NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")
KEYWORD = re.compile(r"\b(MUST NOT|SHALL NOT|SHOULD NOT|MUST|SHALL|SHOULD|MAY|REQUIRED|RECOMMENDED|OPTIONAL)\b")


def _numbers(text: str) -> list[str]:
    return [n.replace(",", "").rstrip(".") for n in NUMBER.findall(text)]


def unsupported(statement: str, cited: list[str]) -> list[str]:
    """The numbers and requirement keywords of `statement` that none of the cited texts contains
    (empty when the statement passes)."""
    sources = "\n".join(cited)
    numbers = set(_numbers(sources))
    keywords = set(KEYWORD.findall(sources))
    missing = [n for n in dict.fromkeys(_numbers(statement)) if n not in numbers]
    missing += [k for k in dict.fromkeys(KEYWORD.findall(statement)) if k not in keywords]
    return missing
