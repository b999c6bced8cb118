"""Documents the tests build for themselves (no test depends on files outside the repository)."""
from __future__ import annotations

from pathlib import Path

import pymupdf

LETTER = (612, 792)  # points


def red_pixmap() -> pymupdf.Pixmap:
    pixmap = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 60, 40), False)
    pixmap.set_rect(pixmap.irect, (200, 30, 30))
    return pixmap


def draw_table(page: pymupdf.Page, x0: float, y0: float, rows: list[list[str]]) -> None:
    cw, rh = 100.0, 20.0
    cols = len(rows[0])
    for r in range(len(rows) + 1):
        page.draw_line((x0, y0 + r * rh), (x0 + cols * cw, y0 + r * rh))
    for c in range(cols + 1):
        page.draw_line((x0 + c * cw, y0), (x0 + c * cw, y0 + len(rows) * rh))
    for r, row in enumerate(rows):
        for c, text in enumerate(row):
            page.insert_text((x0 + c * cw + 4, y0 + r * rh + 14), text, fontsize=10)


def three_page_pdf() -> bytes:
    doc = pymupdf.open()
    page = doc.new_page(width=LETTER[0], height=LETTER[1])
    page.insert_text((72, 72), "Quarterly report", fontsize=16)
    page.insert_text((72, 100), "Table 1: Fruit prices", fontsize=10)
    draw_table(page, 72, 110, [["Name", "Qty", "Price"], ["apple", "3", "1.20"], ["pear", "5", "0.80"]])
    page.insert_text((72, 220), "Prices rose in spring.", fontsize=10)

    page = doc.new_page(width=LETTER[0], height=LETTER[1])
    page.insert_text((72, 72), "Pictures", fontsize=16)
    page.insert_image(pymupdf.Rect(72, 120, 272, 253), pixmap=red_pixmap())
    page.insert_text((72, 268), "Figure 1: A red square", fontsize=10)

    page = doc.new_page(width=LETTER[0], height=LETTER[1])
    page.insert_htmlbox(pymupdf.Rect(72, 72, 540, 300), "<h1>Closing</h1><p>Thanks for reading.</p>")
    return doc.tobytes()


def simple_pdf(pages: int = 1) -> bytes:
    doc = pymupdf.open()
    for n in range(pages):
        doc.new_page().insert_text((72, 72), f"page {n + 1} text")
    return doc.tobytes()


PAYMENTS = """# Payments

The service accepts card payments from customers in the euro area.

## Refunds

Refunds SHALL be requested within 90 days of the payment. A refund returns the whole amount to the card.

## Reports

A daily report lists every payment and every refund. The finance team receives it each morning.
"""


def scripted_kbuildfile(url: str, **settings: object) -> str:
    """A Kbuildfile whose model is a scripted server at `url` (tests/openai_server.py)."""
    model = {"base_url": f"{url}/v1", "api_key": "t", "model": "m", **settings}
    return ("from pathlib import Path\nfrom kbuild.rules import knowledge_base\n"
            f"kb = knowledge_base(Path(__file__).parent, model={model!r})\nRULES = kb.rules\ntargets = kb.targets\n")


def headed(title: str, sections: tuple[tuple[str, str], ...]) -> str:
    """A Markdown document: `# title`, then each (heading, text) as a `##` section of one paragraph."""
    return f"# {title}\n\n" + "".join(f"## {heading}\n\n{text}\n\n" for heading, text in sections)


def small_store(root: Path, docs: dict[str, str], project: str = "shop") -> None:
    """`kbuild init` in `root` with small facts (so short documents have several), and `docs`
    (file name -> text) added to `project`; not built yet."""
    from conftest import kbuild

    def ok(*args: str) -> None:
        result = kbuild(root, *args)
        assert result.exit_code == 0, result.output

    ok("init", str(root))
    kbuildfile = root / "Kbuildfile.py"
    kbuildfile.write_text(kbuildfile.read_text().replace("floor_tokens=2000, cap_tokens=4000",
                                                         "floor_tokens=15, cap_tokens=40"))
    for name, text in docs.items():
        (root / name).write_text(text)
        ok("add", project, name)
