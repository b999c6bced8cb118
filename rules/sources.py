"""What a project's sources.yml says, and each source's copy in raw/.

Each reader reads the narrowest of these (an entry, the outline, the default views), so an edit
of sources.yml reaches only the pages it concerns.
"""
from __future__ import annotations

import json
from typing import Any

from kbuild.text.secrets import without_userinfo
from kbuild.convert import refusal
from kbuild.engine import Problem, hash_bytes, rule
from kbuild.store.localstate import LocalState
from kbuild.store import sources as sources_module
from kbuild.store.fetch import meta_yml
from kbuild.store.sources import DEFAULT_VIEWS, Listing, Source, SourcesError, parse, resolve_path
from kbuild.convert import text as text_conversion

from .settings import KnowledgeContext
from .values import Outline, RawCopy


@rule(version=1, uses=(sources_module,), settings=("store",), returns=Listing)
async def listing(ctx: KnowledgeContext, project: str) -> Listing:
    path = ctx.settings.store.sources_file(project)
    try:
        data = ctx.read(path)
    except FileNotFoundError:
        raise Problem(f"{path} is missing; run `kbuild add {project} PATH` to create it") from None
    try:
        return parse(data, path)
    except SourcesError as exc:
        raise Problem(str(exc)) from None


@rule(version=1, settings=("store",), returns=Source)
async def source_entry(ctx: KnowledgeContext, project: str, source: str) -> Source:
    listed = await ctx.query(listing(project))
    if source in listed.broken:
        raise Problem(listed.broken[source])
    found = next((entry for entry in listed.sources if entry.id == source), None)
    if found is None:
        raise Problem(f"{ctx.settings.store.sources_file(project)} lists no source {source!r}")
    return found


@rule
async def problem(ctx: KnowledgeContext, project: str, number: int) -> None:
    """A bad entry of sources.yml, failing on its own so the other sources still build."""
    raise Problem((await ctx.query(listing(project))).problems[number])


def fetch_problem(ctx: KnowledgeContext, project: str, source: str) -> str:
    """Why a url source has no copy: what the last download said (kbuild.store.fetch), read
    through the context like any input."""
    try:
        found: dict[str, Any] = json.loads(ctx.read(LocalState(ctx.state_dir).fetch_problems))
    except (FileNotFoundError, ValueError):
        found = {}
    return found.get(f"{project}/{source}", "has not been downloaded (built with --no-fetch?)")


@rule(version=4, uses=(meta_yml, fetch_problem, refusal, text_conversion), settings=("store",), returns=RawCopy)
async def raw(ctx: KnowledgeContext, project: str, source: str) -> RawCopy:
    store = ctx.settings.store
    entry = await ctx.query(source_entry(project, source))
    where = f"{project}/{source}"
    original = store.original(project, source, entry.ext)
    if entry.path is not None:
        try:
            data = ctx.read(resolve_path(ctx.root, entry.path))
        except SourcesError as exc:
            raise Problem(f"{where}: {exc}") from None
        except FileNotFoundError:
            raise Problem(f"{where}: {entry.path} does not exist; fix its path in sources.yml or remove it") from None
        except IsADirectoryError:
            raise Problem(f"{where}: {entry.path} is a folder; list the files in it one by one") from None
        refused = refusal(data, original)
        if refused is not None:  # said now, with no copy kept of what no page is ever built from
            raise Problem(f"{where} ({entry.origin}): {refused}")
        ctx.write(original, data)
        ctx.write(store.meta(project, source), meta_yml(entry, hash_bytes(data), len(data)))
    else:
        try:
            data = ctx.read(original)
        except FileNotFoundError:
            raise Problem(f"{where}: {without_userinfo(entry.url or '')} {fetch_problem(ctx, project, source)}") from None
    return RawCopy(path=original, hash=hash_bytes(data), bytes=len(data), ext=entry.ext, origin=entry.origin,
                   title=entry.title, kind=entry.kind)


@rule(version=1, settings=("store",))
async def source_pages(ctx: KnowledgeContext, project: str) -> dict[str, str]:
    """Each source's origin (its path or url) and its index page: what a source's links are
    resolved against. Only sources with such links read it, and other edits of sources.yml
    (a title, a view) do not change it."""
    listed = await ctx.query(listing(project))
    return {s.path or s.url or "": ctx.settings.store.source_index(project, s.id) for s in listed.sources}


@rule(version=1)
async def default_views(ctx: KnowledgeContext, project: str) -> list[str]:
    """The default views of a project's kind, so that what reads them does not read every
    edit of sources.yml."""
    return list(DEFAULT_VIEWS[(await ctx.query(listing(project))).kind])


@rule(version=2, returns=Outline)
async def project_outline(ctx: KnowledgeContext, project: str) -> Outline:
    """The project's title and source ids: what its abstract depends on, and not where each
    source lives (a moved file must not reach the model)."""
    listed = await ctx.query(listing(project))
    return Outline(title=listed.title or project, sources=listed.ids)
