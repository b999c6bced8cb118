"""Summaries: of each group of a source's facts, and of each source.

A group holds at most GROUP_FACTS facts of one section of its source, so one changed fact costs
one group's worth of tokens, whatever the length of the source.
"""
from __future__ import annotations

from typing import Any

from kbuild.engine import Context, Problem, QueryFailed, rule
from kbuild.text.slugs import slug, unique

from .cutoffs import same_meaning
from .facts import chunk_summary, chunks
from .failures import complete
from .guard import plain_text_failures
from .settings import model_rule
from .values import FactGroups, Group

GROUP_FACTS = 12  # facts per summary group and view section: the most one changed fact costs
INDEX_LINES = 150  # facts one source index lists; a longer source's index links a page per group


def group_pages(found: FactGroups) -> list[str] | None:
    """The name of each group's own index page (`Layout.source_part_index`), from its section
    and unique among them (a section's second group is SECTION-2), when the source has more
    facts than one index lists; else None."""
    if sum(len(g.slugs) for g in found.groups) <= INDEX_LINES:
        return None
    taken: set[str] = set()
    return [unique(slug(g.section), taken) for g in found.groups]


def summaries_or_fail(values: list[Any], where: str) -> list[str]:
    """The summaries that were made; none at all fails (with the first failure below, if any):
    asking a model to summarise nothing would publish what it makes of nothing."""
    kept = [v for v in values if isinstance(v, str)]
    if not kept:
        raise next((v for v in values if isinstance(v, QueryFailed)), None) or Problem(f"{where}: nothing to summarise")
    return kept


@rule(version=2, returns=FactGroups)
async def fact_groups(ctx: Context, project: str, source: str) -> FactGroups:
    """The source's facts in groups of at most GROUP_FACTS, one section of the source each:
    what a summary level or a view section reads."""
    doc = await ctx.query(chunks(project, source))
    groups: list[Group] = []
    for c in doc.chunks:
        heads = c.headings[1:] if c.headings[:1] == [doc.title] else c.headings
        section = heads[0] if heads else doc.title
        if not groups or groups[-1].section != section or len(groups[-1].slugs) >= GROUP_FACTS:
            groups.append(Group(section=section, slugs=[]))
        groups[-1].slugs.append(c.slug)
    return FactGroups(title=doc.title, groups=groups)


async def _summarise(ctx: Context, title: str, parts: list[Any], where: str) -> str:
    kept = summaries_or_fail(complete(ctx, parts), where)
    return kept[0] if len(kept) == 1 else await ctx.settings.backend.summarise_source(
        ctx, title, kept, check=lambda text: plain_text_failures(text, "\n".join(kept)))


@model_rule("source_summary", version=1, uses=(complete, summaries_or_fail, plain_text_failures, _summarise),
            cutoff=same_meaning)
async def group_summary(ctx: Context, project: str, source: str, group: int) -> str:
    found = await ctx.query(fact_groups(project, source))
    if group >= len(found.groups):
        raise Problem(f"{project}/{source} has no group {group} any more")
    slugs = found.groups[group].slugs
    parts = await ctx.query_all([chunk_summary(project, source, s) for s in slugs], return_failures=True)
    return await _summarise(ctx, found.title, parts, f"{project}/{source}")


@model_rule("source_summary", version=1, uses=(complete, summaries_or_fail, plain_text_failures, _summarise),
            cutoff=same_meaning)
async def source_summary(ctx: Context, project: str, source: str) -> str:
    found = await ctx.query(fact_groups(project, source))
    parts = await ctx.query_all([group_summary(project, source, n) for n in range(len(found.groups))],
                                return_failures=True)
    return await _summarise(ctx, found.title, parts, f"{project}/{source}")
