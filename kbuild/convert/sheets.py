"""An Excel workbook (.xlsx with openpyxl, .xls with xlrd) as Markdown: one section per sheet,
`## NAME`, and each block of rows (rows between empty ones) as a Markdown table whose first row is
its header; columns empty in the whole block are left out, and a block of one cell is a line of
text (a title above a table). A formula is shown by the value Excel last computed and saved with
it; a formula saved with no value (a workbook written by a script) by its text. Numbers as Excel
shows a whole number ("12", not "12.0"), dates in ISO form. A one-cell edit changes that row's
line only (unless it makes a column appear or go). The same bytes give the same Markdown.
"""
from __future__ import annotations

import datetime
import io
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
    return _workbook(sheets)


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


def _workbook(sheets: Sequence[tuple[str, list[list[str]]]]) -> Converted:
    sections = []
    for name, rows in sheets:
        parts = [f"## {escape_text(' '.join(name.split()))}"]
        parts += [_block(block) for block in _blocks(rows)]
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

