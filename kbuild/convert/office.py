"""Office documents (the `office` extra): which converter reads each format, which library it
needs, and the one line a user sees when that library is not installed or the file is damaged.

Each format's converter is a plain function `convert_X(data) -> Converted` in its own module,
imported only when a source of its format is converted, so that kbuild without the extra, and
a build that reads no office file, never imports the libraries.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from .model import ConversionError, Converted

INSTALL = "pip install 'kbuild[office]'"


@dataclass(frozen=True)
class OfficeFormat:
    what: str  # "a Word document": how an error names the file's format
    library: str  # the distribution that reads it, as pip names it
    module: str  # the module of kbuild.convert holding the converter
    function: str  # the converter: (data: bytes) -> Converted


OFFICE: dict[str, OfficeFormat] = {
    "docx": OfficeFormat("a Word document", "mammoth", "word", "convert_docx"),
    "docm": OfficeFormat("a Word document", "mammoth", "word", "convert_docx"),
    "pptx": OfficeFormat("a PowerPoint deck", "python-pptx", "slides", "convert_pptx"),
    "pptm": OfficeFormat("a PowerPoint deck", "python-pptx", "slides", "convert_pptx"),
    "xlsx": OfficeFormat("an Excel workbook", "openpyxl", "sheets", "convert_xlsx"),
    "xlsm": OfficeFormat("an Excel workbook", "openpyxl", "sheets", "convert_xlsx"),
    "xls": OfficeFormat("an Excel 97-2003 workbook", "xlrd", "sheets", "convert_xls"),
    "msg": OfficeFormat("an Outlook message", "olefile", "outlook", "convert_msg"),
}


def convert_office(data: bytes, ext: str) -> Converted:
    """The office document in `data`, of the format its extension `ext` names, as Markdown."""
    office = OFFICE[ext]
    try:
        convert: Callable[[bytes], Converted] = getattr(importlib.import_module(f"{__package__}.{office.module}"),
                                                        office.function)
        return convert(data)
    except ModuleNotFoundError as exc:
        raise ConversionError(
            f"is {office.what}, which kbuild reads with {office.library} (module {exc.name} is not "
            f"installed); install it with {INSTALL}"
        ) from None
    except ConversionError:
        raise
    except Exception as exc:  # a damaged file fails in many ways inside a parser; each is this source's problem
        reason = " ".join(str(exc).split())[:160] or type(exc).__name__
        raise ConversionError(
            f"cannot be read as {office.what} ({office.library}: {reason}); open it and save it again, "
            "or export it to PDF and use that file instead"
        ) from None
