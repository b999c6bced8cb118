"""Headings of a paged document, written into its text as Markdown headings.

A PDF's text has no headings of its own, so its facts were all named `opening` and cut only at
paragraphs. The document's outline (bookmarks) says where its sections start; without one, a
short line set in a larger font than the body is a heading, the larger the higher. Either way a
heading is a line of the page's own words, marked with `#`: the text keeps every word it had.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import pymupdf

BIGGER = 1.2  # a heading's font is at least this much larger than the body's
MAX_WORDS = 15
MAX_LEVELS = 3


@dataclass(frozen=True)
class Heading:
    level: int
    title: str
    page: int  # 1-based


def headings(doc: pymupdf.Document) -> tuple[list[Heading], bool]:
    """The outline's entries when the document has one (and True), else its larger-font lines."""
    try:
        toc = doc.get_toc(simple=True)
    except Exception:  # a damaged outline is no outline
        toc = []
    found = [Heading(min(level, 6), " ".join(str(title).split()), page) for level, title, page in toc
             if 1 <= page <= doc.page_count and str(title).strip()]
    return (found, True) if found else (_by_font_size(doc), False)


def _by_font_size(doc: pymupdf.Document) -> list[Heading]:
    lines: list[tuple[int, float, str]] = []
    chars: Counter[float] = Counter()
    for number, page in enumerate(doc, start=1):
        try:
            blocks = page.get_text("dict", flags=0)["blocks"]
        except Exception:
            continue
        for block in blocks:
            for line in block.get("lines", []):
                spans = [s for s in line["spans"] if s["text"].strip()]
                if not spans:
                    continue
                text = " ".join("".join(s["text"] for s in spans).split())
                size = round(max(s["size"] for s in spans) * 2) / 2
                chars[size] += len(text)
                lines.append((number, size, text))
    if not chars:
        return []
    body = chars.most_common(1)[0][0]
    candidates = [(n, size, text) for n, size, text in lines
                  if size >= body * BIGGER and 1 <= len(text.split()) <= MAX_WORDS
                  and re.search(r"[^\W\d_]", text) and not text.endswith((".", ",", ";"))]
    sizes = sorted({size for _, size, _ in candidates}, reverse=True)
    return [Heading(min(sizes.index(size) + 1, MAX_LEVELS), text, n) for n, size, text in candidates]


def mark(page_text: str, on_page: list[Heading], outline: bool) -> str:
    """The page's text with each of its headings marked: the paragraph that says the heading
    becomes a heading line (split from the words after it when they share a block); an outline
    entry whose words the page does not show opens the page."""
    paragraphs = page_text.split("\n\n") if page_text else []
    at = 0
    opening: list[str] = []
    for heading in on_page:
        wanted = _norm(heading.title)
        for i in range(at, len(paragraphs)):
            said = _norm(paragraphs[i])
            if said == wanted or said.startswith(wanted + " "):
                ends = [m.end() for m in re.finditer(r"\S+", paragraphs[i])]
                cut = ends[len(heading.title.split()) - 1]
                rest = paragraphs[i][cut:].strip()  # the block's words after the heading, lines kept
                paragraphs[i] = "#" * heading.level + " " + " ".join(paragraphs[i][:cut].split())
                if rest:
                    paragraphs.insert(i + 1, rest)
                at = i + 1
                break
        else:
            if outline and at == 0:
                opening.append("#" * heading.level + " " + heading.title)
    return "\n\n".join(opening + paragraphs)


def _norm(text: str) -> str:
    return " ".join(text.lower().split())
