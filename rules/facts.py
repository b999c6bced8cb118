"""A source's text, its chunks, and each chunk's fact: the Original beside a rewrite that reads on its own.

Every rule reads as little as it can (docs/design.md, locality): a fact reads its own chunk, not
the source; a chunk's query is cut off when its words did not change, so one edited sentence
reaches one fact and one summary. Paths are computed from validated ids, never taken from a
model or a document.
"""
from __future__ import annotations

import asyncio
import re
import threading
from pathlib import Path
from typing import Any

from kbuild.notes import note as notes
from kbuild.text import slicing
from kbuild.checks.grounding import triage, unsupported
from kbuild.checks.links import links_in
from kbuild.text.secrets import redact, redacted
from kbuild.engine import Problem, hash_bytes, rule
from kbuild.plugins import registry
from kbuild.text.inline import plain_words
from kbuild.text.prose import clean, prose_sentences
from kbuild.text.slicing import Chunk, Region, fact_names, region_texts
from kbuild.store import pages
from kbuild.store.layout import link
from kbuild.store.links import needs_sources, rewrite_source_links
from kbuild.text.markdown import ATX_HEADING, UNDERLINE, visible_text, without_page_markers
from kbuild.checks import grounding
from kbuild.checks import links as link_checks
import kbuild.convert as converter
from kbuild.store import links as store_links
from kbuild.text import markdown
from kbuild.text import prose
from kbuild.text import secrets

from .cutoffs import same_meaning
from .guard import PLAIN_TEXT, foreign_names, model_markdown, plain_text, plain_text_failures, unsupported_claims, write_grounded
from .pages import write_page
from .settings import KnowledgeContext, model_rule
from .sources import default_views, raw, source_pages
from .values import HEADER, TAIL, Chunks, ChunkText, Page, Part, Place, Reading, RegionPlace, RegionPlaces, SourceHeader, SourceRegions, SourceText, Span

PREVIOUS_CHARS = 600  # how much of the chunk before a model sees, for references to resolve (docs/design.md)
PICKS_PER_CHUNK = 3  # sentences of one chunk a default view may say
RESERVED = {"index", "text", "pages", "figures"}  # names of a source folder's own pages
CONVERTER = (converter,)  # the converter's code is part of the text rule's fingerprint
# named, not imported: its detectors take 50 ms to import, paid only when a text is scanned
SECRET_KINDS = "kbuild.text.secret_kinds"
VIEW_PURPOSE = {
    "digest": "What the project is and does, for anyone",
    "user": "How the system behaves, for someone who uses it",
    "developer": "How it is built, for someone who changes it",
    "agreements": "Where the sources agree, where they disagree, and the open questions",
}
_convert_lock = threading.Lock()  # pymupdf is not thread-safe; conversions run one at a time


def _title(text: str, fallback: str) -> str:
    """A document's title: the "Title:" field of a header at its top (a PEP, an RFC 822 header),
    else its highest heading near the top, of any level (many documents start at `##`), else
    `fallback` (the source's id)."""
    lines = text.splitlines()
    for line in lines[:30]:
        if not line.strip():
            break  # the header is the first paragraph
        field = re.match(r"^Title:\s+(\S.*?)\s*$", line)
        if field:
            return field.group(1)
    found: list[tuple[int, int, str]] = []  # (level, line, words)
    for i, line in enumerate(lines[:200]):
        stripped = line.strip()
        atx = ATX_HEADING.match(stripped)
        if atx and atx.group(2):
            found.append((len(atx.group(1)), i, visible_text(atx.group(2))))
            continue
        underline = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if stripped and len(underline) >= len(stripped) and UNDERLINE.match(underline) and underline[0] in "=-~#*":
            found.append((1 if underline[0] in "=#*" else 2, i, visible_text(stripped)))
    return min(found)[2] if found else fallback


def _convert(data: bytes, name: str) -> Any:
    from kbuild.convert import convert  # pymupdf with it: imported when a source is converted

    with _convert_lock:
        return convert(data, name)


def context_before(text: str, chars: int = PREVIOUS_CHARS) -> str:
    """The end of the text before a chunk, from a paragraph or sentence start: what references
    at the chunk's start ("it", "this rule") resolve against, and no more."""
    if len(text) <= chars:
        return text
    tail = text[-chars:]
    for mark in ("\n\n", ". ", "\n"):
        cut = tail.find(mark)
        if 0 <= cut < chars // 2:
            return tail[cut + len(mark):].lstrip()
    return tail[tail.find(" ") + 1:]


def lost_facts(span: str, rewrite: str, summary: str) -> list[str]:
    """What a reading (cleaned by code: guard.model_markdown, guard.plain_text) lost or added:
    the chunk's numbers and requirement keywords that its rewrite does not keep, a summary with
    no words in it, and addresses, quoted markup or instructions the chunk does not hold."""
    failures = []
    said = clean(span)  # the part's words, not its markup (page markers, link targets, list numbers)
    missing = unsupported(said, [rewrite]) if any(ch.isalnum() for ch in said) else []
    numbers_and_keywords = [m for m in missing if not m.startswith(("`", "\""))]
    if numbers_and_keywords:
        failures.append(f"the rewrite leaves out {', '.join(numbers_and_keywords[:8])}, which the part states")
    failures += [f"the rewrite {problem}" for problem in foreign_names(rewrite, span)]
    failures += [f"the summary {problem}" for problem in plain_text_failures(summary, span)]
    return failures


def place_quotes(quotes: list[str], sentences: list[str]) -> list[int]:
    """The sentences a model quoted, as their indices: the one a quote stands in or starts, else
    the one sharing at least 60% of the quote's words. A quote is read as its words (a link's
    address is not the sentence's) and, when it runs over several sentences, sentence by
    sentence. A quote that matches no sentence is dropped: a view says only the source's own
    sentences."""
    def words(text: str) -> list[str]:
        return re.findall(r"\w+", text.lower())

    bags = [words(s) for s in sentences]
    found: list[int] = []
    for quote in (part for q in quotes for part in prose_sentences(plain_words(q)) or [q]):
        said = words(quote)
        if not said:
            continue
        joined = " ".join(said)
        exact = [i for i, bag in enumerate(bags) if joined in " ".join(bag)]
        if exact:
            found.append(exact[0])
            continue
        share = [len(set(said) & set(bag)) / len(set(said)) for bag in bags]
        best = max(range(len(bags)), key=lambda i: (share[i], -i), default=None)
        if best is not None and share[best] >= 0.6:
            found.append(best)
    return sorted(set(found))



def note_source(ctx: KnowledgeContext, data: bytes, where: str) -> tuple[str, str]:
    """A note's text as its pages show it, its status first (kbuild.notes.note.banner), and its title
    with its status. Its evidence files are read through the context, so an edit of one rebuilds
    the note's pages, marked as needing review."""
    try:
        note = notes.parse(data, where)
    except notes.NoteError as exc:
        raise Problem(str(exc)) from None
    changed = []
    for evidence in note.header.evidence:
        try:
            digest = hash_bytes(ctx.read(evidence.path))
        except (FileNotFoundError, IsADirectoryError):
            digest = "absent"
        if digest != evidence.hash:
            changed.append(evidence.path)
    return notes.note_text(note, changed), notes.note_title(note.header, changed)


@rule(version=1, params={"libraries": {ext: registry().library_versions(ext) for ext in sorted(registry().converters)
                                         if registry().library_versions(ext)}})
async def converter_libraries(ctx: KnowledgeContext, extension: str) -> dict[str, str | None]:
    """The versions of the libraries that convert files of `extension` (office formats: mammoth,
    openpyxl...). Its own rule, read only by the sources of such a format: an upgrade converts
    those again and no other, and a store without them does not depend on what is installed
    (the lock of this repository's docs is the same with or without `kbuild[office]`)."""
    return registry().library_versions(extension)


@rule(version=5, uses=(*CONVERTER, secrets, SECRET_KINDS, store_links, markdown,
                       pages, notes, note_source, _title),
      settings=("store",), returns=SourceText,
      params={"plugins": registry().plugin_versions()})  # a converting plug-in's upgrade converts again
async def text(ctx: KnowledgeContext, project: str, source: str) -> SourceText:
    store = ctx.settings.store
    got = await ctx.query(raw(project, source))
    if registry().library_versions(got.ext.removeprefix(".")):
        await ctx.query(converter_libraries(got.ext.removeprefix(".")))  # an upgrade converts this format again
    data = ctx.read(got.path)
    title = got.title
    if got.kind == "note":
        text_of_note, title = note_source(ctx, data, f"{project}/{source}")
        data = text_of_note.encode()
    try:
        converted = await asyncio.to_thread(_convert, data, "original" + got.ext)
    except Exception as exc:
        from kbuild.convert import ConversionError

        if not isinstance(exc, ConversionError):
            raise
        raise Problem(f"{project}/{source} ({got.origin}): {exc}") from None
    for warning in converted.warnings:
        ctx.warn(f"{project}/{source}: {warning}")
    # Redacted here, where the words enter the graph: every page, model request, cached call
    # and logged call is built from this text, so none of them can hold a secret. Only raw/
    # keeps the source as it was (and images: a secret in the pixels of a page is not seen).
    body, found = redacted(converted.text)
    figure_words: dict[str, str] = {}
    for figure in converted.figures:
        figure_words[figure.name], in_figure = redacted(figure.text)
        found += in_figure
    if found:
        kinds = ", ".join(sorted(set(found)))
        ctx.warn(f"{project}/{source}: holds what looks like {kinds} ({len(found)} in all); raw/ keeps it, "
                 "every other page and every model call has it replaced by [secret removed]; rotate it if it is real")
    own = {f"figures/{f.name}{ext}" for f in converted.figures for ext in (".md", ".png")}
    if converted.kind != "code" and needs_sources(body, own):  # in code, `handlers[kind](event)` is a call
        body = rewrite_source_links(body, got.origin, store.text(project, source),
                                    await ctx.query(source_pages(project)), own)
    write_page(ctx, store.text(project, source), body, code=converted.kind == "code")
    for number, png in enumerate(converted.pages, start=1):
        ctx.write(store.page_image(project, source, number), png)
    if converted.pages:
        write_page(ctx, store.pages_index(project, source), pages.pages_index(source, len(converted.pages)))
    for figure in converted.figures:
        ctx.write(store.figure(project, source, figure.name, ".png"), figure.png)
        write_page(ctx, store.figure(project, source, figure.name, ".md"), figure_words[figure.name].rstrip() + "\n")
    if converted.figures:
        write_page(ctx, store.figures_index(project, source),
                  pages.figures_index(source, [(f.name, f.page, figure_words[f.name]) for f in converted.figures]))
    return SourceText(text=body, kind=converted.kind, title=title or _title(body, source),
                      original=Path(got.path).name, pages=len(converted.pages), figures=figure_words)


SECTION_FLOOR, SECTION_CAP = 80, 700  # tokens of a search section (rules/search_index.py): cut at headings, a long one at paragraphs


# The sizes reach the graph as settings (part of this rule's fingerprint): a changed size
# makes exactly the queries that read it stale.
@rule(version=1, uses=(slicing,), settings=("floor_tokens", "cap_tokens"), parts=True)
async def text_regions(ctx: KnowledgeContext, project: str, source: str) -> dict[str, Any]:
    """The source's text in regions (kbuild.text.slicing.layout), where both the facts' and the
    search sections' cuts agree: "region:N" each, with "header" (SourceRegions). Each region is
    sliced by a query of its own that reads its part alone, so a one-sentence edit re-slices
    one region, not the whole text, and the others' chunks stay as recorded, unread."""
    doc = await ctx.query(text(project, source))
    regions = slicing.layout(doc.text, [(ctx.settings.floor_tokens, ctx.settings.cap_tokens),
                                        (SECTION_FLOOR, SECTION_CAP)], headings=doc.kind != "code")
    header = SourceRegions(title=doc.title, original=doc.original, code=doc.kind == "code", pages=doc.pages,
                           figures=sorted(doc.figures), regions=len(regions))
    return {HEADER.name: header.model_dump(), **{Part("region", n).name: vars(r) for n, r in enumerate(regions)}}


async def region_of(ctx: KnowledgeContext, project: str, source: str, region: int) -> Region:
    found = await ctx.query_part(text_regions(project, source), Part("region", region).name)
    if found is None:
        raise Problem(f"{project}/{source} has no region {region} any more")
    return Region(**found)


@rule(version=1, uses=(slicing, region_of), settings=("floor_tokens", "cap_tokens"), returns=RegionPlaces)
async def region_places(ctx: KnowledgeContext, project: str, source: str, region: int) -> RegionPlaces:
    """Where each of one region's chunks stands, in order. `chunks` reads every region's, whole:
    an edit that moves no boundary stops here, and the source's chunks are as recorded."""
    found = await region_of(ctx, project, source, region)
    return RegionPlaces(places=[
        RegionPlace(start=c.start, end=c.end, headings=list(c.headings), covers=list(c.covers), levels=list(c.levels),
                    continued=c.continued, pages=list(c.pages) if c.pages else None)
        for c in slicing.slice_region(found, ctx.settings.floor_tokens, ctx.settings.cap_tokens)])


@rule(version=1, uses=(context_before, region_of), parts=True)
async def region_chunks(ctx: KnowledgeContext, project: str, source: str, region: int) -> dict[str, Any]:
    """One region's chunks' words ("words:M", a Span each) and the end of its last one
    ("tail"), which the next region's first chunk sees before it. Each chunk query reads its
    own part, so an edited sentence runs the one chunk query whose words changed."""
    found = await region_of(ctx, project, source, region)
    places = (await ctx.query(region_places(project, source, region))).places
    words = region_texts(found, [Chunk(p.start, p.end, (), None, 0) for p in places])
    value: dict[str, Any] = {Part("words", m).name: Span(text=w, headings=p.headings,
                                                previous=context_before(words[m - 1]) if m else None).model_dump()
                             for m, (p, w) in enumerate(zip(places, words))}
    value[TAIL.name] = context_before(words[-1]) if words else ""
    return value


@rule(version=3, uses=(fact_names,), returns=Chunks)
async def chunks(ctx: KnowledgeContext, project: str, source: str) -> Chunks:
    """Where each of the source's chunks stands, and its name: joined from its regions' places,
    so it runs again only when a boundary moves or a line comes or goes."""
    header = SourceRegions.model_validate(await ctx.query_part(text_regions(project, source), HEADER.name))
    cut: list[Chunk] = []
    at: list[tuple[int, int]] = []  # each chunk's region and its number there
    regions = await ctx.query_all([region_places(project, source, n) for n in range(header.regions)])
    for n, found in enumerate(regions):
        for m, p in enumerate(found.places):
            cut.append(Chunk(p.start, p.end, tuple(p.headings), tuple(p.pages) if p.pages else None, 0, tuple(p.covers),
                             p.continued, tuple(p.levels)))
            at.append((n, m))
    return Chunks(title=header.title, original=header.original, code=header.code, pages=header.pages,
                  figures=header.figures, chunks=[
        Place(slug=name, start=c.start, end=c.end, headings=list(c.headings), covers=list(c.covers),
              pages=list(c.pages) if c.pages else None, region=n, index=m)
        for name, c, (n, m) in zip(fact_names(cut, RESERVED), cut, at)])


@rule(version=1, parts=True)
async def chunk_places(ctx: KnowledgeContext, project: str, source: str) -> dict[str, Any]:
    """Where each chunk stands, with what a fact page shows of its source: one part per chunk
    ("chunk:SLUG"), which its fact reads alone, so an edit that moves no line loads and checks
    the fact it changed, not one per chunk of the source."""
    doc = await ctx.query(chunks(project, source))
    header = SourceHeader(title=doc.title, original=doc.original, code=doc.code).model_dump()
    return {Part("chunk", p.slug).name: {"place": p.model_dump(), "source": header} for p in doc.chunks}


async def place_of(ctx: KnowledgeContext, project: str, source: str, slug: str) -> tuple[SourceHeader, Place]:
    """A chunk's place and its source's header: one part of chunk_places."""
    found = await ctx.query_part(chunk_places(project, source), Part("chunk", slug).name)
    if found is None:
        raise Problem(f"{project}/{source} has no chunk {slug!r} any more")
    return SourceHeader.model_validate(found["source"]), Place.model_validate(found["place"])


@rule(version=5, uses=(place_of,), returns=ChunkText)
async def chunk(ctx: KnowledgeContext, project: str, source: str, slug: str) -> ChunkText:
    """One chunk's words, its headings and what comes just before: all a fact needs. Words only,
    not where they stand: lines added above a chunk move it without changing it, and must not
    reach the model calls that read it."""
    doc, place = await place_of(ctx, project, source, slug)
    span = Span.model_validate(await ctx.query_part(region_chunks(project, source, place.region), Part("words", place.index).name))
    previous = span.previous
    if previous is None:  # the first of its region: what comes before it ends the region before
        previous = await ctx.query_part(region_chunks(project, source, place.region - 1), TAIL.name) if place.region else ""
    figures: dict[str, str] = {}
    if "figures/" in span.text:  # the source's figures are read only by the chunks that show one
        shown = await ctx.query(text(project, source))
        names = [name for name in shown.figures if f"figures/{name}." in span.text]
        figures = dict(zip(names, await ctx.query_all([figure_text(project, source, n) for n in names])))
    return ChunkText(text=span.text, headings=span.headings, previous=previous, title=doc.title, figures=figures)


@model_rule("figure", uses=(redact, SECRET_KINDS), settings=("store",), cutoff=same_meaning)
async def figure_text(ctx: KnowledgeContext, project: str, source: str, name: str) -> str:
    doc = await ctx.query(text(project, source))
    png = ctx.read(ctx.settings.store.figure(project, source, name, ".png"))
    # a model that reads the image may read a secret in its pixels
    return redact(await ctx.settings.backend.describe_figure(ctx, png, doc.figures[name], name, doc.title))


@model_rule("reading", version=1, params={"views": VIEW_PURPOSE, "picks": PICKS_PER_CHUNK}, settings=("store",),
            uses=(place_quotes, prose_sentences, redact, SECRET_KINDS, lost_facts, clean,
                  model_markdown, *PLAIN_TEXT, link_checks, grounding, prose,
                  without_page_markers),
            returns=Reading)
async def reading(ctx: KnowledgeContext, project: str, source: str, slug: str) -> Reading:
    """The one model call a chunk costs: its rewrite, its summary, and which of its sentences
    each default view should say. Everything else built from a chunk is code over this."""
    store = ctx.settings.store
    c = await ctx.query(chunk(project, source, slug))
    views = await ctx.query(default_views(project))
    page = ctx.root / store.fact(project, source, slug)
    framing = " ".join([c.title, *c.headings])

    def cleaned(got: dict[str, Any]) -> tuple[str, str]:
        """The reply's rewrite and summary, cleaned by code of the markup and links they may
        not carry (a summary stands in indexes at every depth of the store: a link's words only)."""
        return (model_markdown(got["rewrite"], page, ctx.root / store.root, repeats=links_in(c.text)),
                plain_text(got["summary"]))

    def guardrail(got: dict[str, Any]) -> list[str]:  # before the answer is taken: a reply that fails is asked again
        rewritten, summary = cleaned(got)
        refused = triage(rewritten, [c.text, *c.figures.values()], framing).refused
        return (lost_facts(c.text, rewritten, summary)
                + [f"the rewrite's \"{sentence[:60]}\" {why}" for sentence, why in refused])

    # The model reads the chunk's words: the page markers kbuild writes into text.md are kbuild's own.
    got = await ctx.settings.backend.read_chunk(ctx, without_page_markers(c.text), c.headings, c.title, c.figures,
                                                c.previous, {v: VIEW_PURPOSE[v] for v in views}, PICKS_PER_CHUNK,
                                                check=guardrail)
    failures = guardrail(got)
    if failures:
        raise Problem(f"{project}/{source}/{slug}: {'; '.join(failures)}")
    sentences = prose_sentences(c.text)
    rewritten, summary = cleaned(got)
    return Reading(rewrite=redact(rewritten), summary=redact(summary),
                   picks={v: place_quotes(got["picks"].get(v, []), sentences) for v in views})


@model_rule("reading", cutoff=same_meaning)
async def rewrite(ctx: KnowledgeContext, project: str, source: str, slug: str) -> str:
    """The chunk rewritten to read on its own; a rewrite that means what the old one meant
    keeps the old words, and the fact page above it is not touched."""
    return (await ctx.query(reading(project, source, slug))).rewrite


@model_rule("reading", cutoff=same_meaning)
async def chunk_summary(ctx: KnowledgeContext, project: str, source: str, slug: str) -> str:
    return (await ctx.query(reading(project, source, slug))).summary


@model_rule("grounding", version=4, settings=("store", "label"), returns=Page,
            uses=(write_grounded, unsupported_claims, pages, grounding, prose, place_of,
                  without_page_markers))
async def fact(ctx: KnowledgeContext, project: str, source: str, slug: str) -> Page:
    store = ctx.settings.store
    doc, place = await place_of(ctx, project, source, slug)
    c = await ctx.query(chunk(project, source, slug))
    rewritten = await ctx.query(rewrite(project, source, slug))
    path = store.fact(project, source, slug)
    original = link(path, store.original(project, source, Path(doc.original).suffix))
    page = pages.FactPage(original_name=doc.original, original_link=original, pages=place.pages, start=place.start,
                          end=place.end, covers=place.covers, original=without_page_markers(c.text),
                          rewritten=rewritten.strip(),
                          label=ctx.settings.label, title=doc.title).render()
    framing = " ".join([c.title, *c.headings])
    await write_grounded(ctx, path, page, [(rewritten, [c.text, *c.figures.values()])], framing, code=doc.code)
    return Page(path=path, hash=hash_bytes(page.encode()))


@rule(version=1)
async def fact_built(ctx: KnowledgeContext, project: str, source: str, slug: str) -> bool:
    """That a fact's page was built, for a page that only links to it: the value stays the same
    when the fact is edited (and is cut off), so such a page runs again only when what it quotes
    of the fact changed, or the fact's page failed or came back."""
    await ctx.query(fact(project, source, slug))
    return True
