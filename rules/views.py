"""Views: what a person reads, in sections that each cite the facts they come from.

A view is built from sections, one per group of a source's facts (a default view) or one per
source with material on its subject (a view on request), each its own query reading exactly the
facts it cites: when one fact changes, only the section citing it is written again and the rest
of the page stays byte for byte. Links are computed from fact ids, never taken from a model.
"""
from __future__ import annotations

from typing import Any

from kbuild.text.secrets import redact
from kbuild.engine import Problem, QueryFailed, hash_bytes, rule
from kbuild.text.prose import is_statement, prose_sentences
from kbuild.store.layout import link
from kbuild.store.sources import ViewRequest
from kbuild.retrieval.expansion import SameWords
from kbuild.retrieval.topic import Candidate, Passage, passages, rank
from kbuild.checks import grounding
from kbuild.retrieval import topic
from kbuild.text import injection
from kbuild.text import prose
from kbuild.text import secrets

from .contradictions import disagreement_lines, project_disagreements
from .cutoffs import same_section
from .glossary import project_glossary
from .facts import SECRET_KINDS, VIEW_PURPOSE, chunk, fact, reading
from .guard import PLAIN_TEXT, plain_text, statement_failures, unsupported_claims
from .pages import write_page
from .settings import KnowledgeContext, model_rule
from .sources import listing
from .summaries import fact_groups, group_of, heading_of
from .values import SaidSection, Section, Statement, ViewBlock, ViewPage

SECTION_STATEMENTS = {"digest": 4, "user": 8, "developer": 8, "agreements": 8}
BLOCK_GROUPS = 16  # sections a view page's block renders: what one changed section costs the page


def assemble_section(view: str, facts: list[dict[str, Any]]) -> list[Statement]:
    """A default view's section, by code: the sentences its facts' readings picked for the view,
    word for word, each citing its fact. Taken in turns across the facts up to the section's
    size, so that no one fact fills a digest, then put back in source order."""
    queues = [[(n, i) for i in f["picks"].get(view, [])] for n, f in enumerate(facts)]
    chosen: list[tuple[int, int]] = []
    while len(chosen) < SECTION_STATEMENTS[view] and any(queues):
        for queue in queues:
            if queue and len(chosen) < SECTION_STATEMENTS[view]:
                chosen.append(queue.pop(0))
    return [Statement(text=facts[n]["sentences"][i], cites=[facts[n]["ref"]]) for n, i in sorted(chosen)]


@rule(version=5, uses=(topic, group_of))
async def fact_sentences(ctx: KnowledgeContext, project: str, source: str, group: int) -> dict[str, Any]:
    """The prose passages of each fact of one group of a source, with the headings each sits
    under, which views on request rank, select and cite."""
    found = await group_of(ctx, project, source, group)
    slugs = found.slugs
    texts = await ctx.query_all([chunk(project, source, s) for s in slugs])
    return {"facts": [{"ref": f"{source}/{slug}", "passages": [
        {"text": p.text, "headings": list(p.headings), "paragraph": p.paragraph}
        for p in passages(t.text, [found.title, *(h for h in t.headings if h != found.title)])]}
        for slug, t in zip(slugs, texts)]}


@rule(version=2, returns=ViewRequest)
async def view_request(ctx: KnowledgeContext, project: str, view: str) -> ViewRequest | None:
    """A view's request as sources.yml has it (None for a default view), so that sections read
    only their own request and not every edit of sources.yml."""
    return next((v for v in (await ctx.query(listing(project))).views if v.name == view), None)


@model_rule("view", "grounding", version=4, params={"statements": SECTION_STATEMENTS},
            uses=(assemble_section, statement_failures, unsupported_claims, *PLAIN_TEXT, group_of, heading_of, prose_sentences,
                  grounding, prose, secrets, SECRET_KINDS),
            cutoff=same_section, returns=Section)
async def view_section(ctx: KnowledgeContext, project: str, view: str, origin: str, source: str, group: int) -> Section:
    """One section of a view: what one group of a source's facts says to it (for a view on
    request, group -1: the facts of the source that the ranking found).

    A default view's section is assembled by code from the sentences each fact's reading
    picked: the source's own words, citing their fact, so there is nothing to ground and no
    call to make. A view on request asks the model over the ranked sentences only, and its
    statements are grounded against the sentences they cite."""
    request = await ctx.query(view_request(project, view))
    if request is None:
        found = await group_of(ctx, origin, source, group)
        slugs = found.slugs
        # a section cites fact pages: one that failed its checks fails the section, and the
        # view keeps its previous version rather than link to a page that is not there
        await ctx.query_all([fact(origin, source, s) for s in slugs])
        texts = await ctx.query_all([chunk(origin, source, s) for s in slugs])
        readings = await ctx.query_all([reading(origin, source, s) for s in slugs])
        facts = [{"ref": f"{source}/{slug}", "sentences": prose_sentences(t.text), "picks": r.picks}
                 for slug, t, r in zip(slugs, texts, readings)]
        return Section(origin=origin, source=source, title=heading_of(found.title, found.section),
                       statements=assemble_section(view, facts))

    hits = (await ctx.query(view_hits(project, view)))["hits"].get(f"{origin}/{source}", [])
    by_fact: dict[str, list[str]] = {}
    for h in hits:
        by_fact.setdefault(h["ref"], []).append(h["sentence"])
    facts = [{"ref": ref, "sentences": sentences} for ref, sentences in by_fact.items()]
    title = (await ctx.query(fact_groups(origin, source))).title
    said = {ref: " ".join(sentences) for ref, sentences in by_fact.items()}

    def grounded(written: list[dict[str, Any]]) -> list[str]:
        return statement_failures(written, said, "this section")

    written = await ctx.settings.backend.write_section(ctx, "requested", request.about, title, facts, grounded)
    statements = [{**st, "text": redact(plain_text(st["text"]))} for st in written]
    failures = grounded(statements)
    if failures:
        raise Problem(f"{project}/views/{view}, section {title}: {'; '.join(failures)}")
    claims = await unsupported_claims(ctx, [(st["text"], [said[r] for r in st["cites"]]) for st in statements], title)
    if claims:
        raise Problem(f"{project}/views/{view}, section {title}: {'; '.join(claims[:5])}")
    return Section(origin=origin, source=source, title=title,
                   statements=[Statement(text=st["text"], cites=list(st["cites"])) for st in statements])


@rule(version=4, uses=(topic, is_statement, injection))
async def view_hits(ctx: KnowledgeContext, project: str, view: str) -> dict[str, Any]:
    """The sentences a requested view draws on, ranked across the whole project (kbuild.retrieval.topic):
    statements only, never a source's instruction to a model or its markup alone."""
    listed = await ctx.query(listing(project))
    request = next(v for v in listed.views if v.name == view)
    origins = [(project, s) for s in listed.ids]
    for other in request.across:
        origins += [(other, s) for s in (await ctx.query(listing(other))).ids]
    outlines = await ctx.query_all([fact_groups(p, s) for p, s in origins], return_failures=True)
    groups = [(p, s, n) for (p, s), o in zip(origins, outlines) if not isinstance(o, QueryFailed)
              for n in range(len(o.groups))]
    found = await ctx.query_all([fact_sentences(p, s, n) for p, s, n in groups], return_failures=True)
    candidates = [Candidate(f"{p}/{s}", f["ref"], Passage(x["text"], tuple(x["headings"]), x["paragraph"]))
                  for (p, s, _), doc in zip(groups, found) if not isinstance(doc, QueryFailed)
                  for f in doc["facts"] for x in f["passages"]]
    # every name the glossaries give a term is one word of the request: "MFA" is "multi-factor authentication"
    terms = await ctx.query_all([project_glossary(p) for p in dict.fromkeys(p for p, _ in origins)], return_failures=True)
    same = SameWords(t for g in terms if not isinstance(g, QueryFailed) for t in g.terms)
    hits: dict[str, list[dict[str, Any]]] = {}
    for hit in (h for h in rank(request.about, candidates, same=same) if is_statement(h.sentence)):
        hits.setdefault(hit.section, []).append({"ref": hit.ref, "sentence": hit.sentence, "score": hit.score})
    return {"origins": [f"{p}/{s}" for p, s in origins], "hits": hits}


async def view_parts(ctx: KnowledgeContext, project: str, view: str) -> tuple[str, list[tuple[str, str, int]]]:
    """What a view is for and its sections' keys in page order, (origin, source, group): one per
    group of each source's facts for a default view, one per source with hits for a view on
    request. Its page and a spec written from it read the same sections."""
    listed = await ctx.query(listing(project))
    request = next((v for v in listed.views if v.name == view), None)
    if request is not None:
        ranked = await ctx.query(view_hits(project, view))
        keys = [k.split("/", 1) for k in ranked["origins"] if k in ranked["hits"]]
        return f"On request: {request.about}", [(origin, source, -1) for origin, source in keys]
    outlines = await ctx.query_all([fact_groups(project, s) for s in listed.ids], return_failures=True)
    return VIEW_PURPOSE[view], [(project, s, n) for s, o in zip(listed.ids, outlines) if not isinstance(o, QueryFailed)
                                for n in range(len(o.groups))]


async def view_sections(ctx: KnowledgeContext, project: str, view: str) -> tuple[str, list[Section]]:
    """What a view is for and its sections, in page order."""
    purpose, parts = await view_parts(ctx, project, view)
    return purpose, await ctx.query_all([view_section(project, view, p, s, n) for p, s, n in parts])


@rule(version=1, settings=("store",), returns=ViewBlock)
async def view_block(ctx: KnowledgeContext, project: str, view: str, origin: str, source: str, first: int, last: int) -> ViewBlock:
    """The sections of groups first..last-1 of a source's facts (-1: a view on request's one
    section of it) as the view's page says them, links and all. The page joins its blocks, so
    a section that changed renders its block again, not every statement of the page."""
    store = ctx.settings.store
    sections = await ctx.query_all([view_section(project, view, origin, source, n) for n in range(first, last)])
    path = store.view(project, view)
    return ViewBlock(sections=[SaidSection(title=section.title, statements=[
        (st.text, f"- {st.text} " + " ".join(
            f"([{ref.split('/', 1)[1]}]({link(path, store.fact(section.origin, *ref.split('/', 1)))}))"
            for ref in st.cites)) for st in section.statements]) for section in sections])


@rule(version=6, uses=(view_parts, disagreement_lines), settings=("store", "label"), returns=ViewPage)
async def view_page(ctx: KnowledgeContext, project: str, view: str) -> ViewPage:
    """A view's page, joined from blocks of BLOCK_GROUPS sections; its value is what the views'
    index shows of it (a spec written from the view reads its sections itself), so a change
    further down the page rebuilds no index."""
    store = ctx.settings.store
    listed = await ctx.query(listing(project))
    request = next((v for v in listed.views if v.name == view), None)
    purpose, parts = await view_parts(ctx, project, view)
    blocks: dict[tuple[str, str, int], int] = {}  # (origin, source, its first group) -> the group after its last
    for origin, source, n in parts:
        blocks[(origin, source, n - n % BLOCK_GROUPS if n >= 0 else n)] = n + 1
    # a section that fails its checks, code or model, fails its block and the page: the
    # previous version stays whole
    said_blocks = await ctx.query_all([view_block(project, view, origin, source, first, last)
                                       for (origin, source, first), last in blocks.items()])
    path = store.view(project, view)
    body = [f"# {view.replace('-', ' ').capitalize()} view of {listed.title or project}\n",
            f"_{purpose}. Every statement cites the fact it comes from. Statements: {ctx.settings.label}._\n",
            f"Up: [views](index.md) · [{project}](../../index.md)\n"]
    summary = ""
    said: set[str] = set()  # a sentence documents repeat is said once, where it first stands
    for section in (section for block in said_blocks for section in block.sections):
        fresh = [(text, line) for text, line in section.statements if " ".join(text.lower().split()) not in said]
        if not fresh:
            continue
        body.append(f"## {section.title}\n")
        for text, line in fresh:
            said.add(" ".join(text.lower().split()))
            body.append(line)
            summary = summary or text
        body.append("")
    if view == "agreements":  # the pairs code found and the judge confirmed: both sides quoted, neither dropped
        disagreeing = disagreement_lines(await ctx.query(project_disagreements(project)), path, store, project)
        if disagreeing:
            body += ["## Where the sources disagree\n", *disagreeing, ""]
            summary = summary or disagreeing[0].removeprefix("- ")
    if not summary:
        about = request.about if request else purpose
        body.append(f"**A gap.** Nothing in the sources of this project speaks to: {about}. "
                    "Add a source that does, or ask for a view on something the sources cover.\n")
    page = "\n".join(body).rstrip() + "\n"
    write_page(ctx, path, page)  # each section was checked before it came here
    ctx.note("grounding", {"passed": True, "by": "sections", "page": hash_bytes(page.encode())})
    return ViewPage(path=path, summary=summary or "(a gap: nothing in the sources speaks to this)", gap=not summary)
