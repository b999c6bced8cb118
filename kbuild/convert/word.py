"""A Word document (.docx) as Markdown, through mammoth's HTML and kbuild's own HTML converter.

mammoth reads what a reader of the document sees, by its styles: headings (a heading numbered by
Word keeps its number, "1.2 Scope", as the reader sees it: kbuild works it out from the XML), numbered and nested lists, tables
(a merged cell stands in each place it covers), footnotes, text boxes (after the paragraph that
holds them) and images (their alt text). Comments are kept as text, in a section at the end,
each after the mark ([AB1]) that anchors it in the text. mammoth reads no external file and no
address (external_file_access=False), and the same bytes give the same Markdown.
"""
from __future__ import annotations

import io
import re
import zipfile
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator

import mammoth
from mammoth import documents, transforms

from .html import html_to_markdown
from .model import Converted

# The title is the document's top heading; a comment's anchor shows as its mark ([AB1]).
STYLE_MAP = """
p[style-name='Title'] => h1:fresh
comment-reference => sup
"""
_HEADING_STYLE = re.compile(r"heading\s*([1-6])$", re.IGNORECASE)
_BACK_LINK = re.compile(r'\s*<a href="#comment-ref-\d+">↑</a>')  # mammoth's link back from a comment
_HEADING_LEVEL = re.compile(r"^(#{1,6}) ", re.MULTILINE)
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"


def convert_docx(data: bytes) -> Converted:
    result = mammoth.convert_to_html(
        io.BytesIO(data),
        style_map=STYLE_MAP,
        transform_document=transforms.paragraph(HeadingNumbers(data)),
        convert_image=mammoth.images.img_element(lambda image: {"src": ""}),  # its alt text, not its bytes
        external_file_access=False,
    )
    html = _BACK_LINK.sub("", result.value)
    body, comments = html.split("<dl>", 1) if '<dt id="comment-' in html else (html, "")
    markdown = html_to_markdown(body).strip()
    if comments:
        # the comments section sits beside the document's own top sections
        levels = [len(m.group(1)) for m in _HEADING_LEVEL.finditer(markdown)]
        top = min(levels, default=1)
        markdown += f"\n\n{'#' * top} Comments\n\n" + html_to_markdown("<dl>" + comments).strip()
    warnings = [] if markdown else ["has no readable text; text.md will be empty"]
    return Converted(text=markdown + "\n", kind="docx", warnings=warnings)


class HeadingNumbers:
    """Puts the number Word shows before a numbered heading into its text ("1.2 Scope"): mammoth
    keeps neither the number nor the numbering a heading has from its style. Called by mammoth
    on each paragraph; the labels were worked out beforehand from the document's XML, in order,
    for each heading's words."""

    def __init__(self, data: bytes) -> None:
        self.labels = heading_labels(data)

    def __call__(self, paragraph: documents.Paragraph) -> documents.Paragraph:
        if not _HEADING_STYLE.match(paragraph.style_name or ""):
            return paragraph
        waiting = self.labels.get(_words(_mammoth_text(paragraph)))
        if not waiting:
            return paragraph
        return paragraph.copy(children=[documents.run([documents.text(f"{waiting.pop(0)} ")]), *paragraph.children])


def heading_labels(data: bytes) -> dict[str, list[str]]:
    """The words of each numbered heading -> the numbers Word shows before it, in document order.
    A heading is numbered by its paragraph's numPr or its style's (followed through basedOn); its
    number is its level's lvlText ("%1.%2") with each level's count in that level's format."""
    with zipfile.ZipFile(io.BytesIO(data)) as package:
        present = set(package.namelist())
        parts = {name: ElementTree.fromstring(package.read(f"word/{name}.xml"))
                 for name in ("document", "styles", "numbering") if f"word/{name}.xml" in present}
    if "document" not in parts or "numbering" not in parts:
        return {}
    styles = {s.get(f"{_W}styleId"): s for s in parts["styles"].iter(f"{_W}style")} if "styles" in parts else {}
    levels: dict[str, dict[int, tuple[int, str, str]]] = {}  # abstractNumId -> ilvl -> (start, format, text)
    for abstract in parts["numbering"].iter(f"{_W}abstractNum"):
        levels[abstract.get(f"{_W}abstractNumId", "")] = {
            int(lvl.get(f"{_W}ilvl", "0")): (int(_val(lvl, "start") or 1), _val(lvl, "numFmt") or "decimal",
                                             _val(lvl, "lvlText") or "")
            for lvl in abstract.findall(f"{_W}lvl")}
    abstract_of = {num.get(f"{_W}numId"): _val(num, "abstractNumId") for num in parts["numbering"].iter(f"{_W}num")}
    counts: dict[str, list[int]] = {}
    labels: dict[str, list[str]] = {}
    for paragraph in _paragraphs(parts["document"]):
        properties = paragraph.find(f"{_W}pPr")
        style = styles.get(_val(properties, "pStyle")) if properties is not None else None
        if style is None or not _HEADING_STYLE.match(_val(style, "name")):
            continue
        num_id, level = _numbering(properties, style, styles)
        abstract = abstract_of.get(num_id)
        scheme = levels.get(abstract or "", {})
        if level not in scheme or scheme[level][1] in ("bullet", "none"):
            continue
        seen = counts.get(abstract or "", [])
        now = [seen[i] if i < len(seen) else scheme.get(i, (1, "", ""))[0] for i in range(level)]
        now.append(seen[level] + 1 if level < len(seen) else scheme[level][0])
        counts[abstract or ""] = now
        label = re.sub(r"%([1-9])", lambda m: _format(now, scheme, int(m.group(1)) - 1), scheme[level][2]).strip()
        if label:
            words = _words("".join(t.text or "" for t in paragraph.iter(f"{_W}t")))
            labels.setdefault(words, []).append(label)
    return labels


def _paragraphs(element: ElementTree.Element) -> Iterator[ElementTree.Element]:
    """The paragraphs under `element` in document order, without the copies a Fallback holds."""
    for child in element:
        if child.tag == _FALLBACK:
            continue
        if child.tag == f"{_W}p":
            yield child
        yield from _paragraphs(child)


def _numbering(properties: ElementTree.Element, style: ElementTree.Element,
               styles: dict[str | None, ElementTree.Element]) -> tuple[str | None, int]:
    """A heading's list and level: its paragraph's own numPr first, then its style's and the
    styles it is based on."""
    num_id: str | None = None
    level: str | None = None
    chain = [properties] + [s.find(f"{_W}pPr") for s in _style_chain(style, styles)]
    for holder in chain:
        found = holder.find(f"{_W}numPr") if holder is not None else None
        if found is not None:
            num_id = num_id or _val(found, "numId")
            level = level or _val(found, "ilvl")
    return num_id, int(level or 0)


def _style_chain(style: ElementTree.Element, styles: dict[str | None, ElementTree.Element]) -> list[ElementTree.Element]:
    chain = [style]
    while len(chain) < 20 and (based := styles.get(_val(chain[-1], "basedOn"))) is not None and based not in chain:
        chain.append(based)
    return chain


def _format(counts: list[int], scheme: dict[int, tuple[int, str, str]], level: int) -> str:
    if level >= len(counts):
        return ""
    count, style = counts[level], scheme.get(level, (1, "decimal", ""))[1]
    if style in ("lowerLetter", "upperLetter"):
        letters = chr(ord("a") + (count - 1) % 26) * ((count - 1) // 26 + 1)
        return letters.upper() if style == "upperLetter" else letters
    if style in ("lowerRoman", "upperRoman"):
        roman = _roman(count)
        return roman if style == "upperRoman" else roman.lower()
    return str(count)


def _roman(number: int) -> str:
    out = ""
    for value, numeral in ((1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
                           (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")):
        while number >= value:
            out, number = out + numeral, number - value
    return out


def _val(element: ElementTree.Element | None, child: str) -> str:
    found = element.find(f"{_W}{child}") if element is not None else None
    return found.get(f"{_W}val", "") if found is not None else ""


def _mammoth_text(element: object) -> str:
    if isinstance(element, documents.Text):
        return element.value
    return "".join(_mammoth_text(child) for child in getattr(element, "children", ()) or ())


def _words(text: str) -> str:
    return " ".join(text.split())
