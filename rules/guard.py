"""The guardrails of what a model writes, shared by every rule that writes it: clean by code what
code can clean, refuse what it cannot, ground the rest, and only then write.

A model copies its source's links and markup, and a document may tell it to add its own. Both
are cleaned by the same code that cleans a source (kbuild.convert.markdown): the words stay, the
markup goes, and the page is built. What cleaning cannot make safe, because the words are the
harm (an address, code or an instruction its sources do not hold, a number or name they lack),
fails the page, whose previous version stays.
"""
from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from kbuild.checks.grounding import Doubt, triage, unsupported
from kbuild.text.injection import find_injections
from kbuild.checks.links import link_targets
from kbuild.convert.markdown import clean_markdown
from kbuild.engine import Problem, hash_bytes
from kbuild.text.markdown import without_links
from kbuild.text.inline import inline_words, plain_words
from kbuild.text.markdown import TAG_LIKE, shortened
from kbuild.convert import html as html_conversion
from kbuild.convert import markdown as markdown_conversion
from kbuild.text import injection
from kbuild.text import inline
from kbuild.text import markdown

from .pages import write_page
from .settings import KnowledgeContext


CODE_SPAN = re.compile(r"(`+)(?=\S)(.*?)(?<=\S)\1")  # `f[T](x)` and `x < y` are code, shown as code
URL = re.compile(r"\b(?:[a-z][a-z0-9+.-]*://|www\.)[^\s)\]>\"'`]+", re.I)
PLAIN_CHARS = 1200  # a summary or an abstract: a few sentences
# The code that cleans a model's text: part of the fingerprint of each rule that uses it
MARKDOWN_CLEANING = (markdown_conversion, html_conversion, inline, markdown)


def plain_text(text: str, limit: int = PLAIN_CHARS) -> str:
    """A model's text for an index line or the head of a page, made plain by code: HTML as its
    Markdown meaning (a tag it cannot render, `<script>`, quoted as code), links and images as
    their words, entities decoded, one line of at most `limit` characters (cut after a sentence,
    else a word). Markup a model copies from its source, or adds, costs the page nothing: its
    words are kept and what is left is checked (plain_text_failures)."""
    words = plain_words(clean_markdown(text)) or inline_words(text)  # a text that is a link's definition: its words
    return shortened(words, limit)


def plain_text_failures(text: str, sources: str) -> list[str]:
    """What code cannot clean in a model's plain text (as plain_text made it), measured against
    the text it was written from: a placeholder ("...", one word) where its sources say more;
    an address, quoted code or an instruction to a model that its sources do not hold (a
    document may tell a model to write them)."""
    failures = []
    words = re.findall(r"[^\W\d_]{2,}", text)
    if len(words) < min(2, len(re.findall(r"[^\W\d_]{2,}", sources))):
        failures.append("says nothing (a placeholder or a single word); write what its sources state")
    failures += foreign_names(text, sources)
    # a summary or a statement speaks in kbuild's voice: an instruction to a model is never one,
    # even quoted from its sources (foreign_names already refused those they do not hold)
    held = set(find_injections(sources))
    failures += [f"holds {what}, which a summary or a statement never repeats" for what in find_injections(text)
                 if what in held]
    return failures


def plain_reply_check(sources: str) -> Callable[[str], list[str]]:
    """The check a backend runs on a reply for a plain text before it takes it (a reply that
    fails is asked again, with the failures)."""
    return lambda text: plain_text_failures(plain_text(text), sources)


def checked_plain_text(text: str, sources: str, where: str) -> str:
    """A reply made plain (plain_text), or a Problem naming what code could not clean."""
    plain = plain_text(text)
    failures = plain_text_failures(plain, sources)
    if failures:
        raise Problem(f"{where}: the text {'; '.join(failures)}")
    return plain


def foreign_names(text: str, sources: str) -> list[str]:
    """The addresses, quoted markup and instructions to a model in `text` that `sources` lack:
    what no cleaning can make safe, since the words themselves are the harm. (Markup a model
    adds is quoted as code by the cleaning: `<script>` stays only where its sources quote it.)"""
    failures = [f"names {url}, which its sources do not" for url in dict.fromkeys(URL.findall(text))
                if url.rstrip(".,;:*_") not in sources]
    flat = " ".join(sources.split())
    failures += [f"quotes `{code}`, which its sources do not" for _, code in CODE_SPAN.findall(text)
                 if TAG_LIKE.search(code) and " ".join(code.split()) not in flat]
    held = set(find_injections(sources))
    failures += [f"holds {what}, which its sources do not" for what in find_injections(text) if what not in held]
    return failures


def statement_failures(written: list[dict[str, Any]], said: dict[str, str], scope: str) -> list[str]:
    """The code checks of statements citing facts ({"text", "cites"}; `said`: what each fact
    they may cite says, `scope` names those facts), on the statements made plain (a link or
    markup a model copied costs nothing but its marks): each statement cites a fact of `scope`,
    and says no number, requirement keyword, code name or quoted term its cited sentences lack."""
    failures = []
    for st in [{**st, "text": plain_text(st["text"])} for st in written]:
        if not st["cites"] or not set(st["cites"]) <= set(said):
            failures.append(f"\"{st['text'][:60]}\" cites no fact of {scope}")
            continue
        missing = unsupported(st["text"], [said[r] for r in st["cites"]])
        if missing:
            failures.append(f"\"{st['text'][:60]}\" says {', '.join(missing)}, which its facts do not")
        failures += [f"\"{st['text'][:60]}\" {problem}"
                     for problem in plain_text_failures(st["text"], " ".join(said[r] for r in st["cites"]))]
    return failures


# What decides a plain text: in the `uses` of each rule that writes one
PLAIN_TEXT = (plain_text, plain_text_failures, plain_reply_check, checked_plain_text, foreign_names, *MARKDOWN_CLEANING,
              injection)


def model_markdown(text: str, page: Path, store_root: Path, repeats: Collection[str] = ()) -> str:
    """A model's Markdown for a page at `page`, made clean by code: HTML as its Markdown meaning
    (a tag it cannot render quoted as code), links to anchors or that run code as their words,
    and so are links that lead to no file of the store or outside it (but those of its source's
    words, `repeats`, and the web links they quote)."""
    cleaned = clean_markdown(text.replace("\r\n", "\n"))
    dangling = {target for target, resolved in link_targets(cleaned, page, store_root, repeats=repeats)
                if resolved is None or not os.path.exists(resolved)}
    return without_links(cleaned, dangling) if dangling else cleaned


async def unsupported_claims(ctx: KnowledgeContext, claims: list[tuple[str, list[str]]], framing: str = "") -> list[str]:
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


async def write_grounded(ctx: KnowledgeContext, path: str, page: str, claims: list[tuple[str, list[str]]],
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
