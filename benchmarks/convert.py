"""How much convert() costs over pymupdf's bare text extraction, and what a text document's
conversion costs.

    python benchmarks/convert.py [--pages 200] [--runs 3] [--dpi 96]
    python benchmarks/convert.py --documents [--against OTHER_PYTHON] [--runs 5]

--documents times convert() over the Markdown, HTML and feed documents of ../shared/corpus-wild
(tests/data/wild when it is not there), in a fresh process per kbuild, median of --runs: with
--against, the other kbuild's convert() on the same files in the same run (the Markdown of
commit 26894ba was cleaned line by line with regular expressions; it is now parsed).

Builds a PDF in memory (text on every page, a ruled table on every 5th, an
image on every 7th, a small vector chart on every 11th), then times the same
file, median of --runs each, in one run:
  plain           pymupdf page.get_text() for every page, in this process
  convert         kbuild.convert.convert(): text, page PNGs, tables, figures, as
                  shipped (a long document is shared with worker processes when
                  the machine has several cores)
  one process     the same, kept in this process
  no page images  the same in one process, with the page PNGs left out
                  (tables and figures still cut)
The ratio is convert's pages/s over plain's, in wall time. CPU time includes
the worker processes'.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from installed import use_installed_kbuild  # noqa: E402

use_installed_kbuild()

import pymupdf  # noqa: E402

from kbuild.convert import convert, limits, paged  # noqa: E402

_TEXT = (
    "build system converts documents into a markdown knowledge base with page images "
    "figures tables and incremental rebuilds that only redo what changed since last time"
)
_WORDS = _TEXT.split()


def make_pdf(pages: int) -> bytes:
    doc = pymupdf.open()
    swatch = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 200, 120), False)
    for y in range(120):  # a gradient, so the image is not trivially compressible
        for x in range(0, 200, 8):
            swatch.set_rect(pymupdf.IRect(x, y, x + 8, y + 1), (x % 256, (y * 2) % 256, 128))
    for n in range(1, pages + 1):
        page = doc.new_page()  # A4
        page.insert_text((72, 60), f"Section {n}", fontsize=16)
        body = "\n".join(
            " ".join(_WORDS[(n + line + k) % len(_WORDS)] for k in range(12))
            for line in range(28)
        )
        page.insert_text((72, 90), body, fontsize=10)
        if n % 5 == 0:
            _table(page, 72, 480, rows=5, cols=4, label=n)
        if n % 7 == 0:
            page.insert_image(pymupdf.Rect(330, 480, 530, 600), pixmap=swatch)
            page.insert_text((330, 615), f"Figure {n}: a gradient", fontsize=9)
        if n % 11 == 0:
            for i in range(6):
                h = 10 + 8 * i
                page.draw_rect(pymupdf.Rect(80 + 22 * i, 760 - h, 96 + 22 * i, 760), fill=(0.2, 0.3, 0.8))
            page.draw_line((75, 760), (215, 760))
            page.insert_text((80, 778), f"Fig. {n} bars", fontsize=9)
    return doc.tobytes(deflate=True)


def _table(page: pymupdf.Page, x0: float, y0: float, *, rows: int, cols: int, label: int) -> None:
    cw, rh = 60.0, 18.0
    for r in range(rows + 1):
        page.draw_line((x0, y0 + r * rh), (x0 + cols * cw, y0 + r * rh))
    for c in range(cols + 1):
        page.draw_line((x0 + c * cw, y0), (x0 + c * cw, y0 + rows * rh))
    for r in range(rows):
        for c in range(cols):
            text = f"H{c}" if r == 0 else f"{label}.{r}.{c}"
            page.insert_text((x0 + c * cw + 4, y0 + r * rh + 13), text, fontsize=9)


def plain(data: bytes) -> None:
    doc = pymupdf.open(stream=data, filetype="pdf")
    for page in doc:
        page.get_text()
    doc.close()


def ours(data: bytes) -> None:
    convert(data, "bench.pdf")


def ours_one_process(data: bytes) -> None:
    original = paged._PARALLEL_MIN_PAGES
    paged._PARALLEL_MIN_PAGES = 10**9
    try:
        convert(data, "bench.pdf")
    finally:
        paged._PARALLEL_MIN_PAGES = original


def ours_no_render(data: bytes) -> None:
    original = paged._render_page
    paged._render_page = lambda page: b""
    try:
        ours_one_process(data)  # workers would render: they do not see the patch
    finally:
        paged._render_page = original


def median_seconds(fn: Callable[[bytes], None], data: bytes, runs: int) -> tuple[float, float]:
    """Median wall and CPU seconds (CPU of this process and of the worker
    processes it waited for). CPU time is the steadier figure on a shared
    machine (other processes stretch wall time, not our CPU time)."""
    walls, cpus = [], []
    for _ in range(runs):
        wall, cpu = time.perf_counter(), _cpu()
        fn(data)
        walls.append(time.perf_counter() - wall)
        cpus.append(_cpu() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def measure(pages: int, runs: int) -> dict[str, float]:
    """Pages/s of plain get_text() and of convert() as shipped on the same generated PDF, and
    their ratio, in one run."""
    data = make_pdf(pages)
    plain_wall, _ = median_seconds(plain, data, runs)
    ours_wall, _ = median_seconds(ours, data, runs)
    return {"pages": pages, "plain_pps": pages / plain_wall, "convert_pps": pages / ours_wall,
            "ratio": plain_wall / ours_wall}


TEXT_DOCUMENTS = (".md", ".html", ".xml")
_TIME_DOCUMENTS = """
import statistics, sys, time
from pathlib import Path
from kbuild.convert import convert
files = [(Path(f).name, Path(f).read_bytes()) for f in sys.argv[2:]]
times = []
for _ in range(int(sys.argv[1])):
    started = time.perf_counter()
    for name, data in files:
        convert(data, name)
    times.append(time.perf_counter() - started)
print(statistics.median(times))
"""


def text_documents() -> list[Path]:
    here = Path(__file__).resolve().parent
    corpus = here.parent.parent / "shared" / "corpus-wild"
    if not corpus.is_dir():
        corpus = here.parent / "tests" / "data" / "wild"
    return sorted(p for p in corpus.rglob("*") if p.suffix in TEXT_DOCUMENTS and "revisions" not in p.parts
                  and "expected" not in p.parts and not p.name.endswith(".expected.md") and p.name != "README.md")


def documents(runs: int, against: str | None) -> None:
    import subprocess

    files = text_documents()
    size = sum(f.stat().st_size for f in files) / 2**20
    print(f"{len(files)} documents, {size:.2f} MiB; median of {runs} passes over all of them")
    print(f"| kbuild | seconds | MiB/s |\n|---|---|---|")
    for label, python in {"this kbuild": sys.executable, **({f"against ({against})": against} if against else {})}.items():
        seconds = float(subprocess.run([python, "-c", _TIME_DOCUMENTS, str(runs), *map(str, files)], check=True,
                                       capture_output=True, text=True).stdout)
        print(f"| {label} | {seconds:.3f} | {size / seconds:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dpi", type=int, default=limits.PAGE_DPI, help="override PAGE_DPI")
    parser.add_argument("--documents", action="store_true", help="time the text documents of the wild corpus")
    parser.add_argument("--against", metavar="PYTHON", help="with --documents: also time this Python's kbuild")
    args = parser.parse_args()
    if args.documents:
        documents(args.runs, args.against)
        return
    limits.PAGE_DPI = args.dpi

    data = make_pdf(args.pages)
    result = convert(data, "bench.pdf")
    print(
        f"{args.pages} pages, {len(data) / 1024:.0f} KiB PDF; PAGE_DPI={limits.PAGE_DPI}; "
        f"{sum(f.name.startswith('table') for f in result.figures)} tables, "
        f"{sum(f.name.startswith('figure') for f in result.figures)} figures, "
        f"page PNGs {sum(map(len, result.pages)) / 2**20:.1f} MiB total"
    )
    rows = [
        ("plain get_text()", median_seconds(plain, data, args.runs)),
        ("convert()", median_seconds(ours, data, args.runs)),
        ("convert() one process", median_seconds(ours_one_process, data, args.runs)),
        ("  without page images", median_seconds(ours_no_render, data, args.runs)),
    ]
    n = args.pages
    base_wall = rows[0][1][0]
    print(f"{'median of ' + str(args.runs):26s} {'wall s':>8s} {'pages/s':>8s} {'CPU s':>8s} "
          f"{'ratio (pages/s over plain)':>27s}")
    for label, (wall, cpu) in rows:
        print(f"{label:26s} {wall:8.3f} {n / wall:8.1f} {cpu:8.3f} {base_wall / wall:27.2f}")
    render = rows[2][1][1] - rows[3][1][1]
    print(f"{os.cpu_count()} cores; convert() adds worker processes for the cores idle at each call. "
          f"Page images in one process: ~{render:.3f} CPU s ({render / n * 1000:.1f} ms/page)")


if __name__ == "__main__":
    main()
