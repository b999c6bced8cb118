"""Retrieval: the sections of the facts, ranked by BM25 over their own words, and a context cut to a budget.

The build writes one index per project (kb/PROJECT/search-index/, bm25s; rules/search_index.py):
every fact cut into its sections, each indexed by its Original and Rewritten words, its
breadcrumb and its fact's summary. A store built before that index existed is searched over its
index lines, as before. Every lookup is logged in .kbuild/lookups.jsonl, so `kbuild search
--misses` can show what the store failed to answer.
"""
from __future__ import annotations

import datetime
import json
import math
import os
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ..text.markdown import ATX_HEADING, UNDERLINE, visible_text
from ..text.ranking import SectionIndex, compounds, query_terms, rank, spelled_out
from ..text.tokens import estimate_tokens
from ..store.pages import rewritten_part
from .expansion import Expansion, expand, read_glossaries

if TYPE_CHECKING:
    import numpy as np

    from ..buildfile import Buildfile
    from .embedding import QuestionEmbedder
    from ..engine import Engine

ENTRY = re.compile(r"^- \[([^\]]+)\]\(([^)]+)\)(.*)$")


@dataclass(frozen=True)
class Hit:
    score: float
    page: str  # the page the index line links to, relative to the build root
    index: str  # the index the line stands in
    line: str
    # what ranked it: "section" (the search index: a fact's best section or summary) or "index
    # line" (the other pages, views and specs, by BM25 over the index lines): two scales
    ranked_by: Literal["section", "index line"] = "section"


def store_folder(spec: Buildfile) -> Path:
    """Where the index pages are: the knowledge base's store, or kb/ as `kbuild init` makes it."""
    return spec.root / (spec.application.store.root if spec.application is not None else "kb")


class UnknownProject(ValueError):
    """A project argument that is not one of the store's: its message names the ones there are."""


def store_projects(store: Path) -> list[str]:
    """The store's projects: its folders (not links to folders) that hold a sources.yml or an index.md."""
    if not store.is_dir():
        return []
    return sorted(p.name for p in store.iterdir() if p.is_dir() and not p.is_symlink()
                  and ((p / "sources.yml").is_file() or (p / "index.md").is_file()))


def project_folder(store: Path, project: str | None) -> Path:
    """The folder a lookup reads: the whole store, or one of its projects named as it is (a path
    such as `../..` or `/` names no project; a lookup never reads outside the store)."""
    if not project:
        return store
    known = store_projects(store)
    if project not in known:
        raise UnknownProject(f"no project {project!r} in the store; the projects are: {', '.join(known) or 'none'}")
    return store / project


def index_lines(store: Path, root: Path, project: str | None = None) -> list[tuple[str, str, str]]:
    """(index, linked page, line) for every entry line of every generated index."""
    base = project_folder(store, project)
    rows = []
    for index in sorted(base.rglob("index*.md")):
        if "/raw/" in index.as_posix():
            continue
        # Paths as strings, relative to the root once per index: pathlib and relpath per line
        # were three quarters of a search over 100,000 lines.
        name = index.relative_to(root).as_posix()
        folder = os.path.dirname(name)
        for line in index.read_text("utf-8", errors="replace").splitlines():
            match = ENTRY.match(line)
            if match:
                rows.append((name, posixpath.normpath(posixpath.join(folder, match.group(2))), line))
    return rows


# The other names a glossary gives a question's terms count half a word of the question each: a
# name is another only where its source says so ("the session ID content (or value)"), and at
# full weight "value" drew a question about a pepper's secret value to the session sheet
# (issue 53: OWASP at 10,000 tokens 0.98 -> 0.96; at half, the gain stays and nothing is lost).
ALSO_WEIGHT = 0.5
INDEX_FOLDER = "search-index"
INDEX_FORMAT = 1
VECTORS_FORMAT = 1  # of vectors.json (rules/search_vectors.py)
# Reciprocal rank fusion (Cormack, Clarke and Buettcher, 2009): a section scores 1/(K + its
# place by words) + 1/(K + its place by meaning). Ranks, not scores, because a BM25 score and a
# cosine are on scales that cannot be compared (BM25 grows with the question's length, a cosine
# does not); K = 60 is the paper's, which damps the difference between the first few places.
# Equal weights, and every section of the shortlist by meaning counts: measured with
# all-MiniLM-L6-v2 on three golden sets (docs/retrieval.md), meaning at half weight, or withheld
# from sections whose words match less than half (or a tenth, or a fifth) as well as the best,
# lost questions a reader asks in words the source does not use: those are found by meaning
# alone, often beside a weak word match. (The 64-dimension static model those rules were made
# for was dropped: it added nothing on any set.) A section far down both rankings still cannot
# outrank one near the top of both. Only the `depth` nearest in meaning take part (one shortlist
# across the projects asked), and none less near than `min_cosine` (0.25 by default: over the
# golden sets' stores, all-MiniLM-L6-v2 puts the section nearest to each of eight questions on
# other subjects ("recipe for lasagna") at 0.24 at most, and every answer meaning found at 0.26
# or more; at 0.3 the unseen set lost a question), so a question nothing speaks to is still a
# gap. At a depth of 10, no set lost a question to words alone at any budget; at 20 and 30,
# sections near in meaning only pushed what the words found on the PEPs out of 2,500 tokens
# (0.96 by words alone, 0.89 and 0.91 fused).
RRF_K = 60
# A budget takes one section nearest in meaning for every so many of its tokens, and at least the
# setting's `depth`: 10 up to 5,000 tokens, 20 at 10,000, 30 at 15,000. A question in other words
# than the source's has only meaning to find its answer by, and over twenty OWASP sheets in four
# projects the unseen set's answers stayed out of 15,000 tokens at 10 (0.84; 0.94 with this),
# while no store or budget measured lost a question (docs/retrieval.md). A deeper shortlist at
# small budgets did lose: sections near in meaning and weak in words pushed out what the words
# found (PEPs at 2,500, depth 20: 0.89 against 0.96).
TOKENS_PER_NEAREST = 500


@dataclass
class Ranked:
    score: float  # BM25, or the fused score when ranked by meaning too
    doc: dict[str, object]
    why: list[tuple[str, float]]  # each matched word with its share of the BM25 score
    lexical: int | None = None  # its place (1 = first) by words, None when no word matched
    semantic: int | None = None  # its place by meaning, None when not among the nearest (or not asked)


@dataclass
class Meaning:
    """What ranking by meaning did for one question: None of it when it was not asked."""

    embedder: str = ""
    notes: list[str] = field(default_factory=list)  # why an index was ranked by words only


def question_embedder(spec: Buildfile, engine: Engine) -> QuestionEmbedder | None:
    """The embedder of the questions when the Kbuildfile turns semantic ranking on, else None.
    Read off the application by name: an application other than the knowledge base may have none."""
    settings = getattr(spec.application, "semantic", None)
    if settings is None:
        return None
    from .embedding import QuestionEmbedder

    return QuestionEmbedder(settings, engine.state_dir, engine.cache_dir)


class SearchIndex:
    """One project's kb/PROJECT/search-index/ (rules/search_index.py), loaded once per change."""

    def __init__(self, folder: Path) -> None:
        # sections.json holds one section a line (rules/search_index.py): a section is parsed
        # when a query ranks it, not when the index loads (at 100,000 sections, parsing them
        # all would cost more than the query).
        lines = (folder / "sections.json").read_text("utf-8").split("\n")
        if lines[0] != f'{{"format": {INDEX_FORMAT},' or lines[2] != '"docs": [':
            raise ValueError(f"{folder}/sections.json is not index format {INDEX_FORMAT}; run `kbuild`")
        self.abbreviations: dict[str, str] = json.loads(lines[1].removeprefix('"abbreviations": ').rstrip(","))
        self._lines = [line for line in lines[3:] if line.startswith("{")]
        self._docs: dict[int, dict[str, object]] = {}
        self.index = SectionIndex(folder) if self._lines else None
        self.folder = folder
        self._vectors: tuple[dict[str, object], np.ndarray] | None = None

    def doc(self, n: int) -> dict[str, object]:
        found = self._docs.get(n)
        if found is None:
            found = self._docs[n] = json.loads(self._lines[n].rstrip(","))
        return found

    def ranked(self, query: str, also: str = "") -> list[tuple[int, float, list[tuple[str, float]]]]:
        """(section number, score, why: each matched word with its share of the score), best
        first; ties in the order of the index, so a ranking is reproducible. `also`: other names
        the glossary gives the question's terms, each word counting ALSO_WEIGHT of one of its own."""
        if self.index is None:
            return []
        weights = compounds(query, query_terms(query, self.abbreviations), self.index.vocabulary)
        for term, weight in query_terms(also, self.abbreviations).items() if also else ():
            weights[term] = max(weights.get(term, 0.0), ALSO_WEIGHT * weight)
        return self.index.ranked(weights)

    def __len__(self) -> int:  # its sections
        return len(self._lines)

    def frequency(self, term: str) -> int:
        """How many of the index's sections hold `term` (a stemmed word), read off bm25s's postings."""
        n = self.index.vocabulary.get(term) if self.index is not None else None
        if n is None:
            return 0
        starts = self.index.retriever.scores["indptr"]
        return int(starts[n + 1] - starts[n])

    def vectors(self) -> tuple[dict[str, object], np.ndarray] | None:
        """vectors.json and vectors.npy (memory-mapped), or None when the build made none."""
        meta_file = self.folder / "vectors.json"
        if self._vectors is None and meta_file.exists():
            import numpy as np

            meta = json.loads(meta_file.read_text("utf-8"))
            matrix = np.load(self.folder / "vectors.npy", mmap_mode="r", allow_pickle=False)
            if meta.get("format") != VECTORS_FORMAT or len(matrix) != len(self._lines):
                return None  # a build that failed to embed left the vectors of the sections before
            self._vectors = (meta, matrix)
        return self._vectors

    def nearest(self, vector: np.ndarray, limit: int) -> list[tuple[int, float]]:
        """(section number, cosine), nearest first, ties in the order of the index."""
        found = self.vectors()
        return nearest(found[1], vector, limit) if found is not None else []


def nearest(matrix: np.ndarray, vector: np.ndarray, limit: int) -> list[tuple[int, float]]:
    """(row, cosine) of the `limit` rows nearest `vector` (all normalised), ties in row order."""
    import numpy as np

    if not len(matrix):
        return []
    cosines = np.asarray(matrix @ vector.astype(np.float32))
    # the `limit` best found without sorting every row (100,000 rows: 60 ms sorted), then ordered
    head = np.argpartition(-cosines, limit)[:limit] if len(cosines) > limit else np.arange(len(cosines))
    best = sorted(head.tolist(), key=lambda n: (-cosines[n], n))
    return [(n, float(cosines[n])) for n in best if cosines[n] > 0]


_loaded: dict[Path, tuple[tuple[tuple[int, int], ...], SearchIndex]] = {}  # the MCP server asks many times


def search_indexes(store: Path, project: str | None = None) -> list[SearchIndex]:
    found = []
    pattern = f"{INDEX_FOLDER}/sections.json"
    for path in sorted(project_folder(store, project).glob(pattern) if project else store.glob(f"*/{pattern}")):
        key = tuple((s.st_mtime_ns, s.st_size) for s in (p.stat() for p in sorted(path.parent.iterdir())))
        cached = _loaded.get(path)
        if cached is None or cached[0] != key:
            cached = _loaded[path] = (key, SearchIndex(path.parent))
        found.append(cached[1])
    return found


def ranked_docs(store: Path, query: str, project: str | None = None, embedder: QuestionEmbedder | None = None,
                meaning: Meaning | None = None, also: str = "", depth: int = 0) -> list[Ranked]:
    """The sections of every index, best first: by BM25 over their words; with an embedder, by
    reciprocal rank fusion of that ranking and the one by cosine to the question's vector
    (indexes whose vectors another embedder made, or none, are ranked by words only; `meaning`
    collects why). `depth`: how many sections nearest in meaning take part, when more than the
    embedder's setting."""
    indexes = search_indexes(store, project)
    found = [(score, at, n, why) for at, index in enumerate(indexes) for n, score, why in index.ranked(query, also)]
    lexical = sorted(_on_one_scale(indexes, found) if len(indexes) > 1 else found,
                     key=lambda r: -r[0])  # stable: ties keep each index's own order
    rows = {(at, n): Ranked(score, indexes[at].doc(n), why, lexical=place)
            for place, (score, at, n, why) in enumerate(lexical, start=1)}
    if embedder is None:
        return list(rows.values())
    meaning = meaning if meaning is not None else Meaning()
    meaning.embedder = embedder.embedder.describe()
    usable = [at for at, index in enumerate(indexes) if _vectors_usable(index, embedder, meaning)]
    if not usable:
        return list(rows.values())
    vector = embedder.vector(" ".join(part for part in (query, also, spelled_out(query)) if part))
    # one shortlist across the projects: each index's `depth` nearest, then the `depth` nearest of those
    depth = max(depth, embedder.depth)
    by_meaning = sorted(((cosine, at, n) for at in usable for n, cosine in indexes[at].nearest(vector, depth)
                         if cosine >= embedder.min_cosine), key=lambda r: -r[0])[:depth]
    for place, (_, at, n) in enumerate(by_meaning, start=1):
        row = rows.get((at, n))
        if row is None:
            row = rows[(at, n)] = Ranked(0.0, indexes[at].doc(n), [])
        row.semantic = place
    for row in rows.values():
        row.score = ((1 / (RRF_K + row.lexical) if row.lexical else 0.0)
                     + (1 / (RRF_K + row.semantic) if row.semantic else 0.0))
    # ties (equal ranks) go to the better place by words, then by meaning: reproducible
    return sorted(rows.values(), key=lambda r: (-r.score, r.lexical or len(rows) + 1, r.semantic or len(rows) + 1))


def _idf(sections: int, holding: int) -> float:
    return math.log(1 + (sections - holding + 0.5) / (holding + 0.5))  # bm25s's (Lucene's) idf


def _on_one_scale(indexes: list[SearchIndex], found: list[tuple[float, int, int, list[tuple[str, float]]]]
                  ) -> list[tuple[float, int, int, list[tuple[str, float]]]]:
    """The sections of several projects' indexes scored as if in one index: each matched word's
    share rescaled from its rarity in its own project to its rarity in all of them. Each project
    has an index of its own, and a word everywhere in one project ("injection" in the SQL
    injection sheet) is rare in another that mentions it once: scored per project, that one
    mention outranked the sections that are about it (issue 53)."""
    terms = {term for *_, why in found for term, _ in why}
    holding = [{term: index.frequency(term) for term in terms} for index in indexes]
    sizes = [len(index) for index in indexes]
    everywhere = {term: _idf(sum(sizes), sum(h[term] for h in holding)) for term in terms}
    rescaled = []
    for _, at, n, why in found:
        shares = sorted(((term, share * everywhere[term] / _idf(sizes[at], holding[at][term])) for term, share in why),
                        key=lambda x: (-x[1], x[0]))
        rescaled.append((sum(share for _, share in shares), at, n, shares))
    return rescaled


def _vectors_usable(index: SearchIndex, embedder: QuestionEmbedder, meaning: Meaning) -> bool:
    found = index.vectors()
    where = index.folder.parent.name
    if found is None:
        meaning.notes.append(f"{where}: no semantic vectors for its sections as they are (run `kbuild`); "
                             "ranked by words only")
        return False
    if found[0].get("embedder") != embedder.identity:
        meaning.notes.append(f"{where}: its vectors were made by another embedder than the Kbuildfile's "
                             "(run `kbuild`); ranked by words only")
        return False
    return True


def expanded(store: Path, question: str, project: str | None) -> Expansion:
    """The question with the other names its projects' glossaries give the terms it names."""
    return expand(question, read_glossaries(store, [project] if project else store_projects(store)))


def breadcrumb(doc: dict[str, object]) -> list[str]:
    """Where a section stands, as a reader is shown it: its title and the headings over its first
    line (`path`, where that differs from the `crumb` its words are searched by: a part that runs
    into the next heading lists that heading in its crumb, not under it)."""
    return doc.get("path") or doc["crumb"]  # type: ignore[return-value]


def _line(doc: dict[str, object]) -> str:
    crumb = " › ".join(breadcrumb(doc))
    return f"- [{crumb}]({doc['page']}): {doc['line']}"


def search(store: Path, root: Path, query: str, project: str | None = None, limit: int = 5,
           embedder: QuestionEmbedder | None = None) -> list[Hit]:
    """The pages best matching `query`: fact pages by their best section or summary, then (or,
    in a store with no search index yet, only) the index lines of the other pages, views and specs."""
    hits: list[Hit] = []
    seen: set[str] = set()
    expansion = expanded(store, query, project)
    query = expansion.query
    for row in ranked_docs(store, expansion.question, project, embedder, also=expansion.also):
        page = str(row.doc["page"])
        if page not in seen:
            seen.add(page)
            score = round(row.score, 4 if embedder else 3)  # a fused score is a sum of 1/(60 + rank): small
            hits.append(Hit(score, page, str(row.doc.get("source_index", "")), _line(row.doc)))
    if len(hits) < limit:
        rows = [r for r in index_lines(store, root, project) if not (seen and "/facts/" in r[1])]
        for i, score in rank([line for _, _, line in rows], query):
            if rows[i][1] not in seen:
                seen.add(rows[i][1])
                hits.append(Hit(round(score, 3), rows[i][1], rows[i][0], rows[i][2], "index line"))
    return hits[:limit]


def log_lookup(log: Path, query: str, project: str | None, hits: list[Hit]) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    record = {"at": datetime.datetime.now().isoformat(timespec="seconds"), "query": query, "project": project,
              "hits": len(hits), "best": hits[0].score if hits else 0.0, "top": hits[0].page if hits else None}
    with log.open("a") as out:
        out.write(json.dumps(record) + "\n")


def misses(log: Path) -> list[dict[str, object]]:
    if not log.exists():
        return []
    records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [r for r in records if not r["hits"]]


@dataclass
class Section:
    key: str  # the breadcrumb and where the words stand
    score: float
    hits: list[Hit]  # the page it is drawn from, with its one-line summary
    text: str = ""  # the section alone, under its breadcrumb and a link to its page
    tokens: int = 0  # what it added to the context as printed (render_sections)
    why: list[tuple[str, float]] = field(default_factory=list)  # each matched word with its share of the score
    places: str = ""  # its place in the ranking by words and in the one by meaning, when fused
    lines: Lines | None = None  # where its words stand in text.md; None for a whole fact page


@dataclass(frozen=True)
class Lines:
    text: Path  # text.md
    start: int
    end: int
    crumb: tuple[str, ...]  # the document's title, then the headings over the words


HEADER = "# Context: {question}\n\n"
ALSO = "## Also relevant (summaries)\n\n"
GAP = ("Nothing in the store speaks to this: a gap. Add a source that does (`kbuild add`), rather than guessing.\n")


def _section_text(doc: dict[str, object], body: str) -> str:
    crumb = " › ".join(breadcrumb(doc))
    return f"## {crumb}\n\nFrom [{Path(str(doc['page'])).stem}]({doc['page']}), text.md lines {doc['start']}-{doc['end']}:\n\n{body}\n\n"


Texts = dict[Path, list[str]]  # the lines of each text.md one context read, each read once


def _body(texts: Texts, text: Path, start: int, end: int) -> str:
    lines = texts.get(text)
    if lines is None:
        lines = texts[text] = text.read_text("utf-8", errors="replace").split("\n")
    return "\n".join(lines[start - 1:end]).strip("\n")


def _without_named_headings(body: str, crumb: tuple[str, ...]) -> str:
    """The body less the heading lines it opens with that its breadcrumb names already (a Markdown
    "## Title", or reStructuredText's title over its underline), read as the breadcrumb was."""
    named = set(crumb)
    lines = body.split("\n")
    n = 0
    while n < len(lines):
        line = lines[n].strip()
        atx = ATX_HEADING.match(line)
        if not line or UNDERLINE.match(line):
            n += 1
        elif (atx and visible_text(atx.group(2) or "") in named) or (
                n + 1 < len(lines) and UNDERLINE.match(lines[n + 1]) and visible_text(line) in named):
            n += 1
        else:
            break
    return "\n".join(lines[n:]).strip("\n")


def render_sections(kept: list[Section], texts: Texts | None = None) -> str:
    """The sections kept, as printed: grouped by fact page (each page once, in the order of its
    best section), under it each run of adjacent sections joined into one block in the order of
    the text, under the headings over it: printed a part at a time, a context of parts of one
    sheet repeated the page's link and breadcrumb for each (issue 53)."""
    texts = {} if texts is None else texts
    pages: dict[str, list[Section]] = {}
    for section in kept:
        pages.setdefault(section.hits[0].page, []).append(section)
    out = []
    for page, sections in pages.items():
        whole = [s for s in sections if s.lines is None]
        out += [s.text for s in whole]
        parts = sorted((s.lines for s in sections if s.lines is not None), key=lambda lines: lines.start)
        if not parts:
            continue
        title = parts[0].crumb[0] if parts[0].crumb else Path(page).stem
        out.append(f"## {title}: [{Path(page).stem}]({page})\n\n")
        blocks: list[list[Lines]] = []
        for part in parts:
            if blocks and part.text == blocks[-1][-1].text and part.start <= blocks[-1][-1].end + 1:
                blocks[-1].append(part)
            else:
                blocks.append([part])
        for block in blocks:
            first, end = block[0], max(p.end for p in block)
            heads = first.crumb[1:]
            body = _without_named_headings(_body(texts, first.text, first.start, end), first.crumb)
            out.append(f"### {' › '.join(heads) or title} (text.md lines {first.start}-{end})\n\n{body}\n\n")
    return "".join(out)


def compose(store: Path, root: Path, question: str, budget: int, project: str | None = None,
            candidates: int = 0, history: bool = False, embedder: QuestionEmbedder | None = None
            ) -> tuple[list[Section], list[Section], list[str]]:
    """A context for an agent: the sections of the facts that match, best first, each kept whole
    while it fits the budget; then the next ones as their one-line summaries while they fit. The
    budget is a hard limit on everything `render_context` prints (its heading, every section,
    the "Also relevant" heading and every line under it). Every link is a path from the
    repository root. Deterministic. With an `embedder`, sections are ranked by words and meaning
    fused, and the trace gives each one's place in both. A note that was superseded or withdrawn
    (kbuild.notes.note) is left out, its successor speaking for it, unless `history` asks for the
    whole chain. Returns (kept, summarised, trace lines)."""
    from ..notes.note import retired

    candidates = candidates or max(40, budget // 100)  # enough sections to fill the budget, a few hundred tokens each
    old = {} if history else retired(store)
    prefix = store.relative_to(root).as_posix() + "/" if store.is_relative_to(root) else ""
    meaning = Meaning()
    expansion = expanded(store, question, project)
    rows = [r for r in ranked_docs(store, expansion.question, project, embedder, meaning, also=expansion.also,
                                   depth=budget // TOKENS_PER_NEAREST)
            if r.doc.get("kind") == "section"
            and not any(str(r.doc["page"]).startswith(prefix + folder) for folder in old)][:candidates]
    if not rows and not search_indexes(store, project):
        return _compose_over_index_lines(store, root, question, budget, project, max(candidates, 40))
    used = estimate_tokens(HEADER.format(question=question))
    # What each fact page's sections cost as render_sections prints them: a section costs what it
    # adds to its page's, and the pages' sum bounds the whole (a ceiling per page).
    printed: dict[str, int] = {}
    on_page: dict[str, list[Section]] = {}
    texts: Texts = {}
    kept: list[Section] = []
    rest: list[Section] = []
    trace = expansion.trace()
    trace += [f"ranked by words and by meaning ({meaning.embedder}), fused by reciprocal rank"] if embedder else []
    trace += meaning.notes
    fmt = "6.4f" if embedder else "6.2f"  # a fused score is a sum of 1/(60 + rank): small
    # A source may repeat a paragraph under several headings (the Docker sheet closes three rules
    # with the same one): printed once, the budget the copies took goes to the next section.
    first_with: dict[str, str] = {}  # a section's words, whitespace aside -> the first section with them
    for row in rows:
        doc, why = row.doc, row.why
        crumb = " › ".join(breadcrumb(doc))
        score = round(row.score, 4 if embedder else 3)
        section = Section(f"{crumb} ({doc['page']}, text.md lines {doc['start']}-{doc['end']})", score,
                          [Hit(score, str(doc["page"]), str(doc["source_index"]), _line(doc))], why=why,
                          lines=Lines(root / str(doc["text"]), int(doc["start"]), int(doc["end"]),  # type: ignore[call-overload]
                                      tuple(breadcrumb(doc))))
        body = _body(texts, section.lines.text, section.lines.start, section.lines.end)  # type: ignore[union-attr]
        words = " ".join(body.split())
        if words in first_with:
            trace.append(f"same   {section.score:{fmt}}              {section.key}: the words of {first_with[words]}")
            continue
        first_with[words] = section.key
        section.text = _section_text(doc, body)
        page = section.hits[0].page
        with_it = estimate_tokens(render_sections([*on_page.get(page, []), section], texts))
        section.tokens = with_it - printed.get(page, 0)
        because = ", ".join(f"{word} {share:.1f}" for word, share in why[:6]) or "no word"
        if embedder:
            places = (f"lexical {'#' + str(row.lexical) if row.lexical else '-'}, "
                      f"semantic {'#' + str(row.semantic) if row.semantic else '-'}; ")
        else:
            places = ""
        section.places = places
        shown = f"{section.score:{fmt}}"
        if used + section.tokens <= budget:
            kept.append(section)
            used += section.tokens
            printed[page] = with_it
            on_page.setdefault(page, []).append(section)
            trace.append(f"kept   {shown} {section.tokens:5} tokens  {section.key}: {places}matched {because}")
        else:
            rest.append(section)
            section.why = why
    summarised: list[Section] = []
    if rest and used + estimate_tokens(ALSO) < budget:
        used += estimate_tokens(ALSO)
        for section in rest:
            cost = estimate_tokens(section.hits[0].line + "\n")
            if used + cost > budget:
                trace.append(f"left   {section.score:{fmt}} {section.tokens:5} tokens  {section.key} (not even its line fits)")
                continue
            used += cost
            summarised.append(section)
            trace.append(f"line   {section.score:{fmt}} {section.tokens:5} tokens  {section.key} "
                         f"({section.places}whole, it would cross the budget)")
        if not summarised:
            used -= estimate_tokens(ALSO)
    trace.append(f"{used} tokens printed of a budget of {budget}")
    return kept, summarised, trace


def _compose_over_index_lines(store: Path, root: Path, question: str, budget: int, project: str | None,
                              candidates: int) -> tuple[list[Section], list[Section], list[str]]:
    """For a store built before the search index: whole fact pages by their index lines."""
    hits = [h for h in search(store, root, question, project, candidates) if "/facts/" in h.page
            and not h.page.endswith("/index.md")]
    used = estimate_tokens(HEADER.format(question=question))
    kept: list[Section] = []
    summarised: list[Section] = []
    trace = []
    for hit in hits:
        body = rewritten_part((root / hit.page).read_text("utf-8", errors="replace"))
        section = Section(hit.page, hit.score, [hit], f"From [{hit.page}]({hit.page}):\n\n{body}\n\n")
        section.tokens = estimate_tokens(section.text)
        if used + section.tokens <= budget:
            kept.append(section)
            used += section.tokens
            trace.append(f"kept   {hit.score:6.2f} {section.tokens:5} tokens  {hit.page} (index line)")
        elif used + estimate_tokens(ALSO) * (not summarised) + estimate_tokens(hit.line + "\n") <= budget:
            used += estimate_tokens(ALSO) * (not summarised) + estimate_tokens(hit.line + "\n")
            summarised.append(section)
            trace.append(f"line   {hit.score:6.2f} {section.tokens:5} tokens  {hit.page} (index line)")
    trace.append(f"{used} tokens printed of a budget of {budget}")
    return kept, summarised, trace


def render_context(question: str, kept: list[Section], summarised: list[Section]) -> str:
    """The context `compose` chose, as Markdown: what `kbuild context` prints and the MCP tool answers."""
    if not kept and not summarised:
        return HEADER.format(question=question) + GAP
    parts = [HEADER.format(question=question), render_sections(kept)]
    if summarised:
        parts.append(ALSO)
        parts += [section.hits[0].line + "\n" for section in summarised]
    return "".join(parts)
