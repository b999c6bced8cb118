"""What is on one page of a paged document: its text in reading order, its tables and figures.

Text comes from pymupdf's text blocks in content-stream order: that is the order
the author's tool wrote them, which keeps the columns of a two-column paper apart
(sorting by position would interleave them), and blocks map to Markdown
paragraphs. A detected table's cell blocks are replaced in place by the table's
Markdown, which reads far better than one cell per line. Tables are looked for
where ruled vector paths cluster; figures are pictures and clusters of drawings.

Everything here works in a page's unrotated coordinates, in PDF points (1/72 in).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import pymupdf

from ..text.markdown import markdown_table

# find_tables() prints an advert for an optional package once per process.
if hasattr(pymupdf, "no_recommend_layout"):
    pymupdf.no_recommend_layout()

# Geometry thresholds, in PDF points (1/72 in).
_MIN_FIGURE_SIDE = 24.0  # smaller pictures are icons, bullets or logos
_MAX_FIGURE_PAGE_SHARE = 0.9  # a picture covering the page is a scan or a background
_MAX_PATH_PAGE_SHARE = 0.5  # a path this large is a frame or background, not part of a figure
_MIN_FIGURE_ITEMS = 3  # one box or rule is decoration; a drawing has several strokes
_MERGE_GAP = 3.0  # pictures and drawings this close belong to one figure
_NEAR = 48.0  # about three lines: how far from a figure its caption may sit
# Beyond this many paths a page is a map, a dense plot or outlined text; looking
# for tables and figures in it costs seconds and finds little. It keeps its page image.
_MAX_CLUSTER_PATHS = 5000
_MANY_PATHS = 1000  # a cluster with more paths is a plot: its dots are no table rules
_MAX_FIGURE_TEXT = 2000

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
class Cut:
    """A table or figure to cut out of the page as an image."""

    kind: str  # "table" or "figure"
    rect: pymupdf.Rect
    text: str  # a table's caption and Markdown; a figure's caption and the text around it


@dataclass
class PageProblems:
    """Per-page trouble, reported once per kind with the page numbers."""

    unreadable: list[int] = field(default_factory=list)
    no_text: list[int] = field(default_factory=list)
    tables_failed: list[int] = field(default_factory=list)
    figures_failed: list[int] = field(default_factory=list)
    too_many_paths: list[int] = field(default_factory=list)


def read_page(page: pymupdf.Page, number: int, problems: PageProblems) -> tuple[str, list[Cut]]:
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
    cuts = [Cut("table", t.rect, t.text) for t in tables]
    cuts += [Cut("figure", rect, _figure_text(rect, free_blocks)) for rect in pictures]
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
    return _merge_touching(list(groups.values()))


def _merge_touching(clusters: list[_Cluster]) -> list[_Cluster]:
    """Join clusters whose boxes touch (within _MERGE_GAP) until none do."""
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
    problems: PageProblems,
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
    # pymupdf keeps a cell's lines apart with <br>, HTML in a page; a Markdown table cell is one line
    return table.to_markdown().strip().replace("<br>", " ")


def _find_figures(
    area: pymupdf.Rect,
    images: list[pymupdf.Rect],
    clusters: list[_Cluster],
    table_rects: list[pymupdf.Rect],
) -> list[pymupdf.Rect]:
    candidates = [
        _Cluster(r, 0, 0) for r in images if not r.is_empty and not _mostly_inside(r, table_rects)
    ]
    candidates += [
        _Cluster(c.rect & area, c.paths, c.items)
        for c in clusters
        if c.paths >= 2 and c.items >= _MIN_FIGURE_ITEMS and not _mostly_inside(c.rect, table_rects)
    ]
    page_area = abs(area)
    return [
        r for r in (c.rect for c in _merge_touching(candidates))
        if r.width >= _MIN_FIGURE_SIDE and r.height >= _MIN_FIGURE_SIDE
        and abs(r) <= _MAX_FIGURE_PAGE_SHARE * page_area
    ]


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
