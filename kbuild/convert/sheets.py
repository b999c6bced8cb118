"""An Excel workbook (.xlsx with openpyxl, .xls with xlrd) as Markdown: one section per sheet,
`## NAME`, and each block of rows (rows between empty ones) as a Markdown table whose first row is
its header; columns empty in the whole block are left out, and a block of one cell is a line of
text (a title above a table). A formula is shown by the value Excel last computed and saved with
it; a formula saved with no value (a workbook written by a script) by its text. Numbers as Excel
shows a whole number ("12", not "12.0"), dates in ISO form. A one-cell edit changes that row's
line only (unless it makes a column appear or go). A chart is a line after its sheet's tables:
its kind, title and series ("Line chart: Sales (2023, 2024)"), read from the package's XML, since
openpyxl reads no chart in read-only mode. The same bytes give the same Markdown.
"""
from __future__ import annotations

import datetime
import io
import posixpath
import re
import zipfile
from xml.etree import ElementTree
from collections.abc import Iterable, Sequence
from typing import Any

from ..text.markdown import escape_text, markdown_table
from .model import Converted


def convert_xlsx(data: bytes) -> Converted:
    import openpyxl  # only with a workbook of its kind: each has its own library

    # read_only: rows are streamed from the file, not built as cell objects (a large sheet stays cheap)
    values = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    formulas = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=False)
    sheets = []
    for name in values.sheetnames:
        if not hasattr(values[name], "iter_rows"):
            sheets.append((name, []))  # a chart sheet: its name only
            continue
        rows = [[_text(value if value is not None else formula) for value, formula in _zip(row, row_formulas)]
                for row, row_formulas in zip(values[name].iter_rows(values_only=True),
                                             formulas[name].iter_rows(values_only=True))]
        sheets.append((name, rows))
    values.close()
    formulas.close()
    return _workbook(sheets, _charts(data))


def convert_xls(data: bytes) -> Converted:
    import xlrd

    book = xlrd.open_workbook(file_contents=data, on_demand=False)
    sheets = []
    for sheet in book.sheets():
        rows = []
        for r in range(sheet.nrows):
            row = []
            for cell in sheet.row(r):
                if cell.ctype == xlrd.XL_CELL_DATE:
                    row.append(_text(xlrd.xldate.xldate_as_datetime(cell.value, book.datemode)))
                elif cell.ctype == xlrd.XL_CELL_BOOLEAN:
                    row.append(_text(bool(cell.value)))
                elif cell.ctype == xlrd.XL_CELL_ERROR:
                    row.append(xlrd.error_text_from_code.get(cell.value, "#ERROR"))
                else:
                    row.append(_text(cell.value))
            rows.append(row)
        sheets.append((sheet.name, rows))
    return _workbook(sheets)


def _workbook(sheets: Sequence[tuple[str, list[list[str]]]], charts: dict[str, list[str]] | None = None) -> Converted:
    sections = []
    for name, rows in sheets:
        parts = [f"## {escape_text(' '.join(name.split()))}"]
        parts += [_block(block) for block in _blocks(rows)]
        parts += [escape_text(chart, line_start=True) for chart in (charts or {}).get(name, [])]
        sections.append("\n\n".join(p for p in parts if p))
    text = "\n\n".join(sections)
    warnings = [] if any(len(s.splitlines()) > 1 for s in sections) else ["has no cell with a value; text.md holds only its sheets' names"]
    return Converted(text=text + "\n", kind="sheet", warnings=warnings)


def _blocks(rows: list[list[str]]) -> Iterable[list[list[str]]]:
    """The runs of rows that hold a value, split at empty rows."""
    block: list[list[str]] = []
    for row in rows:
        if any(row):
            block.append(row)
        elif block:
            yield block
            block = []
    if block:
        yield block


def _block(rows: list[list[str]]) -> str:
    width = max(len(row) for row in rows)
    filled = [c for c in range(width) if any(c < len(row) and row[c] for row in rows)]
    cells = [[escape_text(row[c]) if c < len(row) else "" for c in filled] for row in rows]
    if len(cells) == 1 and len(filled) == 1:
        return escape_text(cells[0][0], line_start=True)  # a title or a note above a table
    return markdown_table(cells)


def _zip(values: Sequence[Any], formulas: Sequence[Any]) -> Iterable[tuple[Any, Any]]:
    for i, value in enumerate(values):
        formula = formulas[i] if i < len(formulas) else None
        yield value, formula if isinstance(formula, str) and formula.startswith("=") else None


def _text(value: Any) -> str:
    """A cell's value as Excel shows it, give or take the number format."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)
    if isinstance(value, datetime.datetime):
        return value.date().isoformat() if value.time() == datetime.time() else value.isoformat(sep=" ")
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    return " ".join(str(value).split())



_RELS = "{http://schemas.openxmlformats.org/package/2006/relationships}Relationship"
_R_ID = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"
_CHART_NS = "{http://schemas.openxmlformats.org/drawingml/2006/chart}"
_TEXT = "{http://schemas.openxmlformats.org/drawingml/2006/main}t"


def _charts(data: bytes) -> dict[str, list[str]]:
    """Each sheet's charts as lines ("Scatter chart: TITLE (SERIES, ...)"), in the order its
    drawing lists them: sheet -> drawing -> chart, by the package's relationships."""
    try:
        package = zipfile.ZipFile(io.BytesIO(data))
        if not any(n.startswith("xl/charts/") for n in package.namelist()):
            return {}
        targets = _targets(package, "xl/workbook.xml")
        found: dict[str, list[str]] = {}
        for sheet in ElementTree.fromstring(package.read("xl/workbook.xml")).iter():
            if not sheet.tag.endswith("}sheet") or sheet.get(_R_ID) not in targets:
                continue
            sheet_part = targets[sheet.get(_R_ID, "")]
            for drawing in _targets(package, sheet_part).values():
                for chart in _targets(package, drawing).values():
                    if chart.startswith("xl/charts/"):
                        found.setdefault(sheet.get("name", ""), []).append(_chart_line(package.read(chart)))
        return found
    except (KeyError, zipfile.BadZipFile, ElementTree.ParseError):
        return {}  # charts are a help to the reader: a workbook whose parts do not add up keeps its cells


def _targets(package: zipfile.ZipFile, part: str) -> dict[str, str]:
    """A part's relationships: id -> the part it points to, as a path in the package."""
    folder, name = posixpath.split(part)
    rels = posixpath.join(folder, "_rels", name + ".rels")
    if rels not in package.namelist():
        return {}
    # a target is relative to the part's folder, or (as openpyxl writes them) absolute in the package
    return {rel.get("Id", ""): posixpath.normpath(posixpath.join(folder, rel.get("Target", ""))).lstrip("/")
            for rel in ElementTree.fromstring(package.read(rels)).iter(_RELS)
            if rel.get("TargetMode") != "External"}


def _chart_line(xml: bytes) -> str:
    root = ElementTree.fromstring(xml)
    plot = root.find(f".//{_CHART_NS}plotArea")
    kinds = [child.tag.removeprefix(_CHART_NS) for child in plot if child.tag.endswith("Chart")] if plot is not None else []
    kind = re.sub(r"(?<=[a-z])(?=[A-Z0-9])", " ", kinds[0].removesuffix("Chart")).lower() if kinds else ""
    title = root.find(f"{_CHART_NS}chart/{_CHART_NS}title")
    title_text = " ".join("".join(t.text or "" for t in title.iter(_TEXT)).split()) if title is not None else ""
    names = (ser.find(f"{_CHART_NS}tx") for ser in root.iter(f"{_CHART_NS}ser"))
    series = [" ".join("".join(v.text or "" for v in tx.iter(f"{_CHART_NS}v")).split()) for tx in names if tx is not None]
    line = f"{kind.capitalize() + ' chart' if kind else 'Chart'}"
    line += f": {title_text}" if title_text else ""
    named = [s for s in series if s]
    return line + (f" ({', '.join(named)})" if named else "")
