"""Concept pages: for each thing the sources of a project speak of, what each of them says about
it, in its own sentences, each linked to its fact; kb/PROJECT/concepts/index.md lists them, one
line each with what the thing is.

A project's concepts are the terms its glossary gives (rules/glossary.py) and the phrases facts
of at least SHARED_SOURCES sources share (kbuild.text.concepts), the names of one thing joined
(an acronym and its expansion, a plural, a hyphenation). Each step reads as little as it can:

- `fact_phrases`: the phrases of one fact, cut off when they did not change;
- `project_concepts`: which concepts the project has, one part per concept and one of all
  their names, so a concept's page reads its own entry only;
- `fact_concepts`: which concepts one fact mentions and with which sentences, a part each;
  the fact is the project's own or one of a project that `concepts: across:` in sources.yml
  names (`concept_origins`), whose facts are read for this project's concepts, never picked
  concepts from;
- `concept_citations`: which facts mention each concept, a part each;
- `concept_disagreements`: the project's disagreements between two facts a concept's page
  cites, a part each, so a verdict that changes re-runs only the pages that show it;
- `concept_synthesis`: what those sentences say together, in a model's words (offline: nothing),
  each sentence citing its facts and checked against them as a view on request is;
- `concept_page`: one page, reading its entry, its facts' lists, those facts' sentences about
  it, that their pages built (`fact_built`), its disagreements and its synthesis alone. An edit
  rebuilds the pages whose sentences it changed, in this project or another; a removed source's
  (or across entry's) facts are cited by no part any more, and their statements leave the pages.

Disagreements are looked for within the project only: a statement of another project is quoted,
never compared.
"""
from __future__ import annotations

import functools
from typing import Any

from kbuild.checks import grounding
from kbuild.engine import Problem, QueryFailed, rule
from kbuild.retrieval.expansion import Glossary, GlossaryTerm
from kbuild.store.layout import link
from kbuild.text import concepts as concepts_text
from kbuild.text import secrets, slugs
from kbuild.text.concepts import Concept, Names, closed, mentions, phrases
from kbuild.text.markdown import shortened
from kbuild.text.prose import prose_sentences
from kbuild.text.secrets import redact
from kbuild.text.slugs import slug as slug_of, unique

from .contradictions import Contradictions, disagreement_lines, project_disagreements
from .facts import chunk, chunks, fact_built
from .failures import built
from .glossary import KINDS, project_glossary
from .guard import PLAIN_TEXT, plain_text, statement_failures, unsupported_claims
from .pages import write_page
from .sources import listing, project_outline
from .settings import KnowledgeContext, model_rule
from .values import NAMES, Part, Statement, Value

SHARED_SOURCES = 2  # a phrase not in the glossary is a concept when facts of this many sources say it
SHARED_FACTS = 3  # ... and this many facts: two mentions in passing make no concept
SYNTHESIS_FACTS = 24  # the facts a synthesis is written from, taken in turns across their sources


class FactPhrases(Value):
    """The phrases one fact's sentences may share with others: key -> as the fact writes it."""

    phrases: dict[str, str]


class ConceptEntry(Value):
    """A concept as the project has it: its name, every name it goes by, and the glossary's
    definition of it when a source defines it."""

    slug: str
    name: str
    names: list[str]
    defined: str | None = None  # "MFA stands for Multi-Factor Authentication"
    sentence: str | None = None  # the sentence that defines it
    defined_in: str | None = None  # its fact, "<source>/<slug>"


class SaidOf(Value):
    """What one fact says of one concept: its source's title and its sentences that mention it."""

    title: str
    sentences: list[str]


class ConceptOrigins(Value):
    """The projects whose facts a project's concept pages quote: its own first, then those
    `concepts: across:` names, in its order; `missing`, those it names that have no sources.yml."""

    projects: list[str]
    missing: list[str] = []


class Synthesis(Value):
    """What the sources together say of a concept, in a model's words (`by` names who wrote
    them), each sentence citing the facts it draws on; none offline."""

    statements: list[Statement]
    by: str = ""


class ConceptPage(Value):
    """What the concepts' index shows of a concept page."""

    name: str
    line: str
    statements: int
    sources: int


def _display(term: GlossaryTerm) -> str:
    return term.term if term.names is None else f"{term.means} ({term.term})"


async def fact_refs(ctx: KnowledgeContext, project: str) -> list[tuple[str, str]]:
    """(source, slug) of every fact of the project, in source order; a source that failed to
    cut has none."""
    outline = await ctx.query(project_outline(project))
    cut = await ctx.query_all([chunks(project, s) for s in outline.sources], return_failures=True)
    return [(s, place.slug) for s, c in zip(outline.sources, cut) if not isinstance(c, QueryFailed) for place in c.chunks]


def place(project: str, ref: str) -> tuple[str, str, str]:
    """(project, source, fact) of a fact a concept page of `project` cites: "source/fact" is one
    of its own (as `kbuild check` names facts), "other/source/fact" one of another project."""
    parts = ref.split("/")
    if len(parts) == 2:
        return project, parts[0], parts[1]
    origin, source, slug = parts
    return origin, source, slug


def cited_as(project: str, origin: str, source: str, slug: str) -> str:
    """The ref `place` reads back: the project named only when it is another."""
    return f"{source}/{slug}" if origin == project else f"{origin}/{source}/{slug}"


@rule(version=1, settings=("store",), returns=ConceptOrigins)
async def concept_origins(ctx: KnowledgeContext, project: str) -> ConceptOrigins:
    """Whose facts the concept pages quote. A project named that is not there is left out (its
    own query says so), so that the pages still build."""
    across = [p for p in (await ctx.query(listing(project))).concepts.across if p != project]
    there = [ctx.exists(ctx.settings.store.sources_file(p)) for p in across]
    return ConceptOrigins(projects=[project, *(p for p, t in zip(across, there) if t)],
                          missing=[p for p, t in zip(across, there) if not t])


@rule(version=1, settings=("store",))
async def missing_origin(ctx: KnowledgeContext, project: str, other: str) -> None:
    """A project `concepts: across:` names that has no sources.yml, failing on its own."""
    store = ctx.settings.store
    raise Problem(f"{store.sources_file(project)}: concepts: across names project {other!r}, which has no "
                  f"{store.sources_file(other)}; take it out of `across` or add the project with `kbuild add {other} PATH`")


@rule(version=1, uses=(concepts_text, prose_sentences), returns=FactPhrases)
async def fact_phrases(ctx: KnowledgeContext, project: str, source: str, slug: str) -> FactPhrases:
    found: dict[str, str] = {}
    for sentence in prose_sentences((await ctx.query(chunk(project, source, slug))).text):
        for key, written in phrases(sentence).items():
            found.setdefault(key, written)
    return FactPhrases(phrases=found)


def chosen(glossary: Glossary, found: list[tuple[str, FactPhrases]]) -> list[ConceptEntry]:
    """The project's concepts: each glossary term (its names joined), then each phrase facts of
    SHARED_SOURCES sources say that no glossary name and no longer shared phrase holds wholly,
    in the order of their names; slugs unique."""
    names = Names()
    for term in glossary.terms:
        names.join(*(term.names or (term.term,)))
    places: dict[str, set[str]] = {}
    forms: dict[str, list[str]] = {}
    for ref, said in found:
        for key, form in said.phrases.items():
            places.setdefault(key, set()).add(ref)
            forms.setdefault(key, []).append(form)
    # a phrase as a sentence's middle writes it: "Session tokens" opening a sentence is "session tokens"
    written = {k: next((f for f in fs if not f[0].isupper() or not f[1:].islower()), fs[0]) for k, fs in forms.items()}
    shared = {k: frozenset(p) for k, p in places.items()
              if len(p) >= SHARED_FACTS and len({r.split("/", 1)[0] for r in p}) >= SHARED_SOURCES}
    groups: dict[str, dict[str, Any]] = {}  # a concept's key (Names.of) -> its entry's fields
    for term in glossary.terms:
        group = groups.setdefault(names.of(term.term), {"name": _display(term), "names": [], "term": term})
        group["names"] += [n for n in (term.names or (term.term,)) if n not in group["names"]]
    for key in sorted(closed(shared, written)):
        group = groups.setdefault(names.of(written[key]), {"name": written[key], "names": [], "term": None})
        if written[key] not in group["names"]:
            group["names"].append(written[key])
    taken: set[str] = set()
    entries = []
    for group in sorted(groups.values(), key=lambda g: (g["name"].lower(), g["name"])):
        term: GlossaryTerm | None = group["term"]
        entries.append(ConceptEntry(
            slug=unique(slug_of(group["name"]), taken), name=group["name"], names=group["names"],
            defined=f"**{term.term}** {KINDS[term.kind]} {term.means}" if term else None,
            sentence=redact(term.sentence) if term else None, defined_in=term.cites[0] if term else None))
    return entries


@rule(version=1, uses=(fact_refs, chosen, _display, concepts_text, slugs),
      params={"shared_sources": SHARED_SOURCES, "shared_facts": SHARED_FACTS}, parts=True)
async def project_concepts(ctx: KnowledgeContext, project: str) -> dict[str, Any]:
    """The project's concepts: "names" (each concept's names, by slug), which every fact's
    mentions read, and "concept:SLUG", which its page alone reads."""
    (glossary,) = await ctx.query_all([project_glossary(project)], return_failures=True)
    refs = await fact_refs(ctx, project)
    got = await ctx.query_all([fact_phrases(project, s, f) for s, f in refs], return_failures=True)
    entries = chosen(Glossary(terms=[]) if isinstance(glossary, QueryFailed) else glossary,
                     [(f"{s}/{f}", p) for (s, f), p in zip(refs, got) if not isinstance(p, QueryFailed)])
    return {NAMES.name: {e.slug: e.names for e in entries}, **{Part("concept", e.slug).name: e.model_dump() for e in entries}}


@functools.lru_cache(maxsize=4096)
def _concept(names: tuple[str, ...]) -> Concept:
    return Concept.named(names)  # compiled once per build for all the facts that look for it


@rule(version=2, uses=(concepts_text, prose_sentences, secrets), parts=True)
async def fact_concepts(ctx: KnowledgeContext, project: str, origin: str, source: str, slug: str) -> dict[str, Any]:
    """Which of `project`'s concepts one fact of `origin` (the project, or one its concepts'
    `across` names) mentions, each ("concept:SLUG") with the fact's sentences that do, secrets
    redacted: what a concept page says of this fact."""
    names: dict[str, list[str]] = await ctx.query_part(project_concepts(project), NAMES.name) or {}
    found = await ctx.query(chunk(origin, source, slug))
    sentences = prose_sentences(found.text)
    said = mentions(sentences, {c: _concept(tuple(n)) for c, n in names.items()})
    return {Part("concept", c).name: SaidOf(title=found.title, sentences=[redact(sentences[i]) for i in at]).model_dump()
            for c, at in said.items()}


@rule(version=2, uses=(fact_refs, cited_as), parts=True)
async def concept_citations(ctx: KnowledgeContext, project: str) -> dict[str, Any]:
    """The facts that mention each concept ("concept:SLUG"), the project's own in source order,
    then those of each project its `across` names."""
    origins = (await ctx.query(concept_origins(project))).projects
    refs = [(origin, s, f) for origin in origins for s, f in await fact_refs(ctx, origin)]
    got = await ctx.query_all([fact_concepts(project, *ref) for ref in refs], return_failures=True)
    cites: dict[str, list[str]] = {}
    for ref, said in zip(refs, got):
        if not isinstance(said, QueryFailed):
            for part in said:
                cites.setdefault(part, []).append(cited_as(project, *ref))
    return cites


@rule(version=1, parts=True)
async def concept_disagreements(ctx: KnowledgeContext, project: str) -> dict[str, Any]:
    """The project's disagreements by concept ("concept:SLUG"): those between two facts that
    concept's page cites. A verdict that changes re-runs this cheap query and then only the pages
    whose part changed, not every concept page of the project."""
    found = await ctx.query(project_disagreements(project))
    cites: dict[str, list[str]] = await ctx.query(concept_citations(project))
    parts: dict[str, Any] = {}
    for part, refs in cites.items():
        held = set(refs)
        pairs = [p for p in found.pairs if {p.first.fact, p.second.fact} <= held]
        if pairs:
            parts[part] = Contradictions(pairs=pairs).model_dump()
    return parts


def page_text(project: str, entry: ConceptEntry, said: list[tuple[str, SaidOf]], links: dict[str, str | None],
              disagreements: list[str] | None = None, synthesis: Synthesis | None = None) -> str:
    """A concept's page: its name, the sentence that defines it (with its fact), then what each
    source says of it, a section per source in the order `said` has them (the defining one
    first; another project's sources last, named with it), each sentence once with every fact of
    the source that says it; `links` gives each fact's link, None for a fact whose page did not
    build; `disagreements`, the lines of the disagreements between its facts
    (rules/contradictions.py), each side quoted and cited, go before what each source says,
    never resolved by dropping one; `synthesis`, what they say together,
    goes first, "In short", each sentence with its facts' links."""
    def cited(ref: str) -> str:
        target = links[ref]
        name = ref.rsplit("/", 1)[1]
        return f"([{name}]({target}))" if target else f"({name}: not built; run `kbuild` to see why)"

    head = [f"# {entry.name}\n", f"Up: [concepts](index.md) · [{project}](../index.md)\n"]
    if entry.defined and entry.defined_in:
        head.append(f"{entry.defined}: \"{entry.sentence}\" {cited(entry.defined_in)}\n")
    others = [n for n in entry.names if n not in entry.name]
    if others:
        head.append("Also written: " + ", ".join(others) + ".\n")
    if synthesis and synthesis.statements:
        head += ["## In short\n", f"_{synthesis.by[:1].upper()}{synthesis.by[1:]}; each sentence cites the facts it draws on._\n",
                 *(f"- {st.text} " + " ".join(cited(r) for r in st.cites) for st in synthesis.statements), ""]
    head.append("_What each source says about it, in its own sentences, each linked to the fact it comes from._\n")
    sections: dict[tuple[str, str], tuple[str, dict[str, list[str]]]] = {}  # (project, source) -> (title, sentence -> facts)
    for ref, part in said:
        origin, source, _ = place(project, ref)
        title = part.title if origin == project else f"{origin} / {part.title}"
        title, lines = sections.setdefault((origin, source), (title, {}))
        for sentence in part.sentences:
            lines.setdefault(sentence, []).append(ref)
    body = []
    for title, lines in sections.values():
        body.append(f"## {title}\n")
        body += [f"- {sentence} " + " ".join(cited(r) for r in refs) for sentence, refs in lines.items()]
        body.append("")
    disagree = ["## Where the sources disagree\n", *disagreements, ""] if disagreements else []
    return "\n".join([*head, *disagree, *body]).rstrip() + "\n"


def defining_first(refs: list[str], defined_in: str | None) -> list[str]:
    """The facts in source order, but the defining fact's source first and that fact first in it
    (a ref of another project, "other/source/fact", is never of the defining source)."""
    if defined_in not in refs:
        return refs
    source = defined_in.split("/", 1)[0]
    same = [r for r in refs if r != defined_in and r.split("/")[:-1] == [source]]
    return [defined_in, *same, *(r for r in refs if r != defined_in and r not in same)]


async def said_of(ctx: KnowledgeContext, project: str, concept: str) -> tuple[ConceptEntry, list[tuple[str, SaidOf]]]:
    """A concept's entry and what each fact that mentions it says of it, the defining fact first:
    all that its page and its synthesis read of the facts, so an edit elsewhere in a fact asks
    neither again."""
    found = await ctx.query_part(project_concepts(project), Part("concept", concept).name)
    if found is None:
        raise Problem(f"{project} has no concept {concept!r} any more")
    entry = ConceptEntry.model_validate(found)
    refs = defining_first(await ctx.query_part(concept_citations(project), Part("concept", concept).name) or [], entry.defined_in)
    return entry, [(ref, SaidOf.model_validate(await ctx.query_part(fact_concepts(project, *place(project, ref)), Part("concept", concept).name)))
                   for ref in refs]


def in_turns(said: list[tuple[str, SaidOf]], limit: int) -> list[tuple[str, SaidOf]]:
    """At most `limit` of the facts, taken in turns across their sources and kept in page order:
    a source that speaks of the concept at length does not crowd the others out."""
    queues: dict[str, list[str]] = {}  # "source" or "other/source" -> its facts
    for ref, _ in said:
        queues.setdefault(ref.rsplit("/", 1)[0], []).append(ref)
    taken: set[str] = set()
    while len(taken) < min(limit, len(said)):
        for queue in queues.values():
            if queue and len(taken) < limit:
                taken.add(queue.pop(0))
    return [(ref, part) for ref, part in said if ref in taken]


@model_rule("concept", "grounding", version=1, params={"facts": SYNTHESIS_FACTS},
            uses=(said_of, defining_first, place, in_turns, statement_failures, unsupported_claims, *PLAIN_TEXT, grounding, secrets),
            returns=Synthesis)
async def concept_synthesis(ctx: KnowledgeContext, project: str, concept: str) -> Synthesis:
    """What the sentences of a concept's page say together, in one to three sentences a model
    writes, each citing the facts it draws on; it reads what the page reads of them, so an edit
    that leaves them as they were asks nothing. Each sentence is checked as a view's statement
    is (its facts must be the page's and say its numbers, keywords, code names and quoted
    terms; what code cannot clear, the model is asked); one that fails fails this query alone."""
    entry, said = await said_of(ctx, project, concept)
    if len(said) < 2:  # one fact's sentences together say what they say alone
        return Synthesis(statements=[])
    facts = [{"ref": ref, "title": part.title if place(project, ref)[0] == project else f"{place(project, ref)[0]} / {part.title}",
              "sentences": part.sentences} for ref, part in in_turns(said, SYNTHESIS_FACTS)]
    evidence = {f["ref"]: " ".join([f"{f['title']}.", *f["sentences"]]) for f in facts}  # the model was shown the title

    def grounded(written: list[dict[str, Any]]) -> list[str]:
        return statement_failures(written, evidence, "this concept's page")

    written = await ctx.settings.backend.write_synthesis(ctx, entry.name, facts, grounded)
    statements = [{**st, "text": redact(plain_text(st["text"]))} for st in written]
    where = f"{project}/concepts/{concept}, its synthesis (the page is written without it)"
    failures = grounded(statements)
    if failures:
        raise Problem(f"{where}: {'; '.join(failures)}")
    claims = await unsupported_claims(ctx, [(st["text"], [evidence[r] for r in st["cites"]]) for st in statements], entry.name)
    if claims:
        raise Problem(f"{where}: {'; '.join(claims[:5])}")
    return Synthesis(statements=[Statement(text=st["text"], cites=list(st["cites"])) for st in statements],
                     by=ctx.settings.backend.label if statements else "")


@rule(version=5, uses=(said_of, page_text, defining_first, place, disagreement_lines), settings=("store",), returns=ConceptPage)
async def concept_page(ctx: KnowledgeContext, project: str, concept: str) -> ConceptPage:
    """kb/PROJECT/concepts/SLUG.md, from the concept's entry and the sentences of the facts that
    mention it, which are all it reads."""
    store = ctx.settings.store
    entry, said = await said_of(ctx, project, concept)
    refs = [ref for ref, _ in said]
    cited = list(dict.fromkeys([*refs, *([entry.defined_in] if entry.defined_in else [])]))
    # a fact page that failed is named, not linked: the page never links to what is not there
    built_pages = await ctx.query_all([fact_built(*place(project, ref)) for ref in cited], return_failures=True)
    path = store.concept(project, concept)
    links = {ref: None if isinstance(p, QueryFailed) else link(path, store.fact(*place(project, ref)))
             for ref, p in zip(cited, built_pages)}
    # the disagreements between two facts the page cites, this page's part alone: a verdict that
    # changes re-runs the pages that show it
    between = Contradictions.model_validate(
        await ctx.query_part(concept_disagreements(project), Part("concept", concept).name) or {"pairs": []})
    # a synthesis that failed its checks is left out: the sources' own sentences stand without it,
    # and the failure is the build's (its line, its exit code), not the page's
    (synthesis,) = await ctx.query_all([concept_synthesis(project, concept)], return_failures=True)
    write_page(ctx, path, page_text(project, entry, said, links, disagreement_lines(between, path, store, project),
                                    None if isinstance(synthesis, QueryFailed) else synthesis))
    first = next((s for _, part in said for s in part.sentences), "")
    line = f"{entry.defined}" if entry.defined else f"\"{shortened(first, 160)}\""
    return ConceptPage(name=entry.name, line=line, statements=sum(len(p.sentences) for _, p in said),
                       sources=len({place(project, r)[:2] for r in refs}))


@rule(version=2, uses=(built, shortened), settings=("store",))
async def concept_index(ctx: KnowledgeContext, project: str) -> int:
    """kb/PROJECT/concepts/index.md, a line per concept with what it is, and how many concepts
    the project has."""
    store = ctx.settings.store
    missing = (await ctx.query(concept_origins(project))).missing
    await ctx.query_all([missing_origin(project, other) for other in missing], return_failures=True)
    names: dict[str, list[str]] = await ctx.query_part(project_concepts(project), NAMES.name) or {}
    slugs = list(names)
    got = await ctx.query_all([concept_page(project, c) for c in slugs], return_failures=True)
    lines = [f"- {c}: not built; run `kbuild` to see why" if isinstance(p, QueryFailed) else
             f"- [{p.name}]({c}.md): {p.line} ({p.sources} {'source' if p.sources == 1 else 'sources'}, "
             f"{p.statements} {'statement' if p.statements == 1 else 'statements'})" for c, p in zip(slugs, got)]
    write_page(ctx, store.concepts_index(project), f"# Concepts\n\nUp: [{project}](../index.md)\n\nEach thing the "
               "sources define or several of them speak of, with what it is; its page says what each source says "
               "about it, in the source's own sentences.\n\n" + ("\n".join(lines) or "No concepts yet.") + "\n")
    return built(got)
