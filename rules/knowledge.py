"""The default pipeline: sources -> raw copies -> text -> chunks -> facts and summaries -> indexes.

Every step is a rule on the engine's public API, and every rule reads as little as it can
(ARCHITECTURE.md §3, locality): a fact reads its own chunk, not the source; a chunk's query is
cut off when its text did not change, so one edited sentence reaches one fact and one summary.
Paths are computed here from validated ids, never taken from a model or a document.
"""
from __future__ import annotations

import asyncio
import re
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from kbuild.checks.grounding import triage, unsupported
from kbuild.checks.links import broken_links_in, links_in
from kbuild.checks.secrets import find_secrets, redact
from kbuild.engine import Problem, Query, QueryFailed, Rule, rule
from kbuild import meaning
from kbuild.engine.hashing import hash_bytes
from kbuild.meaning import classify
from kbuild.model import Backend
from kbuild.model.offline import clean, prose_sentences
from kbuild import slicing
from kbuild.slicing import Chunk, chunk_texts, slice_text
from kbuild.store.fetch import fetch_urls, meta_yml
from kbuild.store.layout import Store, link, slugify
from kbuild.store.links import needs_sources, rewrite_source_links, without_links
from kbuild.store import sources as sources_module
from kbuild.store.sources import DEFAULT_VIEWS, Source, SourcesError, parse, resolve_path

from .artifacts import VIEW_PURPOSE, built, complete, make_artifact_rules
from .guard import plain_text_failures, write_grounded

GROUP_FACTS = 12  # facts per summary group and view section: the most one changed fact costs
INDEX_LINES = 150  # an index longer than this gets another level instead of growing
PREVIOUS_CHARS = 600  # how much of the chunk before a model sees, for references to resolve (docs/design.md)
PICKS_PER_CHUNK = 3  # sentences of one chunk a default view may say
RESERVED = {"index", "text", "pages", "figures"}
URL_ENTRY = re.compile(r"^[\s-]*url\s*:", re.M)  # a source given by its address, in sources.yml
_convert_lock = threading.Lock()  # pymupdf is not thread-safe; conversions run one at a time
CONVERTER = ("kbuild.convert",)  # the converter's code is part of the text rule's fingerprint


def assign_slugs(chains: list[tuple[str, ...]]) -> list[str]:
    """A fact's file name: its section's heading, and its place within that section.

    Names come from headings, never from the words of the chunk, so that editing a sentence
    renames no fact and breaks no link into the source's other facts.
    """
    bases: dict[tuple[str, ...], str] = {}
    taken: set[str] = set()
    for chain in dict.fromkeys(chains):
        base = slugify(chain[-1]) if chain else "opening"
        if base in taken and len(chain) > 1:
            base = slugify(f"{chain[-2]} {chain[-1]}")
        if base in RESERVED:
            base = f"section-{base}"
        unique, n = base, 2
        while unique in taken:
            unique, n = f"{base}-{n}", n + 1
        bases[chain] = unique
        taken.add(unique)
    seen: Counter[tuple[str, ...]] = Counter()
    slugs = []
    for chain in chains:
        seen[chain] += 1
        slugs.append(bases[chain] if seen[chain] == 1 else f"{bases[chain]}-{seen[chain]}")
    return slugs


def _title(text: str, fallback: str) -> str:
    """A document's title: its highest heading near the top, of any level (many documents start
    at `##`), else `fallback` (the source's id)."""
    lines = text.splitlines()
    found: list[tuple[int, int, str]] = []  # (level, line, words)
    for i, line in enumerate(lines[:200]):
        stripped = line.strip()
        atx = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", stripped)
        if atx and atx.group(2):
            found.append((len(atx.group(1)), i, atx.group(2)))
            continue
        underline = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if stripped and len(underline) >= len(stripped) and len(set(underline)) == 1 and underline[0] in "=-~#*":
            found.append((1 if underline[0] in "=#*" else 2, i, stripped))
    return min(found)[2] if found else fallback


def _convert(data: bytes, name: str) -> Any:
    from kbuild.convert import convert  # pymupdf with it: imported when a source is converted

    with _convert_lock:
        return convert(data, name)


def _pages_phrase(pages: list[int] | None) -> str:
    if not pages:
        return ""
    first, last = pages
    return f", page {first}" if first == last else f", pages {first} to {last}"


def summaries_or_fail(values: list[Any], where: str) -> list[str]:
    """The summaries that were made; none at all fails (with the first failure below, if any):
    asking a model to summarise nothing would publish what it makes of nothing."""
    kept = [v for v in values if isinstance(v, str)]
    if not kept:
        raise next((v for v in values if isinstance(v, QueryFailed)), None) or Problem(f"{where}: nothing to summarise")
    return kept


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


HTML_TAG = re.compile(r"</?([a-zA-Z][a-zA-Z0-9-]*)(?=[\s/>])")  # a tag opens with its name: `x < y` is no tag


def lost_facts(span: str, got: dict[str, str]) -> list[str]:
    """What a reading lost: the chunk's numbers and requirement keywords that its rewrite does
    not keep, and a summary with no words in it. A reply of "..." says nothing and is refused."""
    failures = []
    said = clean(span)  # the part's words, not its markup (page markers, link targets, list numbers)
    missing = unsupported(said, [got["rewrite"]]) if any(ch.isalnum() for ch in said) else []
    numbers_and_keywords = [m for m in missing if not m.startswith(("`", "\""))]
    if numbers_and_keywords:
        failures.append(f"the rewrite leaves out {', '.join(numbers_and_keywords[:8])}, which the part states")
    failures += [f"the summary {problem}" for problem in plain_text_failures(got["summary"], span)]
    tags = set(HTML_TAG.findall(got["rewrite"])) - set(HTML_TAG.findall(span))
    if tags or "javascript:" in got["rewrite"].lower():
        failures.append("the rewrite holds HTML or a script the part does not; write Markdown")
    return failures


def place_quotes(quotes: list[str], sentences: list[str]) -> list[int]:
    """The sentences a model quoted, as their indices: the one a quote stands in or starts, else
    the one sharing at least 60% of the quote's words. A quote that matches no sentence is
    dropped: a view says only the source's own sentences."""
    def words(text: str) -> list[str]:
        return re.findall(r"\w+", text.lower())

    bags = [words(s) for s in sentences]
    found: list[int] = []
    for quote in quotes:
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


class KnowledgeBase:
    """The default rule set over one store, with one backend answering its questions."""

    def __init__(self, root: Path, store: Store, backend: Backend, floor_tokens: int, cap_tokens: int) -> None:
        self.root = root
        self.store = store
        self.backend = backend
        self.floor_tokens = floor_tokens
        self.cap_tokens = cap_tokens
        self.fetch_errors: dict[tuple[str, str], tuple[str, str]] = {}
        self.rules: list[Rule] = _make_rules(self)
        self._root_index = next(r for r in self.rules if r.name == "root_index")

    def projects(self) -> list[str]:
        folder = self.root / self.store.root
        return sorted(p.parent.name for p in folder.glob("*/sources.yml"))

    def targets(self) -> list[Query]:
        return [self._root_index(*self.projects())]

    def target_globs(self) -> list[str]:
        return [f"{self.store.root}/*/sources.yml"]  # what projects() lists

    def fetches(self) -> bool:
        """Whether a sources.yml lists a url: read as text, since parsing every sources.yml of a
        large store costs more than the rest of a build with nothing to do."""
        return any(URL_ENTRY.search(p.read_text(errors="replace"))
                   for p in (self.root / self.store.root).glob("*/sources.yml"))

    def before_build(self) -> list[str]:
        """Download url sources; a failure with no earlier copy is reported by the build itself."""
        if not self.fetches():
            return []
        self.fetch_errors = fetch_urls(self.root, self.store)
        return [f"{project}/{source}: {url} {why}; kept the copy fetched before"
                for (project, source), (url, why) in self.fetch_errors.items()
                if (self.root / self.store.raw_dir(project, source)).is_dir()]


def _make_rules(kb: KnowledgeBase) -> list[Rule]:
    store, backend = kb.store, kb.backend
    label = backend.label

    async def same_meaning(ctx, old, new):
        """A rebuilt text that means what the old one meant keeps the old text (meaning cutoff)."""
        return await classify(ctx, old, new, backend)

    @rule(uses=(sources_module,))
    async def listing(ctx, project):
        path = store.sources_file(project)
        try:
            data = ctx.read(path)
        except FileNotFoundError:
            raise Problem(f"{path} is missing; run `kbuild add {project} PATH` to create it") from None
        try:
            parsed = parse(data, path)
            return {**parsed.model_dump(), "ids": parsed.ids}
        except SourcesError as exc:
            raise Problem(str(exc)) from None

    @rule
    async def source_entry(ctx, project, source):
        listed = await ctx.query(listing(project))
        if source in listed["broken"]:
            raise Problem(listed["broken"][source])
        for entry in listed["sources"]:
            if entry["id"] == source:
                return entry
        raise Problem(f"{store.sources_file(project)} lists no source {source!r}")

    @rule
    async def problem(ctx, project, number):
        """A bad entry of sources.yml, failing on its own so the other sources still build."""
        raise Problem((await ctx.query(listing(project)))["problems"][number])

    @rule(version=1, uses=(meta_yml,))
    async def raw(ctx, project, source):
        entry = Source(**await ctx.query(source_entry(project, source)))
        where = f"{project}/{source}"
        original = store.original(project, source, entry.ext)
        if entry.path is not None:
            try:
                full = resolve_path(ctx.root, entry.path)
                data = ctx.read(full)
            except SourcesError as exc:
                raise Problem(f"{where}: {exc}") from None
            except FileNotFoundError:
                raise Problem(f"{where}: {entry.path} does not exist; fix its path in sources.yml or remove it") from None
            except IsADirectoryError:
                raise Problem(f"{where}: {entry.path} is a folder; list the files in it one by one") from None
            ctx.write(original, data)
            ctx.write(store.meta(project, source), meta_yml(entry, hash_bytes(data), len(data)))
        else:
            try:
                data = ctx.read(original)
            except FileNotFoundError:
                _, why = kb.fetch_errors.get((project, source), ("", "has not been downloaded (built with --no-fetch?)"))
                raise Problem(f"{where}: {entry.url} {why}") from None
        return {"path": original, "hash": hash_bytes(data), "bytes": len(data), "ext": entry.ext,
                "origin": entry.origin, "title": entry.title}

    @rule(version=1)
    async def source_pages(ctx, project):
        """Each source's origin (its path or url) and its index page: what a source's links are
        resolved against. Only sources with such links read it, and other edits of sources.yml
        (a title, a view) do not change it."""
        listed = await ctx.query(listing(project))
        return {s["path"] or s["url"]: store.source_index(project, s["id"]) for s in listed["sources"]}

    @rule(version=2, uses=(*CONVERTER, "kbuild.checks.secrets", "kbuild.checks.secret_kinds", "kbuild.store.links",
                           _title))
    async def text(ctx, project, source):
        got = await ctx.query(raw(project, source))
        data = ctx.read(got["path"])
        try:
            converted = await asyncio.to_thread(_convert, data, "original" + got["ext"])
        except Exception as exc:
            from kbuild.convert import ConversionError

            if not isinstance(exc, ConversionError):
                raise
            raise Problem(f"{project}/{source} ({got['origin']}): {exc}") from None
        for warning in converted.warnings:
            ctx.warn(f"{project}/{source}: {warning}")
        # Redacted here, where the words enter the graph: every page, model request, cached call
        # and logged call is built from this text, so none of them can hold a secret. Only raw/
        # keeps the source as it was (and images: a secret in the pixels of a page is not seen).
        found = [kind for t in (converted.text, *(f.text for f in converted.figures)) for kind in find_secrets(t)]
        if found:
            kinds = ", ".join(sorted(set(found)))
            ctx.warn(f"{project}/{source}: holds what looks like {kinds} ({len(found)} in all); raw/ keeps it, "
                     "every other page and every model call has it replaced by [secret removed]; rotate it if it is real")
        body = redact(converted.text)
        figure_words = {f.name: redact(f.text) for f in converted.figures}
        folder = store.facts_dir(project, source)
        own = {f"figures/{f.name}{ext}" for f in converted.figures for ext in (".md", ".png")}
        if converted.kind != "code" and needs_sources(body, own):  # in code, `handlers[kind](event)` is a call
            body = rewrite_source_links(body, got["origin"], store.text(project, source),
                                        await ctx.query(source_pages(project)), own)
        ctx.write(store.text(project, source), body)
        for number, png in enumerate(converted.pages, start=1):
            ctx.write(store.page_image(project, source, number), png)
        if converted.pages:
            lines = [f"- [page {n}](p-{n:03d}.png)" for n in range(1, len(converted.pages) + 1)]
            ctx.write(f"{folder}/pages/index.md", f"# Pages of {source}\n\nEach page of the original, "
                      f"rendered as an image.\n\n" + "\n".join(lines) + "\n")
        for figure in converted.figures:
            ctx.write(store.figure(project, source, figure.name, ".png"), figure.png)
            ctx.write(store.figure(project, source, figure.name, ".md"), figure_words[figure.name].rstrip() + "\n")
        if converted.figures:
            lines = [f"- [{f.name}]({f.name}.md) (page {f.page}, [image]({f.name}.png)): "
                     f"{(figure_words[f.name].strip().splitlines() or [''])[0][:100]}" for f in converted.figures]
            ctx.write(f"{folder}/figures/index.md", f"# Tables and figures of {source}\n\nCut from the "
                      f"pages of the original, each with its text beside it.\n\n" + "\n".join(lines) + "\n")
        return {
            "text": body,
            "kind": converted.kind,
            "title": got["title"] or _title(body, source),
            "original": Path(got["path"]).name,
            "pages": len(converted.pages),
            "figures": figure_words,
        }

    # Settings reach the graph as rule parameters (part of each rule's fingerprint), never through
    # the closure alone: a changed setting makes exactly the queries that read it stale.
    @rule(version=1, uses=(slicing, assign_slugs, _title),
          params={"floor_tokens": kb.floor_tokens, "cap_tokens": kb.cap_tokens})
    async def chunks(ctx, project, source):
        doc = await ctx.query(text(project, source))
        spans = slice_text(doc["text"], kb.floor_tokens, kb.cap_tokens, headings=doc["kind"] != "code")
        slugs = assign_slugs([c.headings for c in spans])
        return {
            "title": doc["title"],
            "original": doc["original"],
            "pages": doc["pages"],
            "figures": sorted(doc["figures"]),
            "chunks": [{"slug": s, "start": c.start, "end": c.end, "headings": list(c.headings),
                        "pages": list(c.pages) if c.pages else None} for s, c in zip(slugs, spans)],
        }

    @rule(version=2, uses=(context_before,))
    async def chunk(ctx, project, source, slug):
        """One chunk's words, where they stand and what comes just before: all a fact needs."""
        doc = await ctx.query(text(project, source))
        listed = (await ctx.query(chunks(project, source)))["chunks"]
        index = next((i for i, c in enumerate(listed) if c["slug"] == slug), None)
        if index is None:
            raise Problem(f"{project}/{source} has no chunk {slug!r} any more")
        here = listed[index]
        wanted = [here, *([listed[index - 1]] if index else [])]
        span, *before = chunk_texts(doc["text"], [Chunk(c["start"], c["end"], (), None, 0) for c in wanted])
        names = [name for name in doc["figures"] if f"figures/{name}." in span]
        figures = dict(zip(names, await ctx.query_all([figure_text(project, source, n) for n in names])))
        # Words only, not where they stand: lines added above a chunk move it without changing
        # it, and must not reach the model calls that read it.
        return {"text": span, "headings": here["headings"], "previous": context_before(before[0]) if before else "",
                "title": doc["title"], "figures": figures}

    @rule(params=backend.params("figure"), uses=(*backend.code, meaning, redact, "kbuild.checks.secret_kinds"),
          prompts=backend.prompts("figure"), cutoff=same_meaning)
    async def figure_text(ctx, project, source, name):
        doc = await ctx.query(text(project, source))
        png = ctx.read(store.figure(project, source, name, ".png"))
        # a model that reads the image may read a secret in its pixels
        return redact(await backend.describe_figure(ctx, png, doc["figures"][name], name, doc["title"]))

    @rule(version=1)
    async def default_views(ctx, project):
        """The default views of a project's kind, so that what reads them does not read every
        edit of sources.yml."""
        listed = await ctx.query(listing(project))
        return list(DEFAULT_VIEWS[listed["kind"]])

    @rule(params={**backend.params("reading"), "views": VIEW_PURPOSE, "picks": PICKS_PER_CHUNK},
          uses=(*backend.code, place_quotes, prose_sentences, redact, "kbuild.checks.secret_kinds", lost_facts, clean,
                plain_text_failures, without_links, "kbuild.checks.links", "kbuild.checks.grounding"),
          prompts=backend.prompts("reading"))
    async def reading(ctx, project, source, slug):
        """The one model call a chunk costs: its rewrite, its summary, and which of its sentences
        each default view should say. Everything else built from a chunk is code over this."""
        c = await ctx.query(chunk(project, source, slug))
        views = await ctx.query(default_views(project))
        page = kb.root / store.fact(project, source, slug)

        framing = " ".join([c["title"], *c["headings"]])

        def guardrail(got: dict[str, str]) -> list[str]:  # before the answer is taken: a reply that fails is asked again
            links = broken_links_in(got["rewrite"], page, kb.root / store.root, repeats=links_in(c["text"]))
            refused = triage(got["rewrite"], [c["text"], *c["figures"].values()], framing).refused
            return ([f"the rewrite {problem}" for problem in links] + lost_facts(c["text"], got)
                    + [f"the rewrite's \"{sentence[:60]}\" {why}" for sentence, why in refused])

        got = await backend.read_chunk(ctx, c["text"], c["headings"], c["title"], c["figures"], c["previous"],
                                       {v: VIEW_PURPOSE[v] for v in views}, PICKS_PER_CHUNK, check=guardrail)
        failures = guardrail(got)
        if failures:
            raise Problem(f"{project}/{source}/{slug}: {'; '.join(failures)}")
        sentences = prose_sentences(c["text"])
        # A summary stands in indexes at every depth of the store: it keeps a link's words only.
        return {"rewrite": redact(got["rewrite"]), "summary": redact(without_links(got["summary"])),
                "picks": {v: place_quotes(got["picks"].get(v, []), sentences) for v in views}}

    @rule(params=backend.params("reading"), uses=(*backend.code, meaning), cutoff=same_meaning)
    async def rewrite(ctx, project, source, slug):
        """The chunk rewritten to read on its own; a rewrite that means what the old one meant
        keeps the old words, and the fact page above it is not touched."""
        return (await ctx.query(reading(project, source, slug)))["rewrite"]

    @rule(version=2, params={**backend.params("grounding"), "label": label}, prompts=backend.prompts("grounding"),
          uses=(write_grounded, _pages_phrase, "kbuild.checks.grounding"))
    async def fact(ctx, project, source, slug):
        doc = await ctx.query(chunks(project, source))
        place = next(c for c in doc["chunks"] if c["slug"] == slug)
        c = await ctx.query(chunk(project, source, slug))
        rewritten = await ctx.query(rewrite(project, source, slug))
        page_path = store.fact(project, source, slug)
        original = store.original(project, source, Path(doc["original"]).suffix)
        where = f"Source: [{doc['original']}]({link(page_path, original)}){_pages_phrase(place['pages'])}. "
        where += f"[text.md](text.md) lines {place['start']} to {place['end']}."
        page = (f"{where}\n\n## Original\n\n{c['text']}\n## Rewritten\n\n{rewritten.strip()}\n\n"
                f"_Rewritten: {label}._ Up: [{doc['title']}](index.md)\n")
        framing = " ".join([c["title"], *c["headings"]])
        await write_grounded(ctx, backend, page_path, page, [(rewritten, [c["text"], *c["figures"].values()])], framing)
        return {"path": page_path, "hash": hash_bytes(page.encode())}

    @rule(params=backend.params("reading"), uses=(*backend.code, meaning), cutoff=same_meaning)
    async def chunk_summary(ctx, project, source, slug):
        return (await ctx.query(reading(project, source, slug)))["summary"]

    @rule(version=1)
    async def fact_groups(ctx, project, source):
        """The source's facts in groups of at most GROUP_FACTS, one section of the source each:
        what a summary level or a view section reads, so that one changed fact costs one group's
        worth of tokens, whatever the length of the source."""
        doc = await ctx.query(chunks(project, source))
        groups: list[dict[str, Any]] = []
        for c in doc["chunks"]:
            heads = c["headings"][1:] if c["headings"][:1] == [doc["title"]] else c["headings"]
            section = heads[0] if heads else doc["title"]
            if not groups or groups[-1]["section"] != section or len(groups[-1]["slugs"]) >= GROUP_FACTS:
                groups.append({"section": section, "slugs": []})
            groups[-1]["slugs"].append(c["slug"])
        return {"title": doc["title"], "groups": groups}

    @rule(params=backend.params("source summary"), uses=(complete, summaries_or_fail, plain_text_failures, *backend.code, meaning), prompts=backend.prompts("source summary"),
          cutoff=same_meaning)
    async def group_summary(ctx, project, source, group):
        found = await ctx.query(fact_groups(project, source))
        if group >= len(found["groups"]):
            raise Problem(f"{project}/{source} has no group {group} any more")
        slugs = found["groups"][group]["slugs"]
        kept = summaries_or_fail(complete(ctx, await ctx.query_all([chunk_summary(project, source, s) for s in slugs],
                                                                   return_failures=True)), f"{project}/{source}")
        return kept[0] if len(kept) == 1 else await backend.summarise_source(
            ctx, found["title"], kept, check=lambda text: plain_text_failures(text, "\n".join(kept)))

    @rule(params=backend.params("source summary"), uses=(complete, summaries_or_fail, plain_text_failures, *backend.code, meaning), prompts=backend.prompts("source summary"),
          cutoff=same_meaning)
    async def source_summary(ctx, project, source):
        found = await ctx.query(fact_groups(project, source))
        kept = summaries_or_fail(complete(ctx, await ctx.query_all([group_summary(project, source, n)
                                                                    for n in range(len(found["groups"]))],
                                                                   return_failures=True)), f"{project}/{source}")
        return kept[0] if len(kept) == 1 else await backend.summarise_source(
            ctx, found["title"], kept, check=lambda text: plain_text_failures(text, "\n".join(kept)))

    @rule(version=1, uses=(complete, built), params={"label": label})
    async def source_index(ctx, project, source):
        doc = await ctx.query(chunks(project, source))
        slugs = [c["slug"] for c in doc["chunks"]]
        got = complete(ctx, await ctx.query_all([*(fact(project, source, s) for s in slugs),
                                                 *(chunk_summary(project, source, s) for s in slugs),
                                                 source_summary(project, source)], return_failures=True))
        facts, summaries, summary = got[:len(slugs)], got[len(slugs):-1], got[-1]
        if isinstance(summary, QueryFailed):
            summary = "(no summary: a part of this source failed; run `kbuild` to see why)"
        entries = []
        for c, f, s in zip(doc["chunks"], facts, summaries):
            if isinstance(f, QueryFailed) or isinstance(s, QueryFailed):
                entries.append((c, f"- {c['slug']}: not built; run `kbuild` to see why"))
                continue
            where = f"lines {c['start']}-{c['end']}" + (_pages_phrase(c["pages"]).replace(",", ";") if c["pages"] else "")
            entries.append((c, f"- [{c['slug']}]({c['slug']}.md) ({where}): {s}"))
        folder = store.facts_dir(project, source)
        links = ["- [text.md](text.md): the whole source as text, no model involved"]
        if doc["pages"]:
            links.append("- [pages/](pages/index.md): each page as an image")
        if doc["figures"]:
            links.append("- [figures/](figures/index.md): tables and figures cut from the pages")
        head = (f"# {doc['title']}\n\nUp: [{project}](../../index.md) · [all sources](../index.md)\n\n"
                f"{summary}\n\n_Summaries: {label}._\n\n"
                + "\n".join(links) + "\n\n## Facts, in source order\n\n")
        if len(entries) <= INDEX_LINES:
            ctx.write(store.source_index(project, source), head + "\n".join(e for _, e in entries) + "\n")
        else:  # another level: one sub-index per top-level section
            groups: dict[str, list[str]] = {}
            for c, line in entries:
                groups.setdefault(c["headings"][0] if c["headings"] else doc["title"], []).append(line)
            names = assign_slugs([(g,) for g in groups])
            lines = []
            for (group, group_lines), name in zip(groups.items(), names):
                ctx.write(f"{folder}/index-{name}.md", f"# {doc['title']} › {group}\n\nBack to [the source's index]"
                          f"(index.md).\n\n" + "\n".join(group_lines) + "\n")
                lines.append(f"- [{group}](index-{name}.md): {len(group_lines)} facts")
            ctx.write(store.source_index(project, source), head + "\n".join(lines) + "\n")
        return {"title": doc["title"], "summary": summary, "facts": built(facts)}

    @rule(params=backend.params("abstract"), uses=(complete, plain_text_failures, *backend.code, meaning), prompts=backend.prompts("abstract"),
          cutoff=same_meaning)
    async def abstract(ctx, project):
        outline = await ctx.query(project_outline(project))
        indexes = complete(ctx, await ctx.query_all([source_index(project, s) for s in outline["sources"]],
                                                    return_failures=True))
        summaries = [f"{i['title']}: {i['summary']}" for i in indexes if not isinstance(i, QueryFailed)]
        if not outline["sources"]:
            return "No sources yet."
        if not summaries:
            raise Problem(f"{project}: no source of it has a summary yet")
        return await backend.abstract(ctx, outline["title"], summaries,
                                      check=lambda text: plain_text_failures(text, "\n".join(summaries)))

    @rule(version=1)
    async def project_outline(ctx, project):
        """The project's title and source ids: what its abstract depends on, and not where each
        source lives (a moved file must not reach the model)."""
        listed = await ctx.query(listing(project))
        return {"title": listed["title"] or project, "sources": listed["ids"]}

    artifact_rules = make_artifact_rules(kb, {"listing": listing, "chunk": chunk, "fact_groups": fact_groups,
                                              "reading": reading, "fact": fact, "default_views": default_views},
                                         same_meaning)
    artifacts_rule = next(r for r in artifact_rules if r.name == "artifacts")

    @rule(version=1, uses=(complete,), params={"label": label})
    async def project_index(ctx, project):
        listed = await ctx.query(listing(project))
        await ctx.query_all([problem(project, n) for n in range(len(listed["problems"]))], return_failures=True)
        ids = listed["ids"]
        got = complete(ctx, await ctx.query_all([*(raw(project, s) for s in ids), *(source_index(project, s) for s in ids),
                                                 abstract(project), artifacts_rule(project)], return_failures=True))
        raws, indexes, (summary, made) = got[:len(ids)], got[len(ids):-2], got[-2:]
        if isinstance(summary, QueryFailed):
            summary = "(no abstract: a source of this project failed; run `kbuild` to see why)"
        title = listed["title"] or project
        base = store.project(project)
        raw_lines, fact_lines, source_lines = [], [], []
        for sid, r, i in zip(ids, raws, indexes):
            if not isinstance(r, QueryFailed):
                raw_lines.append(f"- [{sid}]({sid}/{Path(r['path']).name}): from {r['origin']}, {r['bytes']} bytes "
                                 f"([meta.yml]({sid}/meta.yml))")
            if isinstance(i, QueryFailed):
                source_lines.append(f"- {sid}: not built; run `kbuild` to see why")
                continue
            fact_lines.append(f"- [{sid}]({sid}/index.md): {i['title']}, {i['facts']} facts")
            source_lines.append(f"- [{i['title']}](facts/{sid}/index.md) ({sid}): {i['summary']}")
        kind = "research project (sources arrive as found; no specs)" if listed["kind"] == "research" else "project"
        ctx.write(f"{base}/index.md", (
            f"# {title}\n\nUp: [all projects](../index.md)\n\n{summary}\n\n_A {kind}. Summaries: {label}._\n\n"
            f"## Sources\n\n" + ("\n".join(source_lines) or "No sources yet: `kbuild add " + project + " PATH`.")
            + "\n\n## Folders\n\n"
            "- [raw/](raw/index.md): each source exactly as fetched, never edited\n"
            "- [facts/](facts/index.md): each source as text, cut into facts, each with its summary\n"
            + (f"- [artifacts/](artifacts/index.md): {made['views']} views and {made['specs']} specs written from the facts\n"
               if not isinstance(made, QueryFailed) else "- artifacts/: not built; run `kbuild` to see why\n") +
            "- [sources.yml](sources.yml): the list of sources, written by people\n"))
        ctx.write(f"{base}/raw/index.md", f"# Raw sources of {title}\n\nUp: [{project}](../index.md)\n\nEach source exactly as fetched, "
                  "never edited, with where it came from.\n\n" + "\n".join(raw_lines) + "\n")
        ctx.write(f"{base}/facts/index.md", f"# Facts of {title}\n\nUp: [{project}](../index.md)\n\nOne folder per source: its text, its "
                  "facts and their summaries.\n\n" + "\n".join(fact_lines) + "\n")
        return {"title": title, "abstract": summary, "kind": listed["kind"], "sources": len(fact_lines)}

    @rule(version=1, uses=(complete,))
    async def root_index(ctx, *projects):
        indexes = complete(ctx, await ctx.query_all([project_index(p) for p in projects], return_failures=True))
        lines = [f"- [{i['title']}]({p}/index.md) ({p}, {i['sources']} sources): {i['abstract']}"
                 if not isinstance(i, QueryFailed) else f"- {p}: not built; run `kbuild` to see why"
                 for p, i in zip(projects, indexes)]
        body = "\n".join(lines) if lines else "No projects yet: `kbuild add PROJECT PATH_OR_URL` starts one."
        ctx.write(store.index(), f"# Knowledge base\n\nOne line per project.\n\n{body}\n")
        return len(projects)

    return [listing, source_entry, problem, raw, source_pages, text, chunks, figure_text, chunk, default_views, reading, rewrite, fact,
            chunk_summary, fact_groups, group_summary, source_summary,
            source_index, abstract, project_outline, project_index, root_index, *artifact_rules]
