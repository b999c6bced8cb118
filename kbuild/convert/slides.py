"""A PowerPoint deck (.pptx) as Markdown, with python-pptx: one section per slide,
`## Slide N: title`, then what is on the slide in reading order (top to bottom, then left to
right): its text (bulleted paragraphs as list items, nested by their level), its tables as
Markdown tables, each chart's title and data as a table, each picture's alt text; then the
speaker's notes under `### Notes`. The same bytes give the same Markdown.
"""
from __future__ import annotations

import io
from collections.abc import Iterator

from pptx import Presentation
from pptx.enum.shapes import MSO_SHAPE_TYPE, PP_PLACEHOLDER
from pptx.shapes.base import BaseShape
from pptx.text.text import _Paragraph

from ..text.markdown import escape_text, markdown_table
from .model import Converted

_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_BODY = {PP_PLACEHOLDER.BODY, PP_PLACEHOLDER.OBJECT, PP_PLACEHOLDER.VERTICAL_BODY}  # bulleted by default


def convert_pptx(data: bytes) -> Converted:
    deck = Presentation(io.BytesIO(data))
    sections = []
    for number, slide in enumerate(deck.slides, start=1):
        title_shape = slide.shapes.title
        title = _one_line(title_shape.text_frame.text) if title_shape is not None and title_shape.has_text_frame else ""
        parts = [f"## Slide {number}: {escape_text(title)}" if title else f"## Slide {number}"]
        for shape in _reading_order(slide.shapes):
            if title_shape is not None and shape.shape_id == title_shape.shape_id:
                continue
            parts += _shape_markdown(shape)
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            notes = _paragraphs(slide.notes_slide.notes_text_frame.paragraphs, bulleted=False)
            if notes:
                parts += ["### Notes", notes]
        sections.append("\n\n".join(p for p in parts if p))
    text = "\n\n".join(sections)
    warnings = [] if text else ["has no slides; text.md will be empty"]
    return Converted(text=text + "\n", kind="pptx", warnings=warnings)


def _reading_order(shapes) -> Iterator[BaseShape]:
    """The shapes of a slide or a group, top to bottom and left to right; a group's own shapes
    in their order within it."""
    def place(shape: BaseShape) -> tuple[int, int, int]:
        return (shape.top or 0, shape.left or 0, shape.shape_id)

    for shape in sorted(shapes, key=place):
        if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
            yield from _reading_order(shape.shapes)
        else:
            yield shape


def _shape_markdown(shape: BaseShape) -> list[str]:
    if getattr(shape, "has_table", False):
        return [_table(shape.table)]
    if getattr(shape, "has_chart", False):
        return _chart(shape.chart)
    parts = []
    if shape.has_text_frame:
        is_body = shape.is_placeholder and shape.placeholder_format.type in _BODY
        parts.append(_paragraphs(shape.text_frame.paragraphs, bulleted=is_body))
    alt = shape._element.find(f".//{{*}}cNvPr")  # a picture's (or any shape's) description
    if shape.shape_type == MSO_SHAPE_TYPE.PICTURE and alt is not None and alt.get("descr"):
        parts.append(escape_text(_one_line(alt.get("descr", "")), line_start=True))
    return parts


def _paragraphs(paragraphs: list[_Paragraph], bulleted: bool) -> str:
    """A text frame's paragraphs: a bulleted or numbered one as a list item, indented by its level."""
    lines: list[str] = []
    numbers: dict[int, int] = {}
    for paragraph in paragraphs:
        text = _one_line("".join(run.text for run in paragraph.runs) or paragraph.text)
        if not text:
            continue
        marker = _bullet(paragraph, bulleted)
        if marker is None:
            numbers.clear()
            lines.append(("\n" if lines else "") + escape_text(text, line_start=True) + "\n")
            continue
        level = paragraph.level
        numbers = {k: v for k, v in numbers.items() if k <= level}
        if marker == "1.":
            numbers[level] = numbers.get(level, 0) + 1
            marker = f"{numbers[level]}."
        lines.append("    " * level + f"{marker} {escape_text(text)}")
    return "\n".join(lines).strip()


def _bullet(paragraph: _Paragraph, bulleted: bool) -> str | None:
    """ "-" for a bulleted paragraph, "1." for a numbered one, None for plain text."""
    properties = paragraph._p.find(f"{_A}pPr")
    if properties is not None:
        if properties.find(f"{_A}buNone") is not None:
            return None
        if properties.find(f"{_A}buAutoNum") is not None:
            return "1."
        if properties.find(f"{_A}buChar") is not None:
            return "-"
    return "-" if bulleted else None


def _table(table) -> str:
    """A table's cells; a merged cell stands in each place it covers."""
    rows = [[cell.text for cell in row.cells] for row in table.rows]
    for r, row in enumerate(table.rows):
        for c, cell in enumerate(row.cells):
            if cell.is_merge_origin:
                for down in range(cell.span_height):
                    for across in range(cell.span_width):
                        rows[r + down][c + across] = cell.text
    return markdown_table([[escape_text(_one_line(text)) for text in row] for row in rows])


def _chart(chart) -> list[str]:
    """A chart's title, and its data as a table: a row per category, a column per series."""
    title = _one_line(chart.chart_title.text_frame.text) if chart.has_title and chart.chart_title.has_text_frame else ""
    parts = [f"Chart: {escape_text(title)}" if title else "Chart"]
    try:
        plot = chart.plots[0]
        categories = [str(c) for c in plot.categories]
        series = list(plot.series)
    except (IndexError, KeyError, AttributeError, ValueError):
        return parts  # a chart type python-pptx reads no data of: its title alone
    if series and categories:
        header = [""] + [escape_text(_one_line(s.name or "")) for s in series]
        values = [list(s.values) for s in series]
        rows = [[escape_text(category)] + [_number(v[i]) if i < len(v) else "" for v in values]
                for i, category in enumerate(categories)]
        parts.append(markdown_table([header, *rows]))
    return parts


def _number(value: float | None) -> str:
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else repr(value)


def _one_line(text: str) -> str:
    return " ".join(text.split())
