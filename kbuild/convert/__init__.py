"""Source file -> text.md, page images and figures.

    convert(data, filename) -> Converted

The filename is used only for its extension. Every problem with the source
comes out as ConversionError with one line saying what is wrong and what to do.
See docs/convert.md.
"""
from __future__ import annotations

import dataclasses

from . import limits
from .formats import PAGED, UNSUPPORTED, extension, sniff, text_kind
from .limits import FIGURE_DPI, MAX_PAGES, MAX_SOURCE_BYTES, PAGE_DPI
from .markdown import clean_markdown
from .model import ConversionError, Converted, Figure
from .office import OFFICE, convert_office
from .text import plain_letters

__all__ = [
    "ConversionError",
    "Converted",
    "Figure",
    "convert",
    "refusal",
    "FIGURE_DPI",
    "MAX_PAGES",
    "MAX_SOURCE_BYTES",
    "PAGE_DPI",
]


def convert(data: bytes, filename: str) -> Converted:
    """Convert one source, exactly as fetched. Deterministic: the same bytes give
    the same text and the same PNG bytes, so the build can compare outputs."""
    _check_size(data)
    converted = _convert(data, filename)
    text = plain_letters(converted.text) if converted.kind != "code" else converted.text
    if converted.kind == "markdown":
        text = clean_markdown(text)
    return dataclasses.replace(converted, text=text) if text != converted.text else converted


def _check_size(data: bytes) -> None:
    if len(data) == 0:
        raise ConversionError("is empty (0 bytes); remove it from sources.yml or replace it")
    if len(data) > limits.MAX_SOURCE_BYTES:
        raise ConversionError(
            f"is {len(data) / 2**20:.0f} MiB, over the {limits.MAX_SOURCE_BYTES / 2**20:.0f} MiB "
            "limit for one source; split it or remove it from sources.yml"
        )


def refusal(data: bytes, filename: str) -> str | None:
    """Why `convert` refuses these bytes, when that shows without converting them: empty, too
    large, a format kbuild cannot read, binary data where text is expected; else None. A
    source's copy in raw/ is checked with it before it is written, so a refused one leaves none."""
    from .text import binary_message, looks_binary

    try:
        _check_size(data)
    except ConversionError as exc:
        return str(exc)
    ext = extension(filename)
    if ext in UNSUPPORTED:
        return f"is {UNSUPPORTED[ext]}, which kbuild cannot read; export it to PDF (or Markdown) and use that file instead"
    unknown = ext not in PAGED and ext not in ("txt", "text") and text_kind(ext) == "text"
    if ext in PAGED or unknown and sniff(data) == "a PDF":
        return None  # read by the paged converter, which alone can tell
    return binary_message(data) if looks_binary(data) else None


def _convert(data: bytes, filename: str) -> Converted:
    ext = extension(filename)
    unknown = ext not in PAGED and ext not in ("txt", "text") and text_kind(ext) == "text"
    if unknown and sniff(data) == "a PDF":
        ext = "pdf"  # a PDF under an unknown name (e.g. a URL without an extension)

    if ext in PAGED:
        from .paged import convert_paged  # pymupdf loads only when a paged source needs it

        return convert_paged(data, ext, PAGED[ext])
    if ext in UNSUPPORTED:
        raise ConversionError(
            f"is {UNSUPPORTED[ext]}, which kbuild cannot read; export it to PDF (or Markdown) and use that file instead"
        )
    if ext in OFFICE:
        return convert_office(data, ext)
    if ext == "ipynb":
        from .notebook import convert_notebook

        notebook = convert_notebook(data)
        if notebook is not None:
            return notebook  # any other JSON is read as code
        ext = "json"
    if ext in ("xml", "rss", "atom"):
        from .feed import convert_feed

        feed = convert_feed(data)
        if feed is not None:
            return feed  # any other XML is read as code
    if ext == "jsonl":
        from .transcript import convert_transcript

        transcript = convert_transcript(data)
        if transcript is not None:
            return transcript  # any other JSON Lines is read as text
    kind = text_kind(ext)
    if kind == "html":
        from .html import convert_html

        return convert_html(data)
    from .text import convert_text

    return convert_text(data, kind)
