"""kbuild.convert: every input is built here, in memory."""
from __future__ import annotations

import io
import random
import struct
import zipfile
from collections.abc import Callable

import pymupdf
from documents import LETTER, draw_table, red_pixmap, simple_pdf, three_page_pdf
import pytest

from kbuild.convert import ConversionError, Converted, Figure, convert, limits

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


# -- helpers -------------------------------------------------------------------


def png_size(png: bytes) -> tuple[int, int]:
    assert png.startswith(PNG_SIGNATURE)
    width, height = struct.unpack(">II", png[16:24])  # IHDR comes first
    return width, height


def handmade_pdf(objects: list[str]) -> bytes:
    """A PDF written byte by byte, for structures pymupdf refuses to save (no pages)."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def page_section(text: str, number: int) -> str:
    start = text.index(f"<!-- page {number} -->")
    end = text.find(f"<!-- page {number + 1} -->")
    return text[start:] if end < 0 else text[start:end]


# -- paged documents --------------------------------------------------------------


@pytest.fixture(scope="module")
def report() -> Converted:
    return convert(three_page_pdf(), "report.pdf")


def test_pdf_page_markers_in_order(report: Converted) -> None:
    markers = [line for line in report.text.split("\n") if line.startswith("<!-- page")]
    assert markers == ["<!-- page 1 -->", "<!-- page 2 -->", "<!-- page 3 -->"]
    assert report.kind == "pdf"
    assert report.warnings == []
    assert report.text.endswith("\n") and not report.text.endswith("\n\n\n")
    assert "Quarterly report" in page_section(report.text, 1)
    assert "Prices rose in spring." in page_section(report.text, 1)
    assert "Pictures" in page_section(report.text, 2)
    assert "Closing" in page_section(report.text, 3)
    assert "Thanks for reading." in page_section(report.text, 3)


def test_pdf_page_images_have_fixed_size(report: Converted) -> None:
    assert len(report.pages) == 3
    expected = (LETTER[0] * limits.PAGE_DPI / 72, LETTER[1] * limits.PAGE_DPI / 72)
    for png in report.pages:
        width, height = png_size(png)
        assert abs(width - expected[0]) <= 1 and abs(height - expected[1]) <= 1
    # PNGs that pymupdf can read back, i.e. well-formed
    assert pymupdf.Pixmap(report.pages[0]).width == png_size(report.pages[0])[0]


def test_pdf_table_is_detected_and_cut_out(report: Converted) -> None:
    tables = [f for f in report.figures if f.name.startswith("table-")]
    assert [t.name for t in tables] == ["table-01"]
    table = tables[0]
    assert table.page == 1
    assert png_size(table.png)[0] > 100
    rows = [line for line in table.text.splitlines() if line.startswith("|")]
    assert rows[0].replace(" ", "") == "|Name|Qty|Price|"
    assert set(rows[1].replace("|", "")) <= set("-: ")
    assert rows[2].replace(" ", "") == "|apple|3|1.20|"
    assert rows[3].replace(" ", "") == "|pear|5|0.80|"
    assert "Table 1: Fruit prices" in table.text  # its caption comes along
    page1 = page_section(report.text, 1)
    assert "[table-01](figures/table-01.md)" in page1
    assert "|apple|3|1.20|" in page1.replace(" ", "")  # the table is readable in place
    assert "\napple\n" not in page1  # rather than one cell per line


def test_pdf_image_is_cut_out_with_caption(report: Converted) -> None:
    figures = [f for f in report.figures if f.name.startswith("figure-")]
    assert [f.name for f in figures] == ["figure-01"]
    figure = figures[0]
    assert figure.page == 2
    assert figure.text.startswith("Figure 1: A red square")
    width, height = png_size(figure.png)
    assert width > height > 0  # 200x133 pt placed: landscape
    pixel = pymupdf.Pixmap(figure.png).pixel(width // 2, height // 2)
    assert pixel[0] > 150 and pixel[1] < 100  # red, i.e. the image and not blank page
    assert "![figure-01](figures/figure-01.png)" in page_section(report.text, 2)
    assert "figure-01" not in page_section(report.text, 1)


def test_pdf_links_follow_page_text(report: Converted) -> None:
    page1 = page_section(report.text, 1)
    assert page1.index("Prices rose in spring.") < page1.index("[table-01]")


def test_figures_are_frozen_dataclasses(report: Converted) -> None:
    figure = report.figures[0]
    assert isinstance(figure, Figure)
    with pytest.raises(AttributeError):
        figure.name = "other"  # type: ignore[misc]


def test_conversion_is_deterministic() -> None:
    data = three_page_pdf()
    first, second = convert(data, "a.pdf"), convert(data, "b.pdf")
    assert first == second


def png_colour_type(png: bytes) -> int:
    return png[25]  # IHDR: width, height, bit depth, then the colour type


def test_grey_pages_are_grey_pngs_with_the_same_pixels(report: Converted) -> None:
    """A page without colour is written as a greyscale PNG (a third of the bytes to
    compress), a page with colour as RGB; either decodes to what MuPDF rendered."""
    assert [png_colour_type(png) for png in report.pages] == [0, 2, 0]  # page 2 has a red image
    doc = pymupdf.open(stream=three_page_pdf(), filetype="pdf")
    for page, png in zip(doc, report.pages):
        rendered = page.get_pixmap(dpi=limits.PAGE_DPI, alpha=False)
        decoded = pymupdf.Pixmap(png)
        if decoded.n == 1:
            decoded = pymupdf.Pixmap(pymupdf.csRGB, decoded)
        assert decoded.samples == rendered.samples


def long_pdf(pages: int) -> bytes:
    """Pages of text, with a table, an image or a chart on some of them."""
    doc = pymupdf.open()
    for n in range(1, pages + 1):
        page = doc.new_page(width=LETTER[0], height=LETTER[1])
        page.insert_text((72, 72), f"Section {n}\nSome text on page {n}.", fontsize=11)
        if n % 3 == 0:
            draw_table(page, 72, 200, [["Name", "Qty"], [f"item {n}", str(n)]])
        if n % 4 == 0:
            page.insert_image(pymupdf.Rect(72, 400, 200, 480), pixmap=red_pixmap())
            page.insert_text((72, 495), f"Figure {n}: red", fontsize=9)
        if n % 5 == 0:
            for i in range(4):
                page.draw_rect(pymupdf.Rect(300 + 20 * i, 700 - 15 * (i + 1), 315 + 20 * i, 700), fill=(0, 0, 1))
            page.draw_line((295, 700), (385, 700))
    return doc.tobytes()


def test_worker_processes_give_the_same_bytes_as_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    from kbuild.convert import paged

    data = long_pdf(12)
    monkeypatch.setattr(limits, "PAGE_DPI", 50)  # patched limits reach the workers too
    monkeypatch.setattr(paged, "_CHUNK_PAGES", 2)
    alone = convert(data, "a.pdf")
    assert len(alone.figures) >= 8

    # Slow this process down (workers do not see the patch) so that the worker,
    # once started, certainly converts some of the pages.
    here: list[int] = []
    convert_range = paged._convert_range

    def slow_range(doc: pymupdf.Document, start: int, stop: int) -> tuple:
        import time

        here.append(start)
        time.sleep(1.0)
        return convert_range(doc, start, stop)

    monkeypatch.setattr(paged, "_convert_range", slow_range)
    monkeypatch.setattr(paged, "_worker_count", lambda pages: 1)
    shared = convert(data, "a.pdf")
    assert 0 < len(here) < 6  # this process did some chunks, the worker the others
    assert shared == alone


def test_pages_are_converted_here_when_workers_cannot_start(monkeypatch: pytest.MonkeyPatch) -> None:
    import multiprocessing.spawn

    from kbuild.convert import paged

    data = long_pdf(8)
    alone = convert(data, "a.pdf")
    monkeypatch.setattr(paged, "_worker_count", lambda pages: 2)
    python = multiprocessing.spawn.get_executable()
    multiprocessing.set_executable("/nonexistent/python")
    try:
        assert convert(data, "a.pdf") == alone
    finally:
        multiprocessing.set_executable(python)


def test_a_damaged_long_pdf_is_converted_in_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """A repair changes how later objects are read, so damaged files keep one
    process and page order: the result cannot depend on how pages were shared."""
    from kbuild.convert import paged

    data = long_pdf(8).replace(b"startxref", b"startxrex")
    alone = convert(data, "a.pdf")
    assert any("repaired" in w for w in alone.warnings)
    monkeypatch.setattr(paged, "_worker_count", lambda pages: 1)
    monkeypatch.setattr(paged, "_parallel", lambda *args: pytest.fail("shared a damaged file"))
    assert convert(data, "a.pdf") == alone


def test_vector_drawing_becomes_figure() -> None:
    doc = pymupdf.open()
    page = doc.new_page()
    for i in range(5):
        page.draw_rect(pymupdf.Rect(100 + 25 * i, 300 - 20 * (i + 1), 118 + 25 * i, 300), fill=(0, 0, 1))
    page.draw_line((95, 300), (230, 300))
    page.insert_text((100, 318), "Fig. 2 Sales by year", fontsize=10)
    page.insert_text((72, 600), "Unrelated text far below.", fontsize=10)
    result = convert(doc.tobytes(), "chart.pdf")
    assert [(f.name, f.page) for f in result.figures] == [("figure-01", 1)]
    assert result.figures[0].text.startswith("Fig. 2 Sales by year")
    assert "Unrelated" not in result.figures[0].text


def test_figures_are_numbered_in_document_order() -> None:
    doc = pymupdf.open()
    for n in range(2):
        page = doc.new_page()
        page.insert_image(pymupdf.Rect(72, 400, 200, 480), pixmap=red_pixmap())  # lower first
        page.insert_image(pymupdf.Rect(72, 100, 200, 180), pixmap=red_pixmap())
        draw_table(page, 300, 250, [["a", "b"], [f"{n}", "d"]])
    result = convert(doc.tobytes(), "x.pdf")
    assert [(f.name, f.page) for f in result.figures] == [
        ("figure-01", 1), ("table-01", 1), ("figure-02", 1),
        ("figure-03", 2), ("table-02", 2), ("figure-04", 2),
    ]
    assert [f.text.count("|0|") for f in result.figures if f.name.startswith("table")] == [1, 0]


def test_cbz_is_paged_and_warns_about_missing_text() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("001.png", red_pixmap().tobytes("png"))
        archive.writestr("002.png", red_pixmap().tobytes("png"))
    result = convert(buffer.getvalue(), "comic.cbz")
    assert result.kind == "cbz"
    assert len(result.pages) == 2
    assert "<!-- page 2 -->" in result.text
    assert any("no text layer" in w for w in result.warnings)


def test_pdf_under_unknown_extension_is_recognised() -> None:
    result = convert(simple_pdf(), "download")
    assert result.kind == "pdf" and "page 1 text" in result.text


# -- text sources ------------------------------------------------------------------


SOURCE_LINES = ["# Title", "", "Some *text* here.", "", "    indented", "last line"]


@pytest.mark.parametrize(
    ("filename", "kind"),
    [("notes.md", "markdown"), ("guide.rst", "rst"), ("main.py", "code"), ("lib.rs", "code"),
     ("conf.yaml", "code"), ("readme.txt", "text"), ("LICENSE", "text"), ("data.weird", "text")],
)
def test_text_keeps_line_numbers(filename: str, kind: str) -> None:
    data = "\r\n".join(SOURCE_LINES).encode() + b"\r\n\r\n\r\n"
    result = convert(data, filename)
    assert result.kind == kind
    assert result.text == "\n".join(SOURCE_LINES) + "\n"
    assert result.text.split("\n")[:-1] == SOURCE_LINES
    assert result.pages == [] and result.figures == [] and result.warnings == []


def test_mixed_newlines_are_normalised_line_for_line() -> None:
    result = convert(b"one\r\ntwo\rthree\nfour", "mixed.py")
    assert result.text == "one\ntwo\nthree\nfour\n"


def test_blank_lines_inside_are_kept() -> None:
    result = convert(b"\n\nthird\n\n\nsixth\n", "a.md")
    assert result.text.split("\n")[2] == "third" and result.text.split("\n")[5] == "sixth"


def test_utf8_bom_is_stripped() -> None:
    result = convert(b"\xef\xbb\xbf# Caf\xc3\xa9\n", "a.md")
    assert result.text == "# Café\n" and result.warnings == []


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_utf16_with_bom(codec: str) -> None:
    bom = b"\xff\xfe" if codec == "utf-16-le" else b"\xfe\xff"
    result = convert(bom + "naïve\r\nline 2\n".encode(codec), "a.txt")
    assert result.text == "naïve\nline 2\n" and result.warnings == []


def test_cp1252_decodes_with_warning() -> None:
    text = "Le café était très agréable — “déjà vu”.\nÇa coûte 5 €.\n"
    result = convert(text.encode("cp1252"), "notes.txt")
    assert result.text == text
    assert len(result.warnings) == 1 and "cp1252" in result.warnings[0]


def test_latin1_short_text_decodes_with_warning() -> None:
    result = convert("naïve café\n".encode("latin-1"), "a.md")
    assert result.text == "naïve café\n"
    assert "decoded as" in result.warnings[0]


def test_whitespace_only_file_warns() -> None:
    result = convert(b"  \n\n", "a.txt")
    assert result.warnings and "whitespace" in result.warnings[0]


# -- HTML ---------------------------------------------------------------------------


def test_html_becomes_markdown() -> None:
    html = b"""<!DOCTYPE html><html><head><title>Ignored title</title>
    <style>h1 { color: red }</style><script>alert("boo"); var a = 1 < 2;</script></head>
    <body><h1>Main  title</h1><p>First &amp; <b>bold</b> para
    with <a href="https://example.org/x">a link</a>.</p>
    <h2>Section</h2><p>Second para.</p>
    <ul><li>one</li><li>two</li></ul>
    <pre>keep
   spacing</pre>
    <table><tr><th>K</th><th>V</th></tr><tr><td>a</td><td>1</td></tr></table>
    <noscript>enable js</noscript></body></html>"""
    result = convert(html, "page.html")
    assert result.kind == "html"
    lines = result.text.split("\n")
    assert "# Main title" in lines
    assert "## Section" in lines
    assert "First & **bold** para with [a link](https://example.org/x)." in lines
    assert "Second para." in lines
    assert "- one" in lines and "- two" in lines
    assert "keep\n   spacing" in result.text
    assert "| K | V |" in lines and "| a | 1 |" in lines
    for dropped in ("alert", "color: red", "enable js", "Ignored title"):
        assert dropped not in result.text
    assert result.text.endswith("\n") and not result.text.endswith("\n\n")


def test_html_title_used_when_no_h1() -> None:
    result = convert(b"<title>Page name</title><p>body</p>", "x.htm")
    assert result.text == "# Page name\n\nbody\n"


def test_a_page_of_menus_alone_keeps_its_menus() -> None:
    """A site's navigation is dropped around an article; a page that is nothing but a menu (a
    sitemap, docling's hyperlink_03.html) has no other words, so its menu is its content."""
    menu = b"""<html><body><ul class="nav navbar-nav"><li class="dropdown"><a href="#">My Section</a>
    <ul class="dropdown-menu" role="menu"><li>This is my <a href="/home.html">Homepage</a></li></ul></li></ul>
    </body></html>"""
    assert convert(menu, "sitemap.html").text == "- My Section\n   - This is my [Homepage](/home.html)\n"
    article = b"<nav><a href='/'>Home</a></nav><main><p>The article.</p></main>"
    assert convert(article, "page.html").text == "The article.\n"


def test_html_declared_charset_is_honoured() -> None:
    data = '<meta charset="windows-1252"><p>café</p>'.encode("cp1252")
    result = convert(data, "x.html")
    assert result.text == "café\n" and result.warnings == []


# -- bad sources ----------------------------------------------------------------------


def encrypted_pdf() -> bytes:
    doc = pymupdf.open(stream=simple_pdf(), filetype="pdf")
    return doc.tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="x", owner_pw="owner")


def zero_page_pdf() -> bytes:
    return handmade_pdf(["<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [] /Count 0 >>"])


def truncated_pdf() -> bytes:
    data = simple_pdf(5)
    return data[: len(data) // 2]


BAD_SOURCES = [
    # (id, bytes factory, filename, words the message must contain)
    ("empty", lambda: b"", "a.md", ["empty", "sources.yml"]),
    ("empty-pdf", lambda: b"", "a.pdf", ["empty"]),
    ("nul-bytes-txt", lambda: b"hello\x00\x01\x02world" * 50, "a.txt", ["binary", "not text"]),
    ("control-bytes-md", lambda: bytes(range(1, 9)) * 200, "a.md", ["binary"]),
    ("pdf-posing-as-md", simple_pdf, "a.md", ["binary", "PDF"]),
    ("png-posing-as-txt", lambda: red_pixmap().tobytes("png"), "a.txt", ["PNG"]),
    ("garbage-pdf", lambda: b"this is not a pdf at all" * 10, "a.pdf", ["not a PDF"]),
    ("html-as-pdf", lambda: b"<!DOCTYPE html><html><body>403 Forbidden</body></html>", "a.pdf",
     ["HTML page", "URL"]),
    ("corrupt-pdf", lambda: b"%PDF-1.7\n" + bytes(range(256)) * 4, "a.pdf", ["download it again"]),
    ("truncated-pdf", truncated_pdf, "a.pdf", ["truncated", "download it again"]),
    ("encrypted-pdf", encrypted_pdf, "a.pdf", ["encrypted", "password"]),
    ("zero-pages", zero_page_pdf, "a.pdf", ["no pages"]),
    ("corrupt-epub", lambda: b"PK\x03\x04 broken", "a.epub", ["EPUB", "corrupt"]),
    ("word", lambda: b"PK\x03\x04 something", "a.docx", ["Word", "export it to PDF"]),
]


@pytest.mark.parametrize(
    ("factory", "filename", "words"),
    [pytest.param(f, n, w, id=i) for i, f, n, w in BAD_SOURCES],
)
def test_bad_source_raises_one_clear_line(
    factory: Callable[[], bytes], filename: str, words: list[str]
) -> None:
    secret = "zz-" + filename  # the caller names the source; the message must not
    with pytest.raises(ConversionError) as caught:
        convert(factory(), secret)
    message = str(caught.value)
    for word in words:
        assert word.lower() in message.lower(), message
    assert "\n" not in message
    assert secret not in message and "zz-" not in message
    assert caught.value.__cause__ is None  # no chained traceback to show


def test_too_large_is_refused_before_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    data = bytes(limits.MAX_SOURCE_BYTES + 1)  # real limit: NUL bytes, never parsed
    with pytest.raises(ConversionError, match="limit"):
        convert(data, "big.pdf")
    monkeypatch.setattr(limits, "MAX_SOURCE_BYTES", 1000)
    with pytest.raises(ConversionError, match=r"over the .* limit.*split"):
        convert(b"a" * 1001, "a.txt")
    assert convert(b"a" * 1000, "a.txt").text == "a" * 1000 + "\n"


def test_too_many_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_PAGES", 2)
    with pytest.raises(ConversionError, match=r"has 3 pages.*limit of 2.*split"):
        convert(simple_pdf(3), "a.pdf")
    assert len(convert(simple_pdf(2), "a.pdf").pages) == 2


def test_limits_have_documented_values() -> None:
    assert limits.MAX_SOURCE_BYTES == 100 * 1024 * 1024
    assert limits.MAX_PAGES == 2000
    assert 72 <= limits.PAGE_DPI <= 100


def test_owner_password_only_pdf_converts() -> None:
    doc = pymupdf.open(stream=simple_pdf(), filetype="pdf")
    data = doc.tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256, owner_pw="owner", permissions=0)
    assert "page 1 text" in convert(data, "a.pdf").text


def test_repaired_pdf_converts_with_warning() -> None:
    data = simple_pdf(2)
    broken = data.replace(b"startxref", b"startxrex")  # xref lost, file complete
    result = convert(broken, "a.pdf")
    assert "page 2 text" in result.text
    assert any("repaired" in w for w in result.warnings)


def test_damaged_pdfs_give_results_or_conversion_errors_quietly(capfd: pytest.CaptureFixture[str]) -> None:
    """Bytes flipped, cut or inserted anywhere: a result or ConversionError, never
    another exception, and nothing printed by MuPDF."""
    rng = random.Random(7)
    base = pymupdf.open(stream=three_page_pdf(), filetype="pdf").tobytes(deflate=True, garbage=3)
    for attempt in range(40):
        data = bytearray(base)
        if attempt % 3 == 0:
            for _ in range(rng.randint(1, 30)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        elif attempt % 3 == 1:
            data = data[: rng.randrange(len(data))]
        else:
            start = rng.randrange(len(data))
            del data[start : start + rng.randint(1, 400)]
        try:
            result = convert(bytes(data), "a.pdf")
        except ConversionError as error:
            assert "\n" not in str(error)
        else:
            assert result.text.startswith("<!-- page 1 -->")
            assert all(png.startswith(PNG_SIGNATURE) for png in result.pages)
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == ""


MESSY = """# Guide

## <a name="retry"></a> 4.2.1 Retry Limits

A client MUST NOT retry more than 3 times &mdash; see <a href="volume-1.html">the main volume</a>.
<div class="breaker"></div>
Use <b>exponential</b> backoff, <em>never</em> a fixed delay.<br/>Plain `<div>` stays in code.

```html
<div class="example">&amp; kept as written</div>
```
"""


def test_inline_html_of_markdown_becomes_its_markdown_meaning_line_for_line():
    from kbuild.convert import convert

    text = convert(MESSY.encode(), "guide.md").text
    assert text.count("\n") == MESSY.count("\n")  # line N of text.md is still line N of the source
    lines = text.splitlines()
    assert lines[2] == "## 4.2.1 Retry Limits"
    assert lines[4] == "A client MUST NOT retry more than 3 times — see [the main volume](volume-1.html)."
    # the <div> opens an HTML block that runs to the blank line: rendered, its code span kept as written
    assert lines[5:7] == ["Use **exponential** backoff, *never* a fixed delay.", "Plain `<div>` stays in code."]
    assert '<div class="example">&amp; kept as written</div>' in text  # code is code


# A page of a site built with Jekyll and kramdown (or Hugo, MkDocs, Pandoc), as such sites keep
# them: front matter, ids after headings, attribute lists, a Liquid tag, a table without its
# outer pipes. Written for this test, in the form of a standard published as a GitHub Pages site.
SITE_PAGE = """---
layout: default
title: Secrets
permalink: /guide/secrets/
---

# Secret and Checker Requirements {#SEC3}

{% include toc.html %}

[Table 1. Kinds of secret](secrets.md#table-1){:name="table-1"}
{:latex-ignore="true"}

Kind of secret| Purpose
--------------|--------
Passphrase | A member-chosen secret
{:latex-table="1"}

### Passphrases {: #passphrase .normative }

A passphrase is "something you know".
{:.secret-image}

Slowing Guesses {#slowing}
---------------

```liquid
{% include toc.html %}
{:.kept}
```

Checkers keep `{:.this}` as code.
"""


def test_what_a_site_generator_reads_is_not_the_documents_words_line_for_line():
    from kbuild.convert import convert

    text = convert(SITE_PAGE.encode(), "secrets.md").text
    assert text.count("\n") == SITE_PAGE.count("\n")  # line N of text.md is still line N of the source
    lines = text.splitlines()
    assert lines[:6] == [""] * 6  # the front matter
    assert lines[6] == "# Secret and Checker Requirements"
    assert lines[8] == ""  # the Liquid tag
    assert lines[10:12] == ["[Table 1. Kinds of secret](secrets.md#table-1)", ""]
    assert lines[13:17] == ["| Kind of secret| Purpose |", "| --------------|-------- |",
                            "| Passphrase | A member-chosen secret |", ""]
    assert lines[18] == "### Passphrases"
    assert lines[20:22] == ['A passphrase is "something you know".', ""]
    assert lines[23] == "Slowing Guesses"
    assert "```liquid\n{% include toc.html %}\n{:.kept}\n```" in text  # code is code
    assert "Checkers keep `{:.this}` as code." in text
    # a line with no pipe after the rows, which GFM reads as a row of one cell, is left as written
    assert convert(b"a | b\n--|--\n1 | 2\nTotals\n", "t.md").text == "| a | b |\n| --|-- |\n| 1 | 2 |\nTotals\n"


BOXES = """# Keys

!!! warning "Keep keys apart"
    Store the signing key apart from the data.

    It SHALL be rotated every 90 days.

=== "Python"
    ```python
    key = load()
    ```

:::tip Rotate often
Rotate keys every 90 days.
:::

> [!WARNING]
> Do not keep keys in localStorage.

```text
!!! note
    code stays code
:::
```
"""


def test_a_box_keeps_its_words_under_its_title_line_for_line():
    """MkDocs indents an admonition's body by four, which CommonMark reads as code: its words
    were code to every reader of text.md. A fenced div's fences and an alert's marker were words."""
    from kbuild.convert import convert

    text = convert(BOXES.encode(), "keys.md").text
    assert text.count("\n") == BOXES.count("\n")
    assert text.split("\n")[2:6] == ["**Keep keys apart:**", "Store the signing key apart from the data.", "",
                                     "It SHALL be rotated every 90 days."]
    assert "**Python:**\n```python\nkey = load()\n```" in text
    assert "**Rotate often:**\nRotate keys every 90 days.\n\n" in text and ":::" not in text.split("```text")[0]
    assert "> **Warning:**\n> Do not keep keys in localStorage." in text
    assert "```text\n!!! note\n    code stays code\n:::\n```" in text  # code is code


def test_a_footnotes_mark_leaves_its_sentence_and_its_words_stand_as_a_note():
    from kbuild.convert import convert

    source = ("# Keys\n\nKeys are hashed[^1] and salted[^salt]; `a[^1]` and [^a-z] stay.\n\n"
              "[^1]: With a slow hash.\n\n[^salt]: A salt is random.\n")
    text = convert(source.encode(), "keys.md").text
    assert text.split("\n")[2] == "Keys are hashed and salted; `a[^1]` and [^a-z] stay."  # no note of "a-z"
    assert "\nNote 1: With a slow hash.\n\nNote salt: A salt is random.\n" in text


def test_mdx_is_markdown_without_its_javascript():
    """Docusaurus' and Nextra's pages are MDX: Markdown whose `import` and `export` lines are
    JavaScript and whose components are tags. It was read as plain text, its code and tags words."""
    from kbuild.convert import convert

    source = ("import Tabs from '@theme/Tabs';\nexport const meta = {\n  author: 'kb',\n};\n\n# Install\n\n"
              "<Tabs>\n<TabItem value=\"pip\">\n\nRun the installer with **pip**.\n\n</TabItem>\n</Tabs>\n\n"
              "```js\nimport x from 'y';\n```\n")
    converted = convert(source.encode(), "install.mdx")
    assert converted.kind == "markdown"
    lines = converted.text.split("\n")
    assert lines[:6] == ["", "", "", "", "", "# Install"]
    assert "Run the installer with **pip**." in lines and "<" not in converted.text
    assert "```js\nimport x from 'y';\n```" in converted.text  # code is code
    # a Markdown document's sentence that starts with "import" is a sentence
    assert convert(b"import the data from 'the export' first;\n", "notes.md").text.startswith("import the data")


def test_front_matters_title_is_the_heading_of_a_document_that_has_none():
    from kbuild.convert import convert

    text = convert(b"---\ntitle: \"Rate limits\"\nsidebar_position: 2\n---\n\nClients retry three times.\n", "r.md").text
    assert text.splitlines()[:4] == ["# Rate limits", "", "", ""]
    # a thematic break over a paragraph is no front matter
    assert convert(b"---\nClients retry.\n---\n", "r.md").text == "---\nClients retry.\n---\n"


def test_ligatures_become_the_letters_they_stand_for_and_other_signs_stay():
    from kbuild.convert import convert

    text = convert("The ﬁle was veriﬁed; ﬂow is 2² m².\n".encode(), "notes.txt").text
    assert text == "The file was verified; flow is 2² m².\n"


def test_a_heading_with_an_anchor_names_its_fact_by_its_visible_words(tmp_path):
    from conftest import kbuild

    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    (tmp_path / "guide.md").write_text(MESSY)
    assert kbuild(tmp_path, "add", "p", "guide.md").exit_code == 0
    result = kbuild(tmp_path)
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in (tmp_path / "kb/p/facts/guide").glob("*.md"))
    assert not [n for n in names if "a-name" in n], names
    page = "\n".join(p.read_text() for p in (tmp_path / "kb/p").rglob("*.md") if "/raw/" not in p.as_posix())
    assert "<a name" not in page and "&mdash;" not in page and '<div class="breaker">' not in page


def _sectioned_pdf(outline: bool) -> bytes:
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "Retry Limits", fontsize=18)
    page.insert_text((72, 100), "Retries stop after three attempts.\nEach waits twice as long.", fontsize=10)
    page.insert_text((72, 160), "Backoff", fontsize=14)
    page.insert_text((72, 190), "The first wait is one second.", fontsize=10)
    if outline:
        doc.set_toc([[1, "Retry Limits", 1], [2, "Backoff", 1]])
    return doc.tobytes()


@pytest.mark.parametrize("outline", [True, False])
def test_a_pdfs_sections_become_headings_from_its_outline_or_its_larger_type(outline):
    """Facts are cut at and named after headings; a PDF's text had none, so every fact of a PDF
    was named `opening`. The words stay as they were, only marked."""
    text = convert(_sectioned_pdf(outline), "limits.pdf").text
    assert "# Retry Limits\n\nRetries stop after three attempts.\nEach waits twice as long." in text
    assert "\n## Backoff\n\nThe first wait is one second." in text


def test_a_pdfs_facts_are_named_after_its_sections(tmp_path):
    from conftest import kbuild

    (tmp_path / "limits.pdf").write_bytes(_sectioned_pdf(outline=False))
    assert kbuild(tmp_path, "init", str(tmp_path)).exit_code == 0
    assert kbuild(tmp_path, "add", "ops", "limits.pdf").exit_code == 0
    assert kbuild(tmp_path).exit_code == 0
    assert (tmp_path / "kb/ops/facts/limits/retry-limits.md").is_file()
