"""The search index: every fact cut into its sections, each indexed by its own words (the
Original and the Rewritten), its breadcrumb and its fact's summary; persisted per project in
kb/PROJECT/search-index/ (bm25s), which `kbuild search`, `kbuild context` and the MCP server read.

A query like any other, so it is incremental: `group_sections` reads one group of a source's
facts (their chunks, rewrites and summaries), `source_sections` joins its groups' and is cut off
when its sections did not change, and `search_index` only joins its project's sources' segments
and writes the files. A group's sections are spelled once, by `group_sections`, as lines of bytes:
`source_sections` joins its groups' as they are, and the index writes the lines as they are
(`SourceSections.of` decodes only each group's head).
"""
from __future__ import annotations

import json
import re
from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

from kbuild.text.injection import find_injections
from kbuild.text.markdown import UNDERLINE
from kbuild.engine import QueryFailed, rule
from kbuild.text import slicing
from kbuild.text.ranking import Segment, build_index, defined_abbreviations, segment, tokens
from kbuild.text.tokens import estimate_tokens
from kbuild.text import injection
from kbuild.text import ranking
from kbuild.text import tokens as token_counting

from .facts import SECTION_CAP, SECTION_FLOOR, chunk, chunk_summary, fact, place_of, region_of, region_places, rewrite
from .settings import KnowledgeContext
from .sources import project_outline
from .summaries import fact_groups, group_of, group_places
from .values import Part

HEADING_WEIGHT = 3  # a section's own headings count as this many mentions of their words
ANCESTOR_WEIGHT = 1  # a heading over them counts once: the subsections of "Primary Defenses" outranked its own list
FORMAT = 1  # of search-index.json; kbuild/retrieval/search.py refuses another


_MARKUP = str.maketrans("", "", "*_`#")


def _plain(line: str) -> str:
    return line.translate(_MARKUP).strip().lower()


def rewritten_sections(rewritten: str, headings: list[str]) -> dict[str, str]:
    """The Rewritten cut at the lines that name a heading of its fact (however marked up):
    heading -> the words under it. Words before the first, or under no known heading, go to ""."""
    wanted = {h.lower(): h for h in headings}
    found: dict[str, list[str]] = {}
    current = ""
    for line in rewritten.splitlines():
        name = _plain(line)
        if name in wanted:
            current = wanted[name]
            continue
        found.setdefault(current, []).append(line)
    return {k: "\n".join(v) for k, v in found.items()}


def first_sentence(words: str, limit: int = 160) -> str:
    """A section's one line: its first sentence of prose (headings and markup lines skipped) that
    is no instruction to a model."""
    lines = [ln.strip() for ln in words.splitlines()] + [""]
    underline = re.compile(r"[=~^\-'*#`:.+]{3,}")
    prose = " ".join(ln for ln, after in zip(lines, lines[1:])
                     if ln and not underline.fullmatch(ln) and not underline.fullmatch(after)
                     and not re.fullmatch(r"#.*|\.\. .*|[A-Z][\w-]*: .*", ln))
    # the first that is no instruction to a model: a search hit's line is kbuild's summary of it
    line = next((s for s in re.split(r"(?<=[.!?])\s+", prose.strip()) if not find_injections(s)), "")
    return line if len(line) <= limit else line[:limit - 1].rsplit(" ", 1)[0] + "…"


def _path(title: str, heads: list[str], inside: list[str], own_lines: list[str]) -> list[str]:
    """Where a section starts, as a reader is shown it: the headings over it, and the first it
    holds only when its words open with that heading. A part that runs into the next heading
    ("Revocation", then "## Auditing") is not under it."""
    over = {_plain(h) for h in [title, *heads]}
    opening = next((plain for line in own_lines
                    if (plain := _plain(line)) and plain not in over and not UNDERLINE.fullmatch(line.strip())), "")
    return [title, *heads, *inside[:1]] if inside and opening == inside[0].lower() else [title, *heads]


@rule(version=1, uses=(slicing, _plain, region_of), parts=True)
async def region_sections(ctx: KnowledgeContext, project: str, source: str, region: int) -> dict[str, Any]:
    """Where one region's sections stand: its text cut at headings (a long section at
    paragraphs), each part cut again where a chunk ends, so a section stays within its fact;
    one part of this value per chunk of the region ("chunk:M": its pieces). Each fact's sections
    read their own part, so an edit that moves no line re-counts one fact's words, not the
    source's."""
    found = await region_of(ctx, project, source, region)
    places = (await ctx.query(region_places(project, source, region))).places
    lines = found.lines
    cuts: dict[str, list[dict[str, Any]]] = {Part("chunk", m).name: [] for m in range(len(places))}
    # Chunks tile the region in order (docs/slicing.md): each part looks only at the chunks from
    # the first that ends at or after it.
    ends = [p.end for p in places]
    for part in slicing.slice_region(found, SECTION_FLOOR, SECTION_CAP, which=1):
        first = True
        for m in range(bisect_left(ends, part.start), len(places)):
            place = places[m]
            if place.start > part.end:
                break
            start, end = max(part.start, place.start), min(part.end, place.end)
            headings, covers = list(part.headings), list(part.covers)
            if end < part.end:  # cut short: name only the headings it still holds
                held = {_plain(line) for line in lines[start - 1 - found.first:end - found.first]}
                covers = [c for n, c in enumerate(covers) if not n or c.lower() in held]
            if not first:  # the part goes on into the next fact, under that fact's headings
                headings, covers = list(place.headings), list(place.covers[:1])
            cuts[Part("chunk", m).name].append({"start": start, "end": end, "headings": headings, "covers": covers})
            first = False
    return cuts


# Where a section's line of sections.json names the index page that lists its fact, which its
# source's sections fill in (source_sections): JSON escapes every quote and control character
# inside a string, so this spelling occurs in a line only as the key and its value.
INDEX_PAGE = '"source_index": "\\u0000"'


def section_line(section: dict[str, Any]) -> str:
    """A section's line of sections.json, but for the index page that lists it (INDEX_PAGE)."""
    return json.dumps({**section, "source_index": "\0"}, sort_keys=True, ensure_ascii=False)


@rule(version=6, uses=(ranking, token_counting, rewritten_sections, first_sentence, place_of,
                       section_line, injection, _path), settings=("store",))
async def fact_sections(ctx: KnowledgeContext, project: str, source: str, slug: str) -> dict[str, Any]:
    """One fact's sections and its summary for search, each with where it stands (its fact
    page, its lines of text.md), its breadcrumb and its size, as its line of sections.json
    ("lines", "summary"), and its words' counts ("counts", "summary_counts"). And the
    abbreviations its words define, which the source's sections join: a definition stands on
    one line, and a fact holds whole lines.

    A fact whose page failed is searched by its words as text.md holds them now, which code
    made, and its sections point at text.md: its rewrite and summary, the model's, are left
    out, and so is the page, which is missing or from an earlier build."""
    store = ctx.settings.store
    doc, place = await place_of(ctx, project, source, slug)
    pieces = await ctx.query_part(region_sections(project, source, place.region), Part("chunk", place.index).name) or []
    page, words, rewritten, summary = await ctx.query_all(
        [fact(project, source, slug), chunk(project, source, slug), rewrite(project, source, slug),
         chunk_summary(project, source, slug)], return_failures=True)
    if isinstance(words, QueryFailed):
        return {"lines": [], "counts": [], "summary": None, "summary_counts": None, "abbreviations": {}}
    abbreviations = defined_abbreviations(words.text)
    failed = isinstance(page, QueryFailed)
    shown = store.text(project, source) if failed else store.fact(project, source, slug)
    lines = words.text.split("\n")
    # A long section is cut into several parts; the Rewritten of its heading is shared among
    # them in order, paragraph by paragraph, so that each part has about its own words.
    heading_of = [(p["covers"] or p["headings"] or [""])[-1] for p in pieces]
    shares = Counter(heading_of)
    seen: Counter[str] = Counter()
    own = (rewritten_sections(rewritten, [*words.headings, *place.covers])
           if not failed and not isinstance(rewritten, QueryFailed) else None)
    sections, counted = [], []
    for piece, heading in zip(pieces, heading_of):
        nth, seen[heading] = seen[heading], seen[heading] + 1
        own_lines = lines[piece["start"] - place.start:piece["end"] - place.start + 1]
        body = "\n".join(own_lines)
        heads = [h for h in piece["headings"] if h != doc.title]
        inside = [c for c in piece["covers"] if c not in heads and c != doc.title]
        crumb = [doc.title, *heads, *inside]  # every heading over or in it: its words are searched
        path = _path(doc.title, heads, inside, own_lines)
        counts = Counter(tokens(body))
        named = piece["covers"] or piece["headings"][-1:]  # the section's own headings
        for heading in crumb[1:]:
            for word in tokens(heading):
                counts[word] += HEADING_WEIGHT if heading in named else ANCESTOR_WEIGHT
        counts.update(tokens(doc.title))
        if own is not None:
            for name in named:
                paragraphs = [p for p in own.get(name, "").split("\n\n") if p.strip()]
                if name == heading and shares[heading] > 1:
                    k = shares[heading]
                    paragraphs = paragraphs[nth * len(paragraphs) // k:(nth + 1) * len(paragraphs) // k]
                counts.update(tokens("\n".join(paragraphs)))
        sections.append({
            "kind": "section", "page": shown, "text": store.text(project, source),
            "start": piece["start"], "end": piece["end"], "crumb": crumb, "tokens": estimate_tokens(body),
            "line": first_sentence(body) or " › ".join(crumb), **({"path": path} if path != crumb else {}),
        })
        counted.append(dict(sorted(counts.items())))
    found = found_counts = None
    if not failed and isinstance(summary, str):
        crumb = [doc.title, *(c for c in place.covers if c != doc.title)]
        counts = Counter(tokens(summary))
        counts.update(tokens(" ".join(crumb)))
        found = section_line({"kind": "summary", "page": store.fact(project, source, slug), "crumb": crumb,
                              "line": summary, "tokens": estimate_tokens(summary)})
        found_counts = dict(sorted(counts.items()))
    return {"lines": [section_line(s) for s in sections], "counts": counted, "summary": found,
            "summary_counts": found_counts, "abbreviations": abbreviations}


@rule(version=3, uses=(group_of, ranking), settings=("store",))
async def group_sections(ctx: KnowledgeContext, project: str, source: str, group: int) -> bytes:
    """One group of a source's facts as search sees it, as lines of bytes (`SourceSections.of`
    reads them): a head, then each of their sections in the order of the text and their
    summaries, as its line of sections.json with the index page that lists its fact. The head
    is JSON: how many lines follow ("lines"), their words' counts as one segment ("counts",
    kbuild.text.ranking.segment) and the abbreviations they define. Each fact spells its own
    lines, so an edit counts the sections of the fact it changed and joins its group's, not
    every fact's of the source.

    Bytes, not a value the engine spells: source_sections joins its groups' as they are, and the
    index takes the lines as they are. Spelled as a JSON value, each group was decoded and the
    source encoded again at each edit (28 ms of an edit's 0.5 s in a document of 2,000 chunks,
    benchmarks/edit_phases.py), and the index decoded every line of the project."""
    store = ctx.settings.store
    found = await group_of(ctx, project, source, group)
    page = await ctx.query_part(group_places(project, source), Part("page", group).name)  # a long source's group page
    index = store.source_part_index(project, source, page["page"]) if page else store.source_index(project, source)
    got = await ctx.query_all([fact_sections(project, source, s) for s in found.slugs], return_failures=True)
    made = [g for g in got if not isinstance(g, QueryFailed)]
    spelled = f'"source_index": {json.dumps(index, ensure_ascii=False)}'
    abbreviations: dict[str, str] = {}
    for g in made:  # in the order of the text: a term defined again means what it was defined as last
        abbreviations |= g["abbreviations"]
    lines = [line.replace(INDEX_PAGE, spelled, 1) for g in made for line in g["lines"]]
    lines += [g["summary"].replace(INDEX_PAGE, spelled, 1) for g in made if g["summary"]]
    counts = [c or {"_": 1} for g in made for c in g["counts"]]
    counts += [g["summary_counts"] or {"_": 1} for g in made if g["summary"]]
    head = json.dumps({"lines": len(lines), "counts": segment(counts), "abbreviations": abbreviations},
                      ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return "".join(f"{line}\n" for line in [head, *lines]).encode()


@rule(version=8)
async def source_sections(ctx: KnowledgeContext, project: str, source: str) -> bytes:
    """A source's groups' sections (group_sections), in the order of its text: joined as bytes,
    so an edit spells one group's sections, not the source's."""
    found = await ctx.query(fact_groups(project, source))
    groups = await ctx.query_all([group_sections(project, source, n) for n in range(len(found.groups))],
                                 return_failures=True)
    return b"".join(g for g in groups if not isinstance(g, QueryFailed))


@dataclass(frozen=True)
class SourceSections:
    """A source's sections and its facts' summaries, group after group, each as its line of
    sections.json (UTF-8); their words' counts as segments of the index, a group's each, in the
    same order; and the abbreviations its text defines."""

    lines: list[bytes]
    segments: list[Segment]
    abbreviations: dict[str, str]

    @classmethod
    def of(cls, joined: bytes) -> SourceSections:
        """What source_sections joined. Only each group's head is decoded: a line of sections.json
        holds no line break (JSON escapes it), and the index writes the lines as they are."""
        found = cls(lines=[], segments=[], abbreviations={})
        lines = joined.split(b"\n")  # the last is empty: each line ends with one
        at = 0
        while at < len(lines) - 1:
            head = json.loads(lines[at])
            found.lines.extend(lines[at + 1:at + 1 + head["lines"]])
            found.segments.append(head["counts"])
            # in the order of the text: a term defined again means what it was defined as last
            found.abbreviations.update(head["abbreviations"])
            at += 1 + head["lines"]
        return found


def index_folder(store: Any, project: str) -> str:
    return f"{store.project(project)}/search-index"


def render_sections(lines: list[bytes], abbreviations: dict[str, str]) -> bytes:
    """sections.json: the sections' lines (section_line) in the index's order, so a rebuilt
    index shows in `git diff` as the lines of the sections that changed."""
    head = f'{{"format": {FORMAT},\n"abbreviations": {json.dumps(abbreviations, sort_keys=True)},\n"docs": [\n'
    return head.encode() + b",\n".join(lines) + b"\n]}\n"


def index_files(made: list[SourceSections]) -> dict[str, bytes]:
    """The files of kb/PROJECT/search-index/ for its sources' sections, in the project's order:
    sections.json, and the bm25s index when there is a section to index."""
    lines = [line for found in made for line in found.lines]
    abbreviations = {short: long for found in made for short, long in found.abbreviations.items()}
    files = {"sections.json": render_sections(lines, abbreviations)}
    if lines:
        files.update(build_index([segment for found in made for segment in found.segments]))
    return files


@rule(version=5, uses=(index_folder, index_files, render_sections, SourceSections.of, ranking),
      settings=("store",), params={"bm25s": version("bm25s")})  # its version is in the files it writes
async def search_index(ctx: KnowledgeContext, project: str) -> int:
    """kb/PROJECT/search-index/: sections.json (what each section is and where it stands) and
    the bm25s index over their words; the number of sections."""
    outline = await ctx.query(project_outline(project))
    got = await ctx.query_all([source_sections(project, s) for s in outline.sources], return_failures=True)
    made = [SourceSections.of(found) for found in got if not isinstance(found, QueryFailed)]
    folder = index_folder(ctx.settings.store, project)
    for name, data in index_files(made).items():
        ctx.write(f"{folder}/{name}", data)
    return sum(len(found.lines) for found in made)
