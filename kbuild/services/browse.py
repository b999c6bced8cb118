"""Walking the store's pages up and down (`kbuild show`, the MCP `show` tool): a page's parent index
and the pages it links below it."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..checks.links import LINK


def parent(page: Path, root: Path) -> str | None:
    """The index above `page` (the folder's own index, or the one above for an index; for a fact
    of a source too long for one index, the `index-*.md` page of its group), relative to `root`."""
    above = page.parent / "index.md" if page.name != "index.md" else page.parent.parent / "index.md"
    if page.name != "index.md" and not page.name.startswith("index-"):
        above = next((group for group in sorted(page.parent.glob("index-*.md"))
                      if page.name in (t.split("#")[0] for t in LINK.findall(group.read_text(errors="replace")))),
                     above)
    if above.is_file() and above.resolve().is_relative_to(root):
        return above.resolve().relative_to(root).as_posix()
    return None


def children(page: Path, text: str, root: Path) -> list[str]:
    """The Markdown pages `text` (the page's) links in its folder or below, in link order, once each."""
    found = []
    for target in LINK.findall(text):
        child = (page.parent / target.split("#")[0]).resolve()
        if child.suffix == ".md" and child.is_file() and child.is_relative_to(page.parent) and child != page:
            found.append(child.relative_to(root).as_posix())
    return list(dict.fromkeys(found))


class NotAPage(ValueError):
    """The path names no page of the store."""


@dataclass(frozen=True)
class Page:
    id: str  # the page's path relative to `root`: its stable id
    text: str
    parent: str | None
    children: list[str]


def open_page(path: Path, store: Path, root: Path) -> Page:
    """The page at `path` (absolute, or relative to the folder the caller started in) with its
    parent and children, all named relative to `root`; NotAPage unless it is a file inside
    `store`, resolved first (a link inside the store may lead anywhere)."""
    root = root.resolve()
    page = path.resolve()
    if not page.is_relative_to(store.resolve()) or not page.is_file():
        raise NotAPage(f"{path} is not a page of the store; `kbuild show kb/index.md` starts at the top")
    text = page.read_text(errors="replace")
    above = parent(page, root)
    return Page(page.relative_to(root).as_posix(), text, above, [c for c in children(page, text, root) if c != above])
