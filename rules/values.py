"""The values the pipeline's queries return, typed: what one page's rule reads of another.

Each is stored as its JSON (the engine hashes that for early cutoff) and read back as its model,
once per build, whoever reads it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

PartKind = Literal["header", "region", "words", "tail", "chunk", "group", "page", "names", "concept"]


@dataclass(frozen=True)
class Part:
    """The name of one entry of a parted query's value (`@rule(parts=True)`), which a reader
    reads alone (`ctx.query_part`): a kind and which one of it. Spelled here only, so the rule
    that makes the value and the readers of an entry cannot disagree; the spelling is in every
    lock, so changing it rebuilds every store."""

    kind: PartKind
    which: int | str | None = None

    @property
    def name(self) -> str:
        return self.kind if self.which is None else f"{self.kind}:{self.which}"


HEADER, TAIL, NAMES = Part("header"), Part("tail"), Part("names")


class Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RawCopy(Value):
    """A source as fetched, in raw/."""

    path: str
    hash: str
    bytes: int
    ext: str
    origin: str  # its path or url
    title: str | None
    kind: str = "document"  # or "note": Markdown with front matter (kbuild.notes.note)


class SourceText(Value):
    """A source converted to text.md, with its figures' words."""

    text: str
    kind: str  # "code", "prose", ...: code is not cut at headings
    title: str
    original: str  # the raw file's name
    pages: int
    figures: dict[str, str]


class Place(Value):
    """Where a chunk stands in text.md, and the headings it sits under."""

    slug: str
    start: int
    end: int
    headings: list[str]  # the heading chain in force where it starts
    covers: list[str]  # every heading it holds text of: its index line and breadcrumb name each
    pages: list[int] | None
    region: int  # the region of the text it is in (text_regions), whose query holds its words
    index: int  # its number among the region's chunks, from 0


class RegionPlace(Value):
    """Where one of a region's chunks stands: a Chunk (kbuild.text.slicing) before it is named."""

    start: int
    end: int
    headings: list[str]
    covers: list[str]
    levels: list[int]
    continued: bool
    pages: list[int] | None


class RegionPlaces(Value):
    """Where each of one region's chunks stands (region_places)."""

    places: list[RegionPlace]


class SourceRegions(Value):
    """What the source's chunks say of it, and how many regions its text is in (text_regions)."""

    title: str
    original: str
    code: bool
    pages: int
    figures: list[str]
    regions: int


class Chunks(Value):
    """How a source is cut: where each chunk stands (its words are in region_chunks)."""

    title: str
    original: str
    code: bool  # the source is code: what looks like a link in its quote is code
    pages: int
    figures: list[str]
    chunks: list[Place]


class GroupPart(Value):
    """One group of fact_groups with the source's title: a part of group_places, which a query
    of one group reads alone."""

    title: str
    section: str
    slugs: list[str]


class GroupPagePart(Value):
    """What a long source's group index page shows: its page's name, which of its section's
    pages it is (0 for the first), and where its facts stand; a part of group_places."""

    page: str
    nth: int
    places: list[Place]


class SourceHeader(Value):
    """What every fact page shows of its source: held in each part of chunk_places, beside the
    chunk's Place."""

    title: str
    original: str
    code: bool


class Span(Value):
    """One chunk's words and the end of the text before it (what references resolve against),
    None for the first of its region (the region before holds it): a part of region_chunks,
    which its chunk query alone reads."""

    text: str
    headings: list[str]
    previous: str | None


class ChunkText(Value):
    """All a fact needs: its chunk's words, headings, what comes just before, and its figures."""

    text: str
    headings: list[str]
    previous: str
    title: str
    figures: dict[str, str]


class Reading(Value):
    """The one model call a chunk costs: rewrite, summary, and which sentences each default view says."""

    rewrite: str
    summary: str
    picks: dict[str, list[int]]


class Page(Value):
    path: str
    hash: str


class Group(Value):
    section: str
    slugs: list[str]


class FactGroups(Value):
    title: str
    groups: list[Group]


class SourceIndex(Value):
    title: str
    summary: str
    facts: int  # built
    failed: int  # facts whose pages failed to build


class Outline(Value):
    title: str
    sources: list[str]


class ProjectIndex(Value):
    title: str
    abstract: str
    kind: str
    sources: int  # listed
    failed: list[str]  # of them, those whose pages failed to build


class Statement(Value):
    text: str
    cites: list[str]  # fact refs, "<source>/<slug>"


class Section(Value):
    """One section of a view: what one group of a source's facts says to it."""

    origin: str  # the project of the facts it cites
    source: str
    title: str
    statements: list[Statement]


class SaidSection(Value):
    """A view section as its page says it: its title, and each statement with its line, links
    and all."""

    title: str
    statements: list[tuple[str, str]]  # (the statement, its line on the page)


class ViewBlock(Value):
    """Up to BLOCK_GROUPS sections of one source in a view, as its page says them."""

    sections: list[SaidSection]


class ViewPage(Value):
    """What the views' index shows of a view page."""

    path: str
    summary: str
    gap: bool


class SpecPage(Value):
    path: str
    requirements: int
    view: str


class Made(Value):
    views: int  # built
    specs: int  # built
    failed: int  # views and specs that failed to build
