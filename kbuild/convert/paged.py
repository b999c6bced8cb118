"""Paged documents (PDF, XPS, EPUB, CBZ, FB2, MOBI, SVG, images) through pymupdf.

Each page gives its text, a PNG at PAGE_DPI, and cut-outs of its tables and
figures. Text comes from pymupdf's text blocks in content-stream order: that is
the order the author's tool wrote them, which keeps the columns of a two-column
paper apart (sorting by position would interleave them), and blocks map to
Markdown paragraphs. A detected table's cell blocks are replaced in place by the
table's Markdown, which reads far better than one cell per line.

pymupdf (MuPDF) is not thread-safe: call convert() from one thread at a time
and use processes for parallelism. A long document is itself shared with
worker processes when the machine has several cores (see _parallel); the
output is the same bytes as converting it in one process.
"""
from __future__ import annotations

import contextlib
import os
import pickle
import re
import struct
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import pymupdf

from ..text.markdown import markdown_table, page_marker
from . import limits
from .formats import sniff
from .model import ConversionError, Converted, Figure

# find_tables() prints an advert for an optional package once per process.
if hasattr(pymupdf, "no_recommend_layout"):
    pymupdf.no_recommend_layout()

_KIND_NAMES = {
    "pdf": "a PDF",
    "xps": "an XPS document",
    "epub": "an EPUB book",
    "cbz": "a comic book archive (CBZ)",
    "fb2": "a FictionBook (FB2) file",
    "mobi": "a MOBI book",
    "svg": "an SVG image",
    "image": "an image",
}

# Geometry thresholds, in PDF points (1/72 in).
_MIN_FIGURE_SIDE = 24.0  # smaller pictures are icons, bullets or logos
_MAX_FIGURE_PAGE_SHARE = 0.9  # a picture covering the page is a scan or a background
_MAX_PATH_PAGE_SHARE = 0.5  # a path this large is a frame or background, not part of a figure
_MIN_FIGURE_ITEMS = 3  # one box or rule is decoration; a drawing has several strokes
_MERGE_GAP = 3.0  # pictures and drawings this close belong to one figure
_NEAR = 48.0  # about three lines: how far from a figure its caption may sit
_CUT_PAD = 2.0  # crops keep a hairline of margin so edge strokes are not clipped
# Beyond this many paths a page is a map, a dense plot or outlined text; looking
# for tables and figures in it costs seconds and finds little. It keeps its page image.
_MAX_CLUSTER_PATHS = 5000
_MANY_PATHS = 1000  # a cluster with more paths is a plot: its dots are no table rules
_MAX_FIGURE_TEXT = 2000
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_LEVEL = 3

_CAPTION = re.compile(
    r"^\s*(fig\.?|figure|chart|diagram|graph|illustration|image|photo|plate|exhibit|map|scheme)"
    r"\s*[\dIVXivx]+",
    re.I,
)
_TABLE_CAPTION = re.compile(r"^\s*(table|tab\.)\s*[\dIVXivx]+", re.I)


@dataclass
class _Block:
    rect: pymupdf.Rect
    text: str


@dataclass
class _Cut:
    kind: str  # "table" or "figure"
    rect: pymupdf.Rect
    text: str
    name: str = ""


@dataclass
class _Problems:
    """Per-page trouble, reported once per kind with the page numbers."""

    unreadable: list[int] = field(default_factory=list)
    no_text: list[int] = field(default_factory=list)
    tables_failed: list[int] = field(default_factory=list)
    figures_failed: list[int] = field(default_factory=list)
    too_many_paths: list[int] = field(default_factory=list)


def convert_paged(data: bytes, ext: str, kind: str) -> Converted:
    with _quiet_mupdf():
        doc = _open(data, ext, kind)
        try:
            return _convert(doc, data, kind, ext)
        finally:
            doc.close()


@contextlib.contextmanager
def _quiet_mupdf() -> Iterator[None]:
    # MuPDF prints its own errors to stderr; for a damaged source the user gets our
    # one line instead of a page of "format error: ..." noise.
    previous = pymupdf.TOOLS.mupdf_display_errors()
    pymupdf.TOOLS.mupdf_display_errors(False)
    try:
        yield
    finally:
        pymupdf.TOOLS.mupdf_display_errors(previous)
        # pymupdf keeps every MuPDF warning in a process-wide list; a long build
        # over many damaged files would grow it without bound.
        pymupdf.TOOLS.mupdf_warnings(reset=True)


def _open(data: bytes, ext: str, kind: str) -> pymupdf.Document:
    try:
        doc = pymupdf.open(stream=data, filetype=ext)
    except Exception:
        raise ConversionError(_unopenable_message(data, kind)) from None
    try:
        if kind == "pdf" and not doc.is_pdf:
            # MuPDF sniffs content and would happily open an HTML error page or
            # an image saved as .pdf; that is not the document the user meant.
            raise ConversionError(_unopenable_message(data, kind))
        if doc.needs_pass:
            raise ConversionError(
                "is encrypted and needs a password to open; save a copy without a password "
                "(e.g. print it to PDF) and use that instead"
            )
        count = doc.page_count
        if count == 0:
            raise ConversionError("has no pages; replace it with a document that has content")
        if count > limits.MAX_PAGES:
            raise ConversionError(
                f"has {count} pages, more than the limit of {limits.MAX_PAGES}; "
                "split it into smaller documents"
            )
        _check_truncated(doc, data, kind)
    except ConversionError:
        doc.close()
        raise
    except Exception:
        doc.close()
        raise ConversionError(_unopenable_message(data, kind)) from None
    return doc


def _check_truncated(doc: pymupdf.Document, data: bytes, kind: str) -> None:
    # MuPDF silently rebuilds a damaged cross-reference table. Repairs are common
    # and harmless in sloppily written PDFs, but a repaired file that also lacks
    # the closing %%EOF was cut off (an interrupted download) and has lost pages
    # or content: that is an error, not a warning.
    if kind == "pdf" and doc.is_repaired and b"%%EOF" not in data[-1024:]:
        raise ConversionError(
            "is a truncated PDF (it ends before its last part, e.g. an interrupted download); "
            "download it again or replace it"
        )


def _unopenable_message(data: bytes, kind: str) -> str:
    name = _KIND_NAMES.get(kind, f"a {kind} document")
    head = data[:1024].lstrip().lower()
    if head.startswith((b"<!doctype html", b"<html")) or b"<html" in head:
        return (
            f"is not {name} but an HTML page (an error or login page fetched instead of the "
            "document?); check the URL and fetch it again"
        )
    what = sniff(data)
    if kind == "pdf" and what not in (None, "a PDF"):
        return f"is not a PDF but {what}; give it the right file extension or replace it"
    if kind == "pdf" and what is None:
        return "is not a PDF (no PDF header) or is badly damaged; download it again or replace it"
    return f"cannot be opened as {name}: it is corrupt or truncated; download it again or replace it"


def _convert(doc: pymupdf.Document, data: bytes, kind: str, ext: str) -> Converted:
    pages_out, problems = _convert_pages(doc, data, ext)
    warnings: list[str] = []
    chunks: list[str] = []
    pages: list[bytes] = []
    figures: list[Figure] = []
    counters = {"table": 0, "figure": 0}

    for index, out in enumerate(pages_out):
        number = index + 1
        pages.append(out.png)
        links: list[str] = []
        for cut_kind, cut_text, cut_png in out.cuts:
            counters[cut_kind] += 1
            name = f"{cut_kind}-{counters[cut_kind]:02d}"
            figures.append(Figure(name=name, page=number, png=cut_png, text=cut_text))
            links.append(
                f"[{name}](figures/{name}.md)" if cut_kind == "table"
                else f"![{name}](figures/{name}.png)"
            )
        body = "\n\n".join(part for part in (out.text, "\n".join(links)) if part)
        chunks.append(page_marker(number) + "\n" + (body + "\n" if body else ""))

    if len(problems.unreadable) == doc.page_count:
        raise ConversionError(
            "is damaged: none of its pages could be read; download it again or replace it"
        )
    # Some damage only shows once pages are parsed.
    _check_truncated(doc, data, kind)
    if kind == "pdf" and doc.is_repaired:
        warnings.append(
            "the PDF was damaged and had to be repaired while reading; if text or pages "
            "look wrong, download it again"
        )
    warnings += _problem_warnings(problems, kind, doc.page_count)
    return Converted(text="\n".join(chunks), pages=pages, figures=figures, kind=kind,
                     warnings=warnings)


@dataclass
class _PageOut:
    """One page converted: everything but the figure names, which are numbered
    across the document once all pages are in."""

    text: str
    png: bytes
    cuts: list[tuple[str, str, bytes]]  # (kind, figure text, PNG) in reading order


def _convert_page(doc: pymupdf.Document, index: int, problems: _Problems) -> _PageOut:
    number = index + 1
    try:
        page = doc.load_page(index)
        text, cuts = _read_page(page, number, problems)
        png = _render_page(page)
    except Exception:
        problems.unreadable.append(number)
        return _PageOut("", _blank_png(doc, index), [])
    out: list[tuple[str, str, bytes]] = []
    for cut in cuts:
        try:
            # Cuts are in unrotated coordinates; the renderer clips in rotated ones.
            clip = _padded(cut.rect * page.rotation_matrix, page.rect)
            out.append((cut.kind, cut.text, _render(page, limits.FIGURE_DPI, clip)))
        except Exception:
            problems.figures_failed.append(number)
    return _PageOut(text, png, out)


def _convert_range(doc: pymupdf.Document, start: int, stop: int) -> tuple[list[_PageOut], _Problems]:
    problems = _Problems()
    return [_convert_page(doc, index, problems) for index in range(start, stop)], problems


def _convert_pages(doc: pymupdf.Document, data: bytes, ext: str) -> tuple[list[_PageOut], _Problems]:
    """Every page, in this process or, for a long document on a machine with
    several cores, shared with worker processes (see _parallel)."""
    count = doc.page_count
    workers = _worker_count(count)
    if workers and not doc.is_repaired:
        done = _parallel(doc, data, ext, workers)
        # A repair (of a damaged file) changes how later objects are read, so
        # what a page gives could depend on which process read which pages
        # first: damaged files are converted in one process, in page order.
        if done is not None and not doc.is_repaired:
            return done
    return _convert_range(doc, 0, count)


# Conversion in several processes (MuPDF is not thread-safe). A worker costs
# about 0.35 s to start (Python, pymupdf, opening the document), i.e. about 20
# pages' work, so short documents stay in this process.
_PARALLEL_MIN_PAGES = 32
_MAX_WORKERS = 3  # besides this process
_CHUNK_PAGES = 4  # pages handed out at a time
_WORKER_BOOT = (
    "import sys, pickle; sys.path[:0] = pickle.load(sys.stdin.buffer); "
    "from kbuild.convert.paged import _worker_main; _worker_main()"
)


def _worker_count(pages: int) -> int:
    if pages < _PARALLEL_MIN_PAGES:
        return 0
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    # Cores already busy would only be shared: workers would then cost their
    # start-up and save nothing.
    idle = cores - _running_tasks()
    return max(0, min(idle, _MAX_WORKERS, pages // _CHUNK_PAGES - 1))


def _running_tasks() -> int:
    """Tasks running or ready to run right now, this one included (Linux's
    /proc/loadavg; the load average itself lags a minute behind and counts
    this conversion's own workers). 1 where it cannot be read."""
    try:
        with open("/proc/loadavg", encoding="ascii") as file:
            return max(1, int(file.read().split()[3].split("/")[0]))
    except (OSError, ValueError, IndexError):
        return 1


def _parallel(doc: pymupdf.Document, data: bytes, ext: str, workers: int) -> tuple[list[_PageOut], _Problems] | None:
    """Pages in chunks: worker processes take them from the front, this process
    from the back, until they meet. Pages do not depend on one another, so the
    result is the same bytes as converting them in order in one process,
    however the chunks were shared. A worker that fails to start or dies
    leaves its chunk to this process. None when the document turned out to be
    damaged (see _convert_pages)."""
    count = doc.page_count
    spans = [(a, min(a + _CHUNK_PAGES, count)) for a in range(0, count, _CHUNK_PAGES)]
    results: list[tuple[list[_PageOut], _Problems] | None] = [None] * len(spans)
    repaired = threading.Event()
    lock = threading.Lock()
    bounds = [0, len(spans)]  # next chunk from the front, end of the unclaimed ones

    def take(front: bool) -> int | None:
        with lock:
            if bounds[0] >= bounds[1]:
                return None
            if front:
                bounds[0] += 1
                return bounds[0] - 1
            bounds[1] -= 1
            return bounds[1]

    settings = {name: getattr(limits, name) for name in dir(limits) if name.isupper()}

    def drive() -> None:
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", _WORKER_BOOT],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            )
        except Exception:
            return
        assert proc.stdin is not None and proc.stdout is not None
        try:
            pickle.dump([p for p in sys.path if isinstance(p, str)], proc.stdin)
            pickle.dump((data, ext, settings), proc.stdin)
            while (i := take(front=True)) is not None:
                pickle.dump(spans[i], proc.stdin)
                proc.stdin.flush()
                pages, problems, was_repaired = pickle.load(proc.stdout)
                if was_repaired:
                    repaired.set()
                results[i] = (pages, problems)
        except Exception:
            pass  # the worker died or could not start: its chunk is redone below
        finally:
            with contextlib.suppress(Exception):
                proc.stdin.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    threads = [threading.Thread(target=drive, daemon=True) for _ in range(workers)]
    for thread in threads:
        thread.start()
    try:
        while (i := take(front=False)) is not None:
            results[i] = _convert_range(doc, *spans[i])
    finally:
        with lock:
            bounds[0] = bounds[1]  # after an error here, workers take no more chunks
        for thread in threads:
            thread.join()
    if repaired.is_set() or doc.is_repaired:
        return None
    for i, span in enumerate(spans):
        if results[i] is None:
            results[i] = _convert_range(doc, *span)
    pages: list[_PageOut] = []
    problems = _Problems()
    for part in results:
        assert part is not None
        pages += part[0]
        for name in vars(problems):
            getattr(problems, name).extend(getattr(part[1], name))
    return pages, problems


def _worker_main() -> None:
    """A worker process: converts the page ranges it is sent, one at a time.
    Requests and results are pickles on stdin and stdout."""
    requests = sys.stdin.buffer
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed by a library must not corrupt the replies
    data, ext, settings = pickle.load(requests)
    for name, value in settings.items():
        setattr(limits, name, value)
    pymupdf.TOOLS.mupdf_display_errors(False)
    doc = pymupdf.open(stream=data, filetype=ext)
    while True:
        try:
            start, stop = pickle.load(requests)
        except EOFError:
            break
        pages, problems = _convert_range(doc, start, stop)
        pymupdf.TOOLS.mupdf_warnings(reset=True)
        pickle.dump((pages, problems, doc.is_repaired), replies)
        replies.flush()


def _read_page(page: pymupdf.Page, number: int, problems: _Problems) -> tuple[str, list[_Cut]]:
    """The page's Markdown text, and its tables and figures in reading order.

    Text, drawings and images report unrotated coordinates; so does everything here.
    """
    area = page.rect * page.derotation_matrix
    blocks = [
        _Block(pymupdf.Rect(b[:4]), _clean_block(b[4]))
        for b in page.get_text("blocks")
        if b[6] == 0  # text, not image, blocks
    ]
    blocks = [b for b in blocks if b.text]

    paths = page.get_drawings()
    # Frames and backgrounds would swallow everything near them into one cluster.
    small = [p for p in paths if abs(p["rect"]) <= _MAX_PATH_PAGE_SHARE * abs(area)]
    if len(small) > _MAX_CLUSTER_PATHS:
        problems.too_many_paths.append(number)
        clusters: list[_Cluster] = []
    else:
        clusters = _cluster_paths(small)

    tables = _find_tables(page, paths, clusters, blocks, number, problems)
    table_rects = [t.rect for t in tables]
    free_blocks = [b for b in blocks if not _inside_any(_centre(b.rect), table_rects)]

    try:
        images = [pymupdf.Rect(info["bbox"]) & area for info in page.get_image_info()]
    except Exception:
        images = []
        problems.figures_failed.append(number)
    if not blocks and sum(abs(r) for r in images) > 0.5 * abs(area):
        problems.no_text.append(number)
    pictures = _find_figures(area, images, clusters, table_rects)

    parts: list[str] = []
    placed: set[int] = set()
    for block in blocks:
        owner = next((i for i, r in enumerate(table_rects) if r.contains(_centre(block.rect))), None)
        if owner is None:
            parts.append(block.text)
        elif owner not in placed:
            placed.add(owner)
            parts.append(tables[owner].markdown)
    cuts = [_Cut("table", t.rect, t.text) for t in tables]
    cuts += [_Cut("figure", rect, _figure_text(rect, free_blocks)) for rect in pictures]
    # Numbering follows this order: top to bottom, then left to right.
    cuts.sort(key=lambda c: (round(c.rect.y0), c.rect.x0))
    return "\n\n".join(parts), cuts


@dataclass
class _Cluster:
    """Vector paths that touch one another: one drawing, or one table's rules."""

    rect: pymupdf.Rect
    paths: int
    items: int  # lines, curves and rectangles in those paths


def _cluster_paths(paths: list[dict]) -> list[_Cluster]:
    """Group paths lying within _MERGE_GAP of each other (transitively).

    pymupdf's cluster_drawings() compares every pair of paths, in Python; a
    chart with a few thousand points then takes seconds. Here paths are put in
    grid buckets and only paths sharing a bucket are compared.
    """
    boxes = [(r.x0, r.y0, r.x1, r.y1) for r in (p["rect"] for p in paths)]
    parent = list(range(len(boxes)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    cell, gap = 32.0, _MERGE_GAP
    buckets: dict[tuple[int, int], list[int]] = {}
    for i, (x0, y0, x1, y1) in enumerate(boxes):
        for gx in range(int((x0 - gap) // cell), int((x1 + gap) // cell) + 1):
            for gy in range(int((y0 - gap) // cell), int((y1 + gap) // cell) + 1):
                bucket = buckets.setdefault((gx, gy), [])
                for j in bucket:
                    a, b = root(i), root(j)
                    if a == b:
                        continue
                    u0, v0, u1, v1 = boxes[j]
                    if x0 - gap <= u1 and u0 - gap <= x1 and y0 - gap <= v1 and v0 - gap <= y1:
                        parent[b] = a
                bucket.append(i)

    groups: dict[int, _Cluster] = {}
    for i, path in enumerate(paths):
        x0, y0, x1, y1 = boxes[i]
        group = groups.get(root(i))
        if group is None:
            groups[root(i)] = _Cluster(pymupdf.Rect(x0, y0, x1, y1), 1, len(path["items"]))
        else:
            group.rect = _union(group.rect, pymupdf.Rect(x0, y0, x1, y1))
            group.paths += 1
            group.items += len(path["items"])
    # A group's box can overlap another group's paths without any two touching
    # (an axis and the curve drawn over it); such boxes are one figure.
    return _merge_clusters(list(groups.values()))


def _merge_clusters(clusters: list[_Cluster]) -> list[_Cluster]:
    merged = True
    while merged:
        merged = False
        out: list[_Cluster] = []
        for cluster in clusters:
            for other in out:
                if _touch(cluster.rect, other.rect, _MERGE_GAP):
                    other.rect = _union(other.rect, cluster.rect)
                    other.paths += cluster.paths
                    other.items += cluster.items
                    merged = True
                    break
            else:
                out.append(cluster)
        clusters = out
    return clusters


def _union(a: pymupdf.Rect, b: pymupdf.Rect) -> pymupdf.Rect:
    # Rect's "|" ignores empty rectangles, and a horizontal rule is one.
    return pymupdf.Rect(min(a.x0, b.x0), min(a.y0, b.y0), max(a.x1, b.x1), max(a.y1, b.y1))


def _touch(a: pymupdf.Rect, b: pymupdf.Rect, gap: float) -> bool:
    """Overlap test that, unlike Rect.intersects, also works for lines (empty rects)."""
    return a.x0 - gap <= b.x1 and b.x0 - gap <= a.x1 and a.y0 - gap <= b.y1 and b.y0 - gap <= a.y1


@dataclass
class _Table:
    rect: pymupdf.Rect
    markdown: str
    text: str  # the figure text: caption (if any) and the Markdown


def _find_tables(
    page: pymupdf.Page,
    paths: list[dict],
    clusters: list[_Cluster],
    blocks: list[_Block],
    number: int,
    problems: _Problems,
) -> list[_Table]:
    """Tables drawn with rules, looked for only where rules are.

    find_tables() on a whole page first turns every character of the page into
    a Python dict (most of its cost); clipped to a cluster of rules it only
    does so for the characters there, which makes a page with one small table
    several times cheaper, and a page without rules free.
    """
    tables: list[_Table] = []
    try:
        for cluster in clusters:
            if cluster.items < 3:  # the fewest strokes that can draw a 2x2 grid
                continue
            if not any(cluster.rect.contains(_centre(b.rect)) for b in blocks):
                continue  # no text inside: nothing a table could hold
            clip = cluster.rect + (-_MERGE_GAP, -_MERGE_GAP, _MERGE_GAP, _MERGE_GAP)
            nearby = [p for p in paths if _touch(p["rect"], clip, 0)]
            if len(nearby) > _MANY_PATHS:
                # A dense plot: its dots and markers cannot be table rules, and
                # find_tables() would spend seconds joining them.
                nearby = [p for p in nearby if max(p["rect"].width, p["rect"].height) >= 3]
            found = page.find_tables(clip=clip, paths=nearby, use_layout=False)
            for table in found.tables:
                if table.row_count < 2 or table.col_count < 2:
                    continue  # a boxed paragraph or a lone rule, not a table
                markdown = _table_markdown(table)
                if not re.sub(r"[|\-\s:]", "", markdown):
                    continue  # a grid with no text is a drawing, not a table
                rect = pymupdf.Rect(table.bbox)
                caption = _nearest_caption(rect, blocks, _TABLE_CAPTION)
                text = f"{caption}\n\n{markdown}\n" if caption else markdown + "\n"
                tables.append(_Table(rect, markdown, text))
    except Exception:
        problems.tables_failed.append(number)
    return tables


class _RawDictOnce:
    """Stands in for a table's TextPage while its Markdown is made.

    pymupdf's Table.to_markdown() extracts the whole clip's "rawdict" again for
    every cell (its extract_cells() reads nothing else from the TextPage); a
    5x4 table paid for 20 extractions. The dict is only read, so one serves
    every cell: the same Markdown, several times faster.
    """

    def __init__(self, textpage: pymupdf.TextPage) -> None:
        self._raw = textpage.extractRAWDICT()

    def extractRAWDICT(self) -> dict:  # noqa: N802 (pymupdf's name)
        return self._raw


def _table_markdown(table: pymupdf.table.Table) -> str:
    textpage = table.textpage
    if textpage is None:
        return _table_markdown_of(table)
    table.textpage = _RawDictOnce(textpage)
    try:
        return _table_markdown_of(table)
    finally:
        table.textpage = textpage


def _table_markdown_of(table: pymupdf.table.Table) -> str:
    header = table.header
    if header.external and table.col_count > 1:
        # pymupdf takes the line above a table as its header when the first row
        # does not look like one. When that line fills a single column it is the
        # table's caption or title, not column names: keep the rows as they are.
        names = [n for n in header.names if n and not re.fullmatch(r"Col\d+", n)]
        if len(names) <= 1:
            return markdown_table(table.extract())
    return table.to_markdown().strip()


def _find_figures(
    area: pymupdf.Rect,
    images: list[pymupdf.Rect],
    clusters: list[_Cluster],
    table_rects: list[pymupdf.Rect],
) -> list[pymupdf.Rect]:
    candidates = [r for r in images if not r.is_empty and not _mostly_inside(r, table_rects)]
    candidates += [
        c.rect & area
        for c in clusters
        if c.paths >= 2 and c.items >= _MIN_FIGURE_ITEMS and not _mostly_inside(c.rect, table_rects)
    ]
    page_area = abs(area)
    return [
        r for r in _merge(candidates)
        if r.width >= _MIN_FIGURE_SIDE and r.height >= _MIN_FIGURE_SIDE
        and abs(r) <= _MAX_FIGURE_PAGE_SHARE * page_area
    ]


def _merge(rects: list[pymupdf.Rect]) -> list[pymupdf.Rect]:
    """Join rectangles that touch (within _MERGE_GAP) until none do."""
    rects = [pymupdf.Rect(r) for r in rects]
    merged = True
    while merged:
        merged = False
        out: list[pymupdf.Rect] = []
        for rect in rects:
            for i, other in enumerate(out):
                if _touch(rect, other, _MERGE_GAP):
                    out[i] = _union(other, rect)
                    merged = True
                    break
            else:
                out.append(rect)
        rects = out
    return rects


def _figure_text(rect: pymupdf.Rect, blocks: list[_Block]) -> str:
    """The caption first (a "Figure 3 ..." line, nearest first), then the text just
    above and below the figure and any labels inside it."""
    caption = _nearest_caption(rect, blocks, _CAPTION)
    above = _neighbour(rect, blocks, below=False)
    below = _neighbour(rect, blocks, below=True)
    inside = [b.text for b in blocks if rect.contains(_centre(b.rect))]
    parts: list[str] = []
    for text in [caption, above, below, *inside]:
        if text and text not in parts:
            parts.append(text)
    text = "\n\n".join(parts)
    if len(text) > _MAX_FIGURE_TEXT:
        text = text[:_MAX_FIGURE_TEXT].rsplit(" ", 1)[0] + " ..."
    return text + "\n" if text else ""


def _nearest_caption(rect: pymupdf.Rect, blocks: list[_Block], pattern: re.Pattern[str]) -> str:
    best: tuple[float, str] | None = None
    for block in blocks:
        if not pattern.match(block.text) or not _overlaps_horizontally(rect, block.rect):
            continue
        gap = _vertical_gap(rect, block.rect)
        if gap <= 2 * _NEAR and (best is None or gap < best[0]):
            best = (gap, block.text)
    return best[1] if best else ""


def _neighbour(rect: pymupdf.Rect, blocks: list[_Block], *, below: bool) -> str:
    best: tuple[float, str] | None = None
    for block in blocks:
        if not _overlaps_horizontally(rect, block.rect):
            continue
        gap = block.rect.y0 - rect.y1 if below else rect.y0 - block.rect.y1
        if -2 <= gap <= _NEAR and (best is None or gap < best[0]):
            best = (gap, block.text)
    return best[1] if best else ""


def _vertical_gap(a: pymupdf.Rect, b: pymupdf.Rect) -> float:
    return max(0.0, b.y0 - a.y1, a.y0 - b.y1)


def _overlaps_horizontally(a: pymupdf.Rect, b: pymupdf.Rect) -> bool:
    return min(a.x1, b.x1) - max(a.x0, b.x0) > 0


def _mostly_inside(rect: pymupdf.Rect, containers: list[pymupdf.Rect]) -> bool:
    size = abs(rect)
    for container in containers:
        overlap = abs(rect & container)
        if size == 0:
            if container.contains(rect.tl):
                return True
        elif overlap >= 0.5 * size:
            return True
    return False


def _inside_any(point: pymupdf.Point, rects: list[pymupdf.Rect]) -> bool:
    return any(r.contains(point) for r in rects)


def _centre(rect: pymupdf.Rect) -> pymupdf.Point:
    return pymupdf.Point((rect.x0 + rect.x1) / 2, (rect.y0 + rect.y1) / 2)


def _clean_block(text: str) -> str:
    lines = [line.rstrip() for line in text.replace("\r", "\n").split("\n")]
    return "\n".join(line for line in lines if line.strip()).strip("\n")


def _padded(rect: pymupdf.Rect, area: pymupdf.Rect) -> pymupdf.Rect:
    return (rect + (-_CUT_PAD, -_CUT_PAD, _CUT_PAD, _CUT_PAD)) & area


def _render_page(page: pymupdf.Page) -> bytes:
    return _render(page, limits.PAGE_DPI)


def _render(page: pymupdf.Page, dpi: int, clip: pymupdf.Rect | None = None) -> bytes:
    pixmap = page.get_pixmap(dpi=dpi, clip=clip, alpha=False)
    try:
        return _png(pixmap)
    finally:
        del pixmap  # free the raw pixels now; only the PNG is kept


def _png(pixmap: pymupdf.Pixmap) -> bytes:
    """Encode an RGB or grey pixmap as PNG.

    MuPDF's own PNG writer compresses at zlib's default level and costs twice
    the rendering itself; level 3 with no row filter is about twice as fast for
    files ~5% larger (measured on rendered text pages).

    An RGB pixmap whose every pixel is grey (R = G = B: text, rules, grey
    drawings) is written as a greyscale PNG. That is lossless (it decodes to the
    same pixels), a third of the bytes to compress, and about 3 times faster
    overall, checking included; pages with any colour stay RGB.
    """
    width, height = pixmap.width, pixmap.height
    samples = pixmap.samples
    n, stride = pixmap.n, pixmap.stride
    if n == 3 and stride == 3 * width:
        red = samples[0::3]
        if red == samples[1::3] and red == samples[2::3]:
            samples, n, stride = red, 1, width
    colour_type = {1: 0, 3: 2}[n]  # grey or RGB; pixmaps here never carry alpha
    view = memoryview(samples)
    # Each row is preceded by its filter type, 0 (none).
    rows = b"\x00" + b"\x00".join([view[y:y + stride] for y in range(0, height * stride, stride)])
    header = struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0)
    return b"".join([
        _PNG_SIGNATURE,
        _chunk(b"IHDR", header),
        _chunk(b"IDAT", zlib.compress(rows, _PNG_LEVEL)),
        _chunk(b"IEND", b""),
    ])


def _chunk(tag: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body))


def _blank_png(doc: pymupdf.Document, index: int) -> bytes:
    """A white stand-in for a page that could not be rendered, so page N stays pages[N-1]."""
    try:
        rect = doc.page_cropbox(index) if doc.is_pdf else pymupdf.Rect(0, 0, 612, 792)
    except Exception:
        rect = pymupdf.Rect(0, 0, 612, 792)
    zoom = limits.PAGE_DPI / 72
    irect = pymupdf.IRect(0, 0, max(1, round(rect.width * zoom)), max(1, round(rect.height * zoom)))
    pixmap = pymupdf.Pixmap(pymupdf.csRGB, irect, False)
    pixmap.clear_with(255)
    return _png(pixmap)


def _problem_warnings(problems: _Problems, kind: str, page_count: int) -> list[str]:
    warnings = []
    if problems.unreadable:
        warnings.append(
            f"page(s) {_ranges(problems.unreadable)} could not be read (damaged); they are "
            "left empty with a blank page image"
        )
    if problems.no_text:
        if kind == "image" or len(problems.no_text) == page_count == 1 and kind in ("cbz", "svg"):
            warnings.append("has no text layer; text is not extracted (no OCR), only the image is kept")
        else:
            warnings.append(
                f"page(s) {_ranges(problems.no_text)} have no text layer (scanned?); their text "
                "is not extracted (no OCR), only the page images are kept"
            )
    if problems.tables_failed:
        warnings.append(f"table detection failed on page(s) {_ranges(problems.tables_failed)}")
    if problems.figures_failed:
        warnings.append(f"figures could not be cut out on page(s) {_ranges(problems.figures_failed)}")
    if problems.too_many_paths:
        warnings.append(
            f"page(s) {_ranges(problems.too_many_paths)} hold too many vector drawings to find "
            "figures in; see their page images"
        )
    return warnings


def _ranges(numbers: list[int]) -> str:
    """[1, 2, 3, 7] -> "1-3, 7"."""
    numbers = sorted(set(numbers))
    spans: list[str] = []
    start = prev = numbers[0]
    for n in numbers[1:] + [None]:  # type: ignore[list-item]
        if n is not None and n == prev + 1:
            prev = n
            continue
        spans.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(spans)
