"""The generated index files: each source's, the artifacts', each project's (with its abstract), the root's.

An index line is a page's one-line summary; a source of more facts than INDEX_LINES gets another
level instead of a longer index: a page per group of its facts (`group_index`), each made again
only when one of its facts changes.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from kbuild.engine import Problem, QueryFailed, rule
from kbuild.store.sources import DEFAULT_VIEWS
from kbuild.store.layout import link
from kbuild.store.pages import pages_phrase
from kbuild.text.markdown import shortened

from .cutoffs import same_meaning
from .facts import chunk_summary, chunks, fact
from .failures import built, not_built
from .guard import PLAIN_TEXT, checked_plain_text, plain_reply_check
from .pages import write_page
from .settings import KnowledgeContext, model_rule
from .sources import listing, problem, project_outline, raw
from .glossary import project_glossary
from .concepts import concept_index
from .search_index import search_index
from .search_vectors import search_vectors
from .summaries import fact_groups, group_of, group_pages, group_places, heading_of, source_summary
from .values import GroupPagePart, Made, Part, Place, ProjectIndex, SourceIndex
from .specs import spec_page
from .views import view_page


async def lines_of(ctx: KnowledgeContext, project: str, source: str, places: list[Place]) -> tuple[list[str], int]:
    """A source index's line for each of these facts (where it stands, each heading it holds and
    its summary), and how many of them were built."""
    slugs = [c.slug for c in places]
    got = await ctx.query_all([*(fact(project, source, s) for s in slugs),
                               *(chunk_summary(project, source, s) for s in slugs)], return_failures=True)
    lines = []
    for c, f, s in zip(places, got[:len(slugs)], got[len(slugs):]):
        if isinstance(f, QueryFailed) or isinstance(s, QueryFailed):
            lines.append(not_built(c.slug))
            continue
        where = f"lines {c.start}-{c.end}" + pages_phrase(c.pages).replace(",", ";")
        holds = f" {'; '.join(c.covers)}:" if len(c.covers) > 1 else ""  # each heading it holds, for search
        lines.append(f"- [{c.slug}]({c.slug}.md) ({where}):{holds} {s}")
    return lines, built(got[:len(slugs)])


@rule(version=4, uses=(not_built, built, pages_phrase, lines_of, group_of, heading_of), settings=("store",))
async def group_index(ctx: KnowledgeContext, project: str, source: str, group: int) -> int:
    """The index page of one group of the facts of a source too long for one index (group_pages),
    and how many of its facts were built: an edit of one fact rewrites one page of GROUP_FACTS
    lines, and the source's index reads a value per group, not two per fact."""
    found = await group_of(ctx, project, source, group)
    page = await ctx.query_part(group_places(project, source), Part("page", group).name)
    if page is None:
        raise Problem(f"{project}/{source} has no group page {group} any more")
    shown = GroupPagePart.model_validate(page)
    lines, made = await lines_of(ctx, project, source, shown.places)
    title = heading_of(found.title, found.section) + (f" ({shown.nth + 1})" if shown.nth else "")
    write_page(ctx, ctx.settings.store.source_part_index(project, source, shown.page),
               f"# {title}\n\nBack to [the source's index](index.md).\n\n" + "\n".join(lines) + "\n")
    return made


@rule(version=4, uses=(not_built, built, pages_phrase, lines_of, group_pages), settings=("store", "label"),
      returns=SourceIndex)
async def source_index(ctx: KnowledgeContext, project: str, source: str) -> SourceIndex:
    """The source's index page: its summary, then a line per fact or, for a source with more
    facts than INDEX_LINES, a line per section linking to its groups' pages (group_index)."""
    store = ctx.settings.store
    doc = await ctx.query(chunks(project, source))
    found = await ctx.query(fact_groups(project, source))
    path, names = store.source_index(project, source), group_pages(found)
    if names is None:  # one page: it reads its facts itself, and has no query per group in the lock
        entries, made = await lines_of(ctx, project, source, doc.chunks)
        listed_facts = len(doc.chunks)
        (summary,) = await ctx.query_all([source_summary(project, source)], return_failures=True)
    else:
        got = await ctx.query_all([*(group_index(project, source, n) for n in range(len(names))),
                                   source_summary(project, source)], return_failures=True)
        by_section: dict[str, list[str]] = {}  # a section -> a link to each of its groups' pages
        for name, built_facts, planned in zip(names, got, found.groups):
            facts, page = len(planned.slugs), link(path, store.source_part_index(project, source, name))
            by_section.setdefault(planned.section, []).append(
                f"{facts} facts not built; run `kbuild` to see why" if isinstance(built_facts, QueryFailed)
                else f"[{facts} {'fact' if facts == 1 else 'facts'}]({page})"
                + (f" ({facts - built_facts} not built)" if built_facts < facts else ""))
        entries = [f"- {section}: {', '.join(pages)}" for section, pages in by_section.items()]
        made, summary = sum(n for n in got[:-1] if not isinstance(n, QueryFailed)), got[-1]
        listed_facts = sum(len(g.slugs) for g in found.groups)
    if isinstance(summary, QueryFailed):
        summary = "(no summary: it failed to build; run `kbuild` to see why)"
    links = ["- [text.md](text.md): the whole source as text, no model involved"]
    if doc.pages:
        links.append("- [pages/](pages/index.md): each page as an image")
    if doc.figures:
        links.append("- [figures/](figures/index.md): tables and figures cut from the pages")
    write_page(ctx, path,
               f"# {doc.title}\n\nUp: [{project}](../../index.md) · [all sources](../index.md)\n\n"
               f"{summary}\n\n_Summaries: {ctx.settings.label}._\n\n" + "\n".join(links)
               + "\n\n## Facts, in source order\n\n" + "\n".join(entries) + "\n")
    return SourceIndex(title=doc.title, summary=summary, facts=made, failed=listed_facts - made)


@model_rule("abstract", version=1, uses=(*PLAIN_TEXT,), cutoff=same_meaning)
async def abstract(ctx: KnowledgeContext, project: str) -> str:
    outline = await ctx.query(project_outline(project))
    indexes = await ctx.query_all([source_index(project, s) for s in outline.sources], return_failures=True)
    summaries = [f"{i.title}: {i.summary}" for i in indexes if not isinstance(i, QueryFailed)]
    if not outline.sources:
        return "No sources yet."
    if not summaries:
        raise Problem(f"{project}: no source of it has a summary yet")
    sources = "\n".join(summaries)
    written = await ctx.settings.backend.abstract(ctx, outline.title, summaries, check=plain_reply_check(sources))
    return checked_plain_text(written, sources, f"{project}: the abstract")


def counted(values: list[Any], what: str) -> str:
    """How many were built, and how many failed to."""
    failed = len(values) - built(values)
    return f"{built(values)} {what}" + (f", {failed} not built; run `kbuild` to see why" if failed else "")


@rule(version=2, uses=(not_built, built, counted, shortened), settings=("store",), returns=Made)
async def artifacts(ctx: KnowledgeContext, project: str) -> Made:
    store = ctx.settings.store
    listed = await ctx.query(listing(project))
    names = [*DEFAULT_VIEWS[listed.kind], *(v.name for v in listed.views)]
    made = await ctx.query_all([*(view_page(project, v) for v in names),
                                *(spec_page(project, s.name) for s in listed.specs)], return_failures=True)
    views, specs = made[:len(names)], made[len(names):]
    view_lines = [f"- [{n}]({n}.md): {shortened(v.summary, 160)}" if not isinstance(v, QueryFailed)
                  else not_built(n) for n, v in zip(names, views)]
    spec_lines = [f"- [{s.name}]({s.name}.md): {v.requirements} requirements, from the "
                  f"[{v.view} view](../views/{v.view}.md)" if not isinstance(v, QueryFailed)
                  else not_built(s.name) for s, v in zip(listed.specs, specs)]
    write_page(ctx, store.views_index(project), "# Views\n\nUp: [artifacts](../index.md)\n\nEach view with its "
              "first statement. `kbuild view add` asks for another.\n\n" + "\n".join(view_lines) + "\n")
    write_page(ctx, store.specs_index(project), "# Specs\n\nUp: [artifacts](../index.md)\n\nEach spec, one line. "
              "`kbuild spec add` asks for another.\n\n" + ("\n".join(spec_lines) or "No specs yet.") + "\n")
    write_page(ctx, store.artifacts_index(project), f"# Artifacts of {listed.title or project}\n\nUp: [{project}](../index.md)"
              "\n\nViews and specs written from the facts.\n\n"
              f"- [views/](views/index.md): {counted(views, 'views')}\n- [specs/](specs/index.md): {counted(specs, 'specs')}\n")
    return Made(views=built(views), specs=built(specs), failed=len(made) - built(made))


@rule(version=3, uses=(not_built,), settings=("store", "label"), returns=ProjectIndex)
async def project_index(ctx: KnowledgeContext, project: str) -> ProjectIndex:
    """The project's page, its raw and facts indexes: a line per source listed, naming each that
    failed to build (and each entry of sources.yml that could not be read) among the rest."""
    store, label = ctx.settings.store, ctx.settings.label
    listed = await ctx.query(listing(project))
    await ctx.query_all([problem(project, n) for n in range(len(listed.problems))], return_failures=True)
    ids = listed.ids
    got = await ctx.query_all([*(raw(project, s) for s in ids), *(source_index(project, s) for s in ids),
                               abstract(project), artifacts(project)], return_failures=True)
    raws, indexes, (summary, made) = got[:len(ids)], got[len(ids):-2], got[-2:]
    # kb/PROJECT/search-index/, for search: the words' index, and the vectors when semantic ranking is on
    # ... and the glossary, which search and context read to take a reader's words for the sources'
    # ... and the concept pages, what each source says of each thing they define or share
    _, _, terms, concepts = await ctx.query_all([search_index(project), search_vectors(project), project_glossary(project),
                                                 concept_index(project)], return_failures=True)
    if isinstance(summary, QueryFailed):
        summary = "(no abstract: it failed to build; run `kbuild` to see why)"
    title = listed.title or project
    raw_lines, fact_lines, source_lines, failed = [], [], [], []
    for sid, r, i in zip(ids, raws, indexes):
        raw_lines.append(not_built(sid) if isinstance(r, QueryFailed) else
                         f"- [{sid}]({sid}/{Path(r.path).name}): from {r.origin}, {r.bytes} bytes "
                         f"([meta.yml]({sid}/meta.yml))")
        if isinstance(i, QueryFailed):
            failed.append(sid)
            fact_lines.append(not_built(sid))
            source_lines.append(not_built(sid))
            continue
        partly = (f"; {i.failed} {'fact' if i.failed == 1 else 'facts'} not built; run `kbuild` to see why"
                  if i.failed else "")
        fact_lines.append(f"- [{sid}]({sid}/index.md): {i.title}, {i.facts} facts{partly}")
        source_lines.append(f"- [{i.title}](facts/{sid}/index.md) ({sid}{partly}): {i.summary}")
    source_lines += [f"- an entry not read: {why}" for why in listed.problems]
    kind = "research project (sources arrive as found; no specs)" if listed.kind == "research" else "project"
    artifacts_line = (f"- [artifacts/](artifacts/index.md): {made.views} views and {made.specs} specs written from the facts"
                      + (f"; {made.failed} not built; run `kbuild` to see why" if made.failed else "") + "\n"
                      if isinstance(made, Made) else not_built("artifacts/") + "\n")
    write_page(ctx, store.project_index(project), (
        f"# {title}\n\nUp: [all projects](../index.md)\n\n{summary}\n\n_A {kind}. Summaries: {label}._\n\n"
        f"## Sources\n\n" + ("\n".join(source_lines) or "No sources yet: `kbuild add " + project + " PATH`.")
        + "\n\n## Folders\n\n"
        "- [raw/](raw/index.md): each source exactly as fetched, never edited\n"
        "- [facts/](facts/index.md): each source as text, cut into facts, each with its summary\n"
        + artifacts_line
        + (not_built("glossary.md") if isinstance(terms, QueryFailed) else
           f"- [glossary.md](glossary.md): {len(terms.terms)} {'term' if len(terms.terms) == 1 else 'terms'} the sources define\n")
        + (not_built("concepts/") if isinstance(concepts, QueryFailed) else
           f"- [concepts/](concepts/index.md): {concepts} {'concept' if concepts == 1 else 'concepts'}, "
           "what each source says about each\n")
        + "- [sources.yml](sources.yml): the list of sources, written by people\n"))
    ctx.write(store.raw_index(project), f"# Raw sources of {title}\n\nUp: [{project}](../index.md)\n\nEach source exactly "
              "as fetched, never edited, with where it came from.\n\n" + "\n".join(raw_lines) + "\n")
    write_page(ctx, store.facts_index(project), f"# Facts of {title}\n\nUp: [{project}](../index.md)\n\nOne folder per source: "
              "its text, its facts and their summaries.\n\n" + "\n".join(fact_lines) + "\n")
    return ProjectIndex(title=title, abstract=summary, kind=listed.kind, sources=len(ids), failed=failed)


def sources_phrase(found: ProjectIndex) -> str:
    """How the root index counts a project's sources, naming those that failed to build."""
    count = f"{found.sources} {'source' if found.sources == 1 else 'sources'}"
    if not found.failed:
        return count
    named = ", ".join(found.failed[:5]) + (f" and {len(found.failed) - 5} more" if len(found.failed) > 5 else "")
    return f"{count}; not built: {named}; run `kbuild` to see why"


@rule(version=2, uses=(not_built, sources_phrase), settings=("store",))
async def root_index(ctx: KnowledgeContext, *projects: str) -> int:
    indexes = await ctx.query_all([project_index(p) for p in projects], return_failures=True)
    lines = [f"- [{i.title}]({p}/index.md) ({p}, {sources_phrase(i)}): {i.abstract}"
             if not isinstance(i, QueryFailed) else not_built(p) for p, i in zip(projects, indexes)]
    body = "\n".join(lines) if lines else "No projects yet: `kbuild add PROJECT PATH_OR_URL` starts one."
    write_page(ctx, ctx.settings.store.index(), f"# Knowledge base\n\nOne line per project.\n\n{body}\n")
    return len(projects)
