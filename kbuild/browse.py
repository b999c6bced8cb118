"""Walking the store's pages up and down (`kbuild show`): a page's parent index and the pages it links below it."""
from __future__ import annotations

from pathlib import Path

from .checks.links import LINK


def parent(page: Path, root: Path) -> str | None:
    """The index above `page` (the folder's own index, or the one above for an index), relative to `root`."""
    above = page.parent / "index.md" if page.name != "index.md" else page.parent.parent / "index.md"
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
