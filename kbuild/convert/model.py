"""What a conversion produces, and the one error it raises for a bad source."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Figure:
    """A table or picture cut out of a source; the store writes figures/NAME.png and NAME.md."""

    name: str  # "table-01", "figure-02": numbered in document order, per kind
    page: int  # 1-based page it was cut from; 0 for sources without pages
    png: bytes
    text: str  # a table's Markdown; a picture's caption and the text around it


@dataclass(frozen=True)
class Converted:
    text: str  # the content of text.md
    pages: list[bytes] = field(default_factory=list)  # one PNG per page, [] if not paged
    figures: list[Figure] = field(default_factory=list)
    kind: str = "text"
    warnings: list[str] = field(default_factory=list)


class ConversionError(Exception):
    """One clear line for the user: what is wrong with the source and what to do.

    The message never names the file: the caller prefixes the source id.
    """
