"""The formats of the store's pages, written and read here only.

A fact page is what search, context and the checks read back: its Original (the source's
words, quoted) and its Rewritten part are cut where this module puts them, not where another
module guesses they are.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..text.markdown import shortened

ORIGINAL = "## Original"
REWRITTEN = "## Rewritten"
REWRITTEN_LABEL = "_Rewritten:"
QUOTED = re.compile(rf"^{ORIGINAL}\n.*?^{REWRITTEN}\n", re.S | re.M)  # the part of a fact page quoting its source


def pages_phrase(pages: list[int] | None) -> str:
    """", page 3" or ", pages 3 to 5": where in a paged original a part stands."""
    if not pages:
        return ""
    first, last = pages
    return f", page {first}" if first == last else f", pages {first} to {last}"


@dataclass(frozen=True)
class FactPage:
    original_name: str  # the raw file's name ("original.pdf")
    original_link: str  # relative link to it
    pages: list[int] | None
    start: int  # lines of text.md
    end: int
    covers: list[str]  # every heading the fact holds text of
    original: str  # the chunk's words, verbatim
    rewritten: str
    label: str  # who wrote the rewrite
    title: str  # the source's title, for the breadcrumb

    def render(self) -> str:
        where = (f"Source: [{self.original_name}]({self.original_link}){pages_phrase(self.pages)}. "
                 f"[text.md](text.md) lines {self.start} to {self.end}.")
        crumbs = f"[{self.title}](index.md)" + "".join(f" › {h}" for h in self.covers[:1] if h != self.title)
        also = [h for h in self.covers[1:] if h != self.title]
        if also:
            crumbs += f" (also: {'; '.join(also)})"
        return (f"{where}\n\n{ORIGINAL}\n\n{self.original}\n{REWRITTEN}\n\n{self.rewritten}\n\n"
                f"{REWRITTEN_LABEL} {self.label}._ Up: {crumbs}\n")


def rewritten_part(page: str) -> str:
    """The Rewritten words of a fact page (the whole text of any other page)."""
    return page.split(f"\n{REWRITTEN}\n\n", 1)[-1].split(f"\n\n{REWRITTEN_LABEL}", 1)[0].strip()


def quoted_part(page: str) -> str:
    """The part of a fact page that quotes its source word for word ("" for any other page)."""
    found = QUOTED.search(page)
    return found.group(0) if found else ""


def without_quoted(page: str) -> str:
    """A page without the part that quotes its source: kbuild's own words."""
    return QUOTED.sub("", page)


def pages_index(source: str, count: int) -> str:
    lines = [f"- [page {n}](p-{n:03d}.png)" for n in range(1, count + 1)]
    return f"# Pages of {source}\n\nEach page of the original, rendered as an image.\n\n" + "\n".join(lines) + "\n"


def figures_index(source: str, figures: list[tuple[str, int, str]]) -> str:
    """The index of a source's figures: (name, page, words) each."""
    lines = [f"- [{name}]({name}.md) (page {page}, [image]({name}.png)): {shortened((words.strip().splitlines() or [''])[0], 100)}"
             for name, page, words in figures]
    return (f"# Tables and figures of {source}\n\nCut from the pages of the original, each with its text beside "
            f"it.\n\n" + "\n".join(lines) + "\n")
