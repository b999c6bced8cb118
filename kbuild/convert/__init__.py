"""Source file -> text.md, page images and figures.

    convert(data, filename) -> Converted

The filename is used only for its extension. Every problem with the source
comes out as ConversionError with one line saying what is wrong and what to do.
See docs/convert.md.
"""
from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from . import limits
from .formats import extension, sniff
from .limits import FIGURE_DPI, MAX_PAGES, MAX_SOURCE_BYTES, PAGE_DPI
from .markdown import clean_markdown
from .model import ConversionError, Converted, Figure
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
        text = clean_markdown(text, modules=extension(filename) == "mdx")
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
    large, a format nothing reads, binary data where kbuild's own converters expect text; else
    None. A source's copy in raw/ is checked with it before it is written, so a refused one
    leaves none."""
    from ..plugins import registry
    from .builtin import TEXT, refused_message
    from .formats import UNSUPPORTED
    from .text import binary_message, looks_binary

    try:
        _check_size(data)
    except ConversionError as exc:
        return str(exc)
    ext = extension(filename)
    converter = registry().converter(ext)
    if converter is not None and not converter.plugin.builtin:
        return None  # a plug-in's format: only converting it can tell
    if ext in UNSUPPORTED:
        return refused_message(UNSUPPORTED[ext])
    if converter is None and sniff(data) == "a PDF":
        return None  # read by the paged converter, which alone can tell
    if converter is None or ext in TEXT:
        return binary_message(data) if looks_binary(data) else None
    return None


def _convert(data: bytes, filename: str) -> Converted:
    """The converter the plug-ins registered for the file's extension (kbuild's own are plug-ins
    too), given the bytes as a file of that extension; an extension nobody registered is text."""
    from ..plugins import one_line, registry

    ext = extension(filename)
    converter = registry().converter(ext)
    if converter is None and sniff(data) == "a PDF":
        ext, converter = "pdf", registry().converter("pdf")  # a PDF under an unknown name (a URL without one)
    if converter is None:
        from .text import convert_text

        return convert_text(data, "text")
    with tempfile.TemporaryDirectory(prefix="kbuild-convert-") as folder:
        path = Path(folder) / f"original.{ext}"
        path.write_bytes(data)
        try:
            converted = converter.convert(path)
        except ConversionError:
            raise
        except Exception as exc:  # a plug-in's failure is its source's, never the build's
            raise ConversionError(f"could not be converted by the plug-in {converter.plugin.label} "
                                  f"({one_line(exc)}); fix or upgrade the plug-in, or uninstall it") from None
    if isinstance(converted, str):
        return Converted(text=converted, kind="markdown")
    if isinstance(converted, Converted):
        return converted
    raise ConversionError(f"could not be converted: the plug-in {converter.plugin.label} returned "
                          f"{type(converted).__name__}, not Markdown text; fix or upgrade the plug-in, or uninstall it")

