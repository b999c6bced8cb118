"""kbuild's own converters, registered as a plug-in on the same hook as anyone's
(kbuild.plugins): one function of the file's path for each extension it reads. Each imports its
library when a source of its format is converted, not when it is registered."""
from __future__ import annotations

from functools import partial
from pathlib import Path

from ..plugins import RegisterConverter, hookimpl
from .formats import CODE, HTML, MARKDOWN, PAGED, RST, UNSUPPORTED, text_kind
from .model import ConversionError, Converted
from .office import OFFICE, convert_office


def _paged(ext: str, kind: str, path: Path) -> Converted:
    from .paged import convert_paged  # pymupdf loads only when a paged source needs it

    return convert_paged(path.read_bytes(), ext, kind)


def _office(ext: str, path: Path) -> Converted:
    return convert_office(path.read_bytes(), ext)


# read as text (binary bytes under these names are refused before a copy is kept)
TEXT = frozenset({"txt", "text", *MARKDOWN, *RST, *HTML, *CODE})


def refused_message(what: str) -> str:
    return (f"is {what}, which kbuild cannot read; export it to PDF (or Markdown) and use that file instead, "
            "or install a plug-in that reads it (docs/plugins.md)")


def _refused(what: str, path: Path) -> Converted:
    raise ConversionError(refused_message(what))


def _text(kind: str, path: Path) -> Converted:
    data = path.read_bytes()
    if kind == "html":
        from .html import convert_html

        return convert_html(data)
    from .text import convert_text

    return convert_text(data, kind)


def _notebook(path: Path) -> Converted:
    from .notebook import convert_notebook

    return convert_notebook(path.read_bytes()) or _text("code", path)  # any other JSON is read as code


def _feed(kind: str, path: Path) -> Converted:
    from .feed import convert_feed

    return convert_feed(path.read_bytes()) or _text(kind, path)  # any other XML is read as code


def _transcript(path: Path) -> Converted:
    from .transcript import convert_transcript

    return convert_transcript(path.read_bytes()) or _text("text", path)  # any other JSON Lines is text


@hookimpl
def register_converters(register: RegisterConverter) -> None:
    for ext in sorted(TEXT):
        register(ext, partial(_text, text_kind(ext)))
    for ext, kind in PAGED.items():
        register(ext, partial(_paged, ext, kind))
    for ext, what in UNSUPPORTED.items():
        register(ext, partial(_refused, what))
    for ext, office in OFFICE.items():
        register(ext, partial(_office, ext), libraries=(office.library,))
    register("ipynb", _notebook)
    for ext in ("xml", "rss", "atom"):
        register(ext, partial(_feed, text_kind(ext)))
    register("jsonl", _transcript)
