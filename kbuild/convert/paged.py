"""Paged documents (PDF, XPS, EPUB, CBZ, FB2, MOBI, SVG, images) through pymupdf.

Each page gives its text, a PNG at PAGE_DPI, and cut-outs of its tables and
figures (what is on a page is found in page_layout.py; PNGs are encoded in png.py).

pymupdf (MuPDF) is not thread-safe: call convert() from one thread at a time
and use processes for parallelism. A long document is itself shared with
worker processes when the machine has several cores (see _parallel); the
output is the same bytes as converting it in one process.
"""
from __future__ import annotations

import contextlib
import multiprocessing
import os
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, fields

import pymupdf

from ..text.markdown import page_marker, quoted_tags
from . import limits
from .formats import sniff
from .model import ConversionError, Converted, Figure
from .page_layout import PageProblems, read_page
from .pdf_headings import Heading, headings, mark
from .png import encode_png

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

_CUT_PAD = 2.0  # crops keep a hairline of margin so edge strokes are not clipped


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
    marked, outline = headings(doc)
    by_page: dict[int, list[Heading]] = {}
    for heading in marked:
        by_page.setdefault(heading.page, []).append(heading)

    for index, out in enumerate(pages_out):
        number = index + 1
        pages.append(out.png)
        links: list[str] = []
        for cut_kind, cut_text, cut_png in out.cuts:
            counters[cut_kind] += 1
            name = f"{cut_kind}-{counters[cut_kind]:02d}"
            figures.append(Figure(name=name, page=number, png=cut_png, text=quoted_tags(cut_text)))
            links.append(
                f"[{name}](figures/{name}.md)" if cut_kind == "table"
                else f"![{name}](figures/{name}.png)"
            )
        text = quoted_tags(mark(out.text, by_page[number], outline) if number in by_page else out.text)
        body = "\n\n".join(part for part in (text, "\n".join(links)) if part)
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


def _convert_page(doc: pymupdf.Document, index: int, problems: PageProblems) -> _PageOut:
    number = index + 1
    try:
        page = doc.load_page(index)
        text, cuts = read_page(page, number, problems)
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


def _convert_range(doc: pymupdf.Document, start: int, stop: int) -> tuple[list[_PageOut], PageProblems]:
    problems = PageProblems()
    return [_convert_page(doc, index, problems) for index in range(start, stop)], problems


def _convert_pages(doc: pymupdf.Document, data: bytes, ext: str) -> tuple[list[_PageOut], PageProblems]:
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
# Workers start as fresh interpreters: a fork would copy this process's other
# threads' held locks and MuPDF's state with it.
_WORKER_START = multiprocessing.get_context("spawn")

_Chunk = tuple[list[_PageOut], PageProblems]


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


def _parallel(doc: pymupdf.Document, data: bytes, ext: str, workers: int) -> _Chunk | None:
    """Pages in chunks: worker processes are sent them from the front, this
    process takes them from the back, until they meet. Pages do not depend on
    one another, so the result is the same bytes as converting them in order in
    one process, however the chunks were shared. Workers that fail to start or
    die leave their chunks to this process. None when the document turned out
    to be damaged (see _convert_pages)."""
    count = doc.page_count
    spans = [(a, min(a + _CHUNK_PAGES, count)) for a in range(0, count, _CHUNK_PAGES)]
    results: list[_Chunk | None] = [None] * len(spans)
    settings = {name: getattr(limits, name) for name in dir(limits) if name.isupper()}
    try:
        pool = ProcessPoolExecutor(workers, mp_context=_WORKER_START, initializer=_start_worker,
                                   initargs=(data, ext, settings))
    except Exception:
        return None
    sent: dict[Future[tuple[list[_PageOut], PageProblems, bool]], int] = {}
    front, back = 0, len(spans)  # the next chunk for a worker, the end of the unclaimed ones
    repaired = False

    def send() -> None:
        # Two chunks per worker, so that none waits for this process to send the next.
        nonlocal front
        while front < back and len(sent) < 2 * workers:
            try:
                sent[pool.submit(_convert_in_worker, *spans[front])] = front
            except Exception:
                return  # no worker could start, or one died: this process does the rest
            front += 1

    def receive(done: list[Future[tuple[list[_PageOut], PageProblems, bool]]]) -> None:
        nonlocal repaired
        for future in done:
            i = sent.pop(future)
            if future.cancelled() or future.exception() is not None:
                continue  # redone below
            pages, problems, was_repaired = future.result()
            repaired = repaired or was_repaired
            results[i] = (pages, problems)

    try:
        send()
        while front < back:
            back -= 1
            results[back] = _convert_range(doc, *spans[back])
            receive([future for future in sent if future.done()])
            send()
        # Chunks still queued for a busy worker are quicker done here.
        for future in reversed(list(sent)):
            if future.cancel():
                receive([future])
        receive(list(sent))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    if repaired or doc.is_repaired:
        return None
    for i, span in enumerate(spans):
        if results[i] is None:
            results[i] = _convert_range(doc, *span)
    pages: list[_PageOut] = []
    problems = PageProblems()
    for part in results:
        assert part is not None
        pages += part[0]
        for name in (f.name for f in fields(problems)):
            getattr(problems, name).extend(getattr(part[1], name))
    return pages, problems


_worker_doc: pymupdf.Document | None = None  # in a worker process: the document it converts


def _start_worker(data: bytes, ext: str, settings: dict[str, object]) -> None:
    """Open the document once per worker process, with the caller's limits."""
    global _worker_doc
    # MuPDF and libraries print to stdout and stderr: not in the user's terminal.
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)
    for name, value in settings.items():
        setattr(limits, name, value)
    pymupdf.TOOLS.mupdf_display_errors(False)
    _worker_doc = pymupdf.open(stream=data, filetype=ext)


def _convert_in_worker(start: int, stop: int) -> tuple[list[_PageOut], PageProblems, bool]:
    assert _worker_doc is not None, "_start_worker opens the document first"
    pages, problems = _convert_range(_worker_doc, start, stop)
    pymupdf.TOOLS.mupdf_warnings(reset=True)
    return pages, problems, _worker_doc.is_repaired


def _padded(rect: pymupdf.Rect, area: pymupdf.Rect) -> pymupdf.Rect:
    return (rect + (-_CUT_PAD, -_CUT_PAD, _CUT_PAD, _CUT_PAD)) & area


def _render_page(page: pymupdf.Page) -> bytes:
    return _render(page, limits.PAGE_DPI)


def _render(page: pymupdf.Page, dpi: int, clip: pymupdf.Rect | None = None) -> bytes:
    pixmap = page.get_pixmap(dpi=dpi, clip=clip, alpha=False)
    try:
        return encode_png(pixmap)
    finally:
        del pixmap  # free the raw pixels now; only the PNG is kept


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
    return encode_png(pixmap)


def _problem_warnings(problems: PageProblems, kind: str, page_count: int) -> list[str]:
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
