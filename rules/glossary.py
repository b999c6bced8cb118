"""A project's glossary: the terms its sources define (kbuild.text.definitions), each with the
facts that define it, as kb/PROJECT/glossary.md for people, glossary.json for search and context
outside the build, and a typed value (Glossary) that views on request read.

Each fact's terms are a query of their own (`fact_terms`), cut off when they did not change: an
edit re-reads the changed fact's words, and the glossary is written again only when a term or
the sentence defining it changed.
"""
from __future__ import annotations

from kbuild.engine import QueryFailed, rule
from kbuild.retrieval import expansion
from kbuild.retrieval.expansion import Glossary, GlossaryTerm
from kbuild.text import definitions as definitions_module
from kbuild.text import injection, secrets
from kbuild.store.layout import link
from kbuild.text.definitions import definitions
from kbuild.text.injection import find_injections
from kbuild.text.secrets import redact

from .facts import chunk, chunks
from .pages import write_page
from .settings import KnowledgeContext
from .sources import listing, project_outline

KINDS = {"acronym": "stands for", "alias": "another name for", "meaning": "means"}


@rule(version=1, uses=(definitions_module, injection), returns=Glossary)
async def fact_terms(ctx: KnowledgeContext, project: str, source: str, slug: str) -> Glossary:
    """The terms one fact's words define. Never a source's instruction to a model."""
    text = (await ctx.query(chunk(project, source, slug))).text
    return Glossary(terms=[GlossaryTerm.of(d, f"{source}/{slug}") for d in definitions(text)
                           if not find_injections(d.sentence)])


def joined(found: list[Glossary]) -> Glossary:
    """Each term once, as its first definition of each kind says it, citing every fact that
    defines it so."""
    terms: dict[tuple[str, str, str], GlossaryTerm] = {}
    for glossary in found:
        for term in glossary.terms:
            key = (term.term.lower(), term.kind, term.means.lower())
            first = terms.get(key)
            terms[key] = term if first is None else first.model_copy(
                update={"cites": [*first.cites, *(c for c in term.cites if c not in first.cites)]})
    return Glossary(terms=list(terms.values()))


@rule(version=1, uses=(joined,), returns=Glossary)
async def source_terms(ctx: KnowledgeContext, project: str, source: str) -> Glossary:
    """The terms a source defines, its facts' in order; a fact that failed to read is left out."""
    slugs = [place.slug for place in (await ctx.query(chunks(project, source))).chunks]
    got = await ctx.query_all([fact_terms(project, source, s) for s in slugs], return_failures=True)
    return joined([g for g in got if not isinstance(g, QueryFailed)])


def glossary_line(term: GlossaryTerm, path: str, facts: list[str]) -> str:
    """A term's line on the glossary page: the term, what it is, the sentence that says so, its facts."""
    cites = " ".join(f"([{ref.split('/', 1)[1]}]({target}))" for ref, target in zip(term.cites, facts))
    return f"- **{term.term}** {KINDS[term.kind]} {term.means}: \"{redact(term.sentence)}\" {cites}"


@rule(version=1, uses=(joined, glossary_line, secrets, expansion), params={"kinds": KINDS},
      settings=("store",), returns=Glossary)
async def project_glossary(ctx: KnowledgeContext, project: str) -> Glossary:
    """kb/PROJECT/glossary.md and glossary.json: the terms of every source of the project."""
    store = ctx.settings.store
    outline = await ctx.query(project_outline(project))
    got = await ctx.query_all([source_terms(project, s) for s in outline.sources], return_failures=True)
    found = joined([g for g in got if not isinstance(g, QueryFailed)])
    title = (await ctx.query(listing(project))).title or project
    path = store.glossary(project)
    lines = [glossary_line(t, path, [link(path, store.fact(project, *ref.split("/", 1))) for ref in t.cites])
             for t in sorted(found.terms, key=lambda t: (t.term.lower(), t.kind, t.means.lower()))]
    write_page(ctx, path, f"# Glossary of {title}\n\nUp: [{project}](index.md)\n\nThe terms the sources define, each "
               "with the sentence that defines it and its facts. Search, `kbuild context` and views on request take "
               "a question's name of a term for its other names too.\n\n"
               + ("\n".join(lines) or "No source defines a term yet.") + "\n")
    ctx.write(store.glossary_data(project), found.file())
    return found
