"""Office documents build: Word, PowerPoint, Excel (.xlsx and .xls), Jupyter notebooks and Outlook
messages become Markdown a reader and the slicer can use (headings, lists, tables, one section per
slide or sheet), deterministically, offline, and a one-cell edit of a workbook rewrites only that
row. Without the `office` extra such a file fails with one line saying what to install.
The files in tests/data/office are copies from ../shared/corpus-wild/office (see their README)."""
from __future__ import annotations

import builtins
import difflib
import io
import json
import shutil
import sys
from pathlib import Path

import pytest
from conftest import kbuild

from kbuild.convert import ConversionError, convert
from kbuild.text.markdown import live_html

OFFICE = Path(__file__).parent / "data" / "office"
FILES = sorted(p for p in OFFICE.iterdir() if p.suffix != ".md")


def converted(name: str) -> str:
    return convert((OFFICE / name).read_bytes(), name).text


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_each_office_file_converts_twice_to_the_same_markdown_without_live_html(path):
    first = convert(path.read_bytes(), path.name)
    second = convert(path.read_bytes(), path.name)
    assert first.text == second.text
    assert len(first.text.split()) >= 5, first.text
    assert live_html(first.text) == []


def test_word_headings_lists_and_tables():
    text = converted("word_tables.docx")
    assert "# Test with tables" in text.splitlines()
    assert "| Header 0.0 | Header 0.1 | Header 0.2 |" in text
    # a merged cell stands in each column it covers, as a reader of that row sees it
    assert "| Cell 1.0 | Merged Cell 1.1 1.2 | Merged Cell 1.1 1.2 |" in text

    lists = converted("docx_lists.docx").splitlines()
    assert "1. List item a" in lists and "3. List item c" in lists
    nested = [line for line in lists if line.strip() == "- List item 1.1"]
    assert nested and all(line.startswith((" ", "\t")) for line in nested)  # nested under its parent


def test_word_numbered_headings_keep_their_numbers():
    lines = converted("unit_test_headers_numbered.docx").splitlines()
    # as Word shows them: each level's count, in the form its list gives ("%1.%2.")
    assert "# 1. Section 1" in lines
    assert "## 1.1. Section 1.1" in lines
    assert "### 1.2.1. Section 1.2.3" in lines
    assert "# 2. Section 2" in lines
    assert "### 2.1.1. Section 2.1.1" in lines  # a level skipped shows its start


def test_word_comments_are_kept_as_text():
    text = converted("docx_comments.docx")
    assert "This is the first paragraph that has a comment attached to it." in text
    body = text.split("This paragraph has an anonymous comment.")[0]
    comments = text[len(body):]
    assert "Comments" in comments and len(comments.split()) > 10, text


def test_slides_one_section_each_with_tables_and_chart_titles():
    text = converted("powerpoint_sample.pptx")
    lines = text.splitlines()
    assert "## Slide 1: Test Table Slide" in lines
    assert "## Slide 2: Second slide title" in lines
    assert any(line.startswith("| R1 | True | False |") for line in lines), text
    assert "A rectangle shape with this text inside." in text

    chart = converted("pptx_chart.pptx")
    assert "## Slide 1: Quarterly Duck Survey" in chart
    assert "Wild Duck Observations by Year" in chart


def test_workbooks_one_section_per_sheet_as_tables():
    text = converted("xlsx_05_table_with_title.xlsx")
    assert "## Duck Observations" in text.splitlines()
    assert "| 2019 | 120 |" in text
    assert "|  |" not in text.replace("|  |  |", "")  # empty columns trimmed, no row of nothing

    old = converted("test.xls")
    assert "## Sheet1" in old.splitlines()
    assert "| Alpha | Beta | Gamma | Delta |" in old
    assert "| 89 | 82 | 100 | 12 |" in old  # whole numbers as Excel shows them, not 89.0


def test_workbook_formulas_by_their_cached_values_and_edges_trimmed(tmp_path):
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    sheet.title = "Limits"
    sheet["C3"], sheet["D3"] = "name", "limit"
    sheet["C4"], sheet["D4"] = "upload", 10
    sheet["C5"], sheet["D5"] = "double", "=D4*2"
    data = io.BytesIO()
    book.save(data)
    text = convert(data.getvalue(), "limits.xlsx").text
    assert text.splitlines()[0] == "## Limits"
    assert "| name | limit |" in text  # rows 1-2 and columns A-B are empty: trimmed
    # openpyxl writes no cached value for a formula: the formula is shown rather than nothing
    assert "| double | =D4\\*2 |" in text  # the star escaped, so it shows as written


def test_a_workbooks_charts_are_lines_of_their_sheet_with_kind_title_and_series():
    """docling's xlsx_01.xlsx kept 0.88 of its words: its charts were not read at all."""
    from openpyxl import Workbook
    from openpyxl.chart import LineChart, Reference

    book = Workbook()
    sheet = book.active
    sheet.title = "Sales"
    for row in (["month", "2023", "2024"], ["Jan", 10, 12], ["Feb", 11, 15]):
        sheet.append(row)
    chart = LineChart()
    chart.title = "Sales by month"
    chart.add_data(Reference(sheet, min_col=2, max_col=3, min_row=1, max_row=3), titles_from_data=True)
    sheet.add_chart(chart, "E2")
    book.create_sheet("Empty")
    data = io.BytesIO()
    book.save(data)
    text = convert(data.getvalue(), "sales.xlsx").text
    sales, empty = text.split("## Empty")
    # openpyxl saves no cached series names (Excel does: docling's xlsx_01.xlsx has them)
    assert "Line chart: Sales by month" in sales and "chart" not in empty


def test_a_one_cell_edit_of_a_workbook_rewrites_only_that_row():
    from openpyxl import Workbook

    def book(limit: int) -> bytes:
        workbook = Workbook()
        sheet = workbook.active
        sheet.append(["setting", "value", "owner"])
        for n in range(1, 30):
            sheet.append([f"setting {n}", limit if n == 17 else n * 10, "ops"])
        data = io.BytesIO()
        workbook.save(data)
        return data.getvalue()

    before = convert(book(170), "settings.xlsx").text.splitlines()
    after = convert(book(999), "settings.xlsx").text.splitlines()
    changed = [line for line in difflib.unified_diff(before, after, lineterm="", n=0)
               if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))]
    assert changed == ["-| setting 17 | 170 | ops |", "+| setting 17 | 999 | ops |"]


def test_a_notebook_reads_as_markdown_and_code_not_json():
    text = converted("test_notebook.ipynb")
    assert '"cell_type"' not in text
    lines = text.splitlines()
    assert "# Test Notebook" in lines
    assert "## Code Cell Below" in lines
    assert "```python" in lines and 'print("markitdown")' in lines
    assert "markitdown" in lines  # the cell's output, as text


def test_a_json_file_named_ipynb_that_is_no_notebook_is_read_as_code():
    result = convert(json.dumps({"name": "x", "cells": "none"}).encode(), "odd.ipynb")
    assert result.kind == "code"


def test_an_outlook_message_reads_as_its_headers_and_body():
    text = converted("test_outlook_msg.msg")
    assert "# Test Email Message" in text.splitlines()
    assert "test.sender@example.com" in text and "test.recipient@example.com" in text
    assert "This is the body of the test email message" in text


def test_a_corrupt_office_file_fails_with_one_line():
    with pytest.raises(ConversionError) as failure:
        convert(b"PK\x03\x04 not really a zip", "plan.docx")
    assert "\n" not in str(failure.value)
    assert "Word" in str(failure.value)


@pytest.mark.parametrize("name, library", [("word_tables.docx", "mammoth"), ("powerpoint_sample.pptx", "pptx"),
                                           ("xlsx_05_table_with_title.xlsx", "openpyxl"), ("test.xls", "xlrd"),
                                           ("test_outlook_msg.msg", "olefile")])
def test_without_the_office_extra_a_file_fails_with_one_line_naming_it(monkeypatch, name, library):
    real_import = builtins.__import__

    def missing(module: str, *args, **kwargs):
        if module.split(".")[0] == library:
            raise ModuleNotFoundError(f"No module named '{library}'", name=library)
        return real_import(module, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", missing)
    for converter in ("word", "slides", "sheets", "outlook"):  # imported anew, as in a fresh process
        monkeypatch.delitem(sys.modules, f"kbuild.convert.{converter}", raising=False)
    with pytest.raises(ConversionError) as failure:
        convert((OFFICE / name).read_bytes(), name)
    message = str(failure.value)
    assert "pip install 'kbuild[office]'" in message and "\n" not in message


def test_the_converters_versions_are_in_the_fingerprint_of_what_they_convert_alone(tmp_path, monkeypatch):
    """An office library's version decides the conversion of its format's files, and nothing
    else: a store of Markdown has the same lock with or without `kbuild[office]` installed (this
    repository's own `kbuild check` failed in an environment without it)."""
    from importlib.metadata import version

    from kbuild import plugins
    from kbuild.rules.facts import converter_libraries, text

    for ext, library in (("docx", "mammoth"), ("pptx", "python-pptx"), ("xlsx", "openpyxl"), ("xls", "xlrd"),
                         ("msg", "olefile")):
        assert converter_libraries.params["libraries"][ext][library] == version(library)
    with_office = dict(text.params)
    monkeypatch.setattr(plugins, "installed_version", lambda name: None)
    assert dict(text.params) == with_office == {"plugins": {}}  # nothing of an office library in it

    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    (tmp_path / "a.md").write_text("# A\n\nAlpha.\n")
    shutil.copy(OFFICE / "word_tables.docx", tmp_path / "w.docx")
    assert kbuild(tmp_path, "add", "p", "a.md", "w.docx").exit_code == 0
    assert kbuild(tmp_path).exit_code == 0
    lock = (tmp_path / "kbuild.lock").read_text()
    assert 'converter_libraries(\\"docx\\")' in lock and 'converter_libraries(\\"md' not in lock  # as the lock escapes them


def test_a_project_of_office_files_builds_offline_with_no_failed_page(tmp_path):
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    for path in FILES:
        shutil.copy(path, tmp_path / path.name)
        source = path.stem.lower().replace("_", "-")
        added = kbuild(tmp_path, "add", "p", path.name, "--id", source)
        assert added.exit_code == 0, added.output
    result = kbuild(tmp_path)
    assert result.exit_code == 0, result.output
    assert "failed" not in result.output.lower() or " 0 failed" in result.output.lower(), result.output
    pages = {p.relative_to(tmp_path).as_posix(): p.read_text() for p in sorted((tmp_path / "kb").rglob("*.md"))
             if "/raw/" not in p.as_posix()}
    assert {name: live_html(text) for name, text in pages.items() if live_html(text)} == {}
    assert "# Test Email Message" in (tmp_path / "kb/p/facts/test-outlook-msg/text.md").read_text()
    check = kbuild(tmp_path, "check")
    assert check.exit_code == 0, check.output
