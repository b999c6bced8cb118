"""The grounding guardrail, shared by every rule that writes statements: check before writing."""
from __future__ import annotations

import re

from kbuild.checks.grounding import Doubt, triage
from kbuild.engine import Context, Problem, hash_bytes

from .pages import write_page


MARKUP = re.compile(r"<[a-zA-Z/!?][^>]*>|\]\(|javascript:|data:text", re.I)
CODE_SPAN = re.compile(r"(`+)(?=\S).*?(?<=\S)\1")  # `f[T](x)` and `x < y` are code, shown as code
URL = re.compile(r"\b(?:[a-z][a-z0-9+.-]*://|www\.)[^\s)\]>\"']+", re.I)
PLAIN_CHARS = 1200  # a summary or an abstract: a few sentences


def plain_text_failures(text: str, sources: str, limit: int = PLAIN_CHARS) -> list[str]:
    """What is wrong with a model's text that stands in an index line or at the head of a page:
    it must be a few plain sentences. Words, not a placeholder ("...", a single word); no link,
    HTML or script (a document may tell a model to write them); no address its sources do not
    hold; no more than `limit` characters."""
    failures = []
    words = re.findall(r"[^\W\d_]{2,}", text)
    if len(words) < min(2, len(re.findall(r"[^\W\d_]{2,}", sources))):
        failures.append("says nothing (a placeholder or a single word); write what its sources state")
    if len(text) > limit:
        failures.append(f"is {len(text)} characters long; write at most {limit}")
    if MARKUP.search(CODE_SPAN.sub("", text)):
        failures.append("holds a link, HTML or a script; write plain sentences")
    for url in dict.fromkeys(URL.findall(text)):
        if url.rstrip(".,;:") not in sources:
            failures.append(f"names {url}, which its sources do not")
    return failures


async def unsupported_claims(ctx: Context, claims: list[tuple[str, list[str]]], framing: str = "") -> list[str]:
    """The sentences of each claim that its sources do not support, each with why.

    Code decides what it can (a number, keyword, code name or quoted term the sources lack:
    refused; every word the sources' and the force of its closest source sentences: passed);
    the model is asked, in one call, only about the rest, each with its closest source sentences."""
    found: list[str] = []
    doubts: list[Doubt] = []
    cleared = 0
    for text, sources in claims:
        triaged = triage(text, sources, framing)
        found += [f"\"{sentence[:80]}\" {why}" for sentence, why in triaged.refused]
        doubts += triaged.doubts
        cleared += triaged.passed
    if doubts:
        ctx.count("grounding: sentences asked", len(doubts))
        for n in await ctx.settings.backend.ground(ctx, doubts):
            found.append(f"\"{doubts[n].sentence[:80]}\" is not supported by its sources, the model says")
    ctx.count("grounding: sentences cleared by code", cleared)
    return found


async def write_grounded(ctx: Context, path: str, page: str, claims: list[tuple[str, list[str]]],
                         framing: str = "", code: bool = False) -> None:
    """Write `page` only if nothing in `claims` (the page's own statements, each with its sources)
    is unsupported, and record the verdict with the page's hash in the lock.

    A page that fails is not written: its previous version stays, and its query fails, so nothing
    is built on it in this run.
    """
    found = await unsupported_claims(ctx, claims, framing)
    if found:
        raise Problem(f"{path}: {'; '.join(found[:5])}; the previous version stays")
    write_page(ctx, path, page, code=code)
    # the rules that write grounded pages read the backend and the grounding task's settings
    by = "code" if ctx.settings.backend.name == "offline" else f"code and {ctx.settings.grounding.get('model')}"
    ctx.note("grounding", {"passed": True, "by": by, "page": hash_bytes(page.encode())})
