"""Summaries: of each group of a source's facts, and of each source.

A group holds at most GROUP_FACTS facts of one section of its source, so one changed fact costs
one group's worth of tokens, whatever the length of the source.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from kbuild.engine import Problem, QueryFailed, rule
from kbuild.text.slugs import slug, unique

from .cutoffs import same_meaning
from .facts import chunk_summary, chunks
from .guard import PLAIN_TEXT, checked_plain_text, plain_reply_check
from .settings import KnowledgeContext, model_rule
from .values import FactGroups, Group, GroupPagePart, GroupPart, Part

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
async def fact_groups(ctx: KnowledgeContext, project: str, source: str) -> FactGroups:
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


@rule(version=1, uses=(group_pages,), parts=True)
async def group_places(ctx: KnowledgeContext, project: str, source: str) -> dict[str, Any]:
    """Each group of fact_groups as parts of its own: "group:N" (the source's title, the group's
    section and slugs) and, for a source with group index pages, "page:N" (GroupPagePart). A
    query of one group reads its parts alone, so an edit that regroups nothing leaves the other
    groups' queries as recorded, unread, where a whole read of fact_groups put every one of them
    and the facts they read in the edit's reach (12,000 queries at 2,000 facts)."""
    found = await ctx.query(fact_groups(project, source))
    value = {Part("group", n).name: GroupPart(title=found.title, section=g.section, slugs=g.slugs).model_dump()
             for n, g in enumerate(found.groups)}
    names = group_pages(found)
    if names is not None:
        place = {c.slug: c for c in (await ctx.query(chunks(project, source))).chunks}
        before: Counter[str] = Counter()  # the pages of each section so far
        for n, (g, name) in enumerate(zip(found.groups, names)):
            value[Part("page", n).name] = GroupPagePart(page=name, nth=before[g.section],
                                               places=[place[s] for s in g.slugs]).model_dump()
            before[g.section] += 1
    return value


async def group_of(ctx: KnowledgeContext, project: str, source: str, group: int) -> GroupPart:
    """One group of a source's facts: one part of group_places."""
    found = await ctx.query_part(group_places(project, source), Part("group", group).name)
    if found is None:
        raise Problem(f"{project}/{source} has no group {group} any more")
    return GroupPart.model_validate(found)


def heading_of(title: str, section: str) -> str:
    """How a group's pages name it: "Source › Section", or the source's title alone."""
    return title if section == title else f"{title} › {section}"


async def _summarise(ctx: KnowledgeContext, title: str, parts: list[Any], where: str) -> str:
    kept = summaries_or_fail(parts, where)
    if len(kept) == 1:
        return kept[0]
    sources = "\n".join(kept)
    written = await ctx.settings.backend.summarise_source(ctx, title, kept, check=plain_reply_check(sources))
    return checked_plain_text(written, sources, f"{where}: the summary")


@model_rule("source_summary", version=1, uses=(summaries_or_fail, *PLAIN_TEXT, _summarise, group_of),
            cutoff=same_meaning)
async def group_summary(ctx: KnowledgeContext, project: str, source: str, group: int) -> str:
    found = await group_of(ctx, project, source, group)
    parts = await ctx.query_all([chunk_summary(project, source, s) for s in found.slugs], return_failures=True)
    return await _summarise(ctx, found.title, parts, f"{project}/{source}")


@model_rule("source_summary", version=1, uses=(summaries_or_fail, *PLAIN_TEXT, _summarise),
            cutoff=same_meaning)
async def source_summary(ctx: KnowledgeContext, project: str, source: str) -> str:
    found = await ctx.query(fact_groups(project, source))
    parts = await ctx.query_all([group_summary(project, source, n) for n in range(len(found.groups))],
                                return_failures=True)
    return await _summarise(ctx, found.title, parts, f"{project}/{source}")
