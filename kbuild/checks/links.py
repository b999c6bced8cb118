"""Every link kbuild writes must resolve to a file inside the store.

Words quoted from a source (text.md, and the Original section of a fact page) are the source's
own: its links point where the source pointed, so they are not checked; everything else is.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote, urlparse

LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")
QUOTED = re.compile(r"^## Original\n.*?^## Rewritten\n", re.S | re.M)


def checked_text(page: str, name: str) -> str:
    """The part of a page whose links are kbuild's own."""
    if name == "text.md":
        return ""
    page = QUOTED.sub("", page)
    page = FENCE.sub("", page)
    return CODE.sub("", page)


def broken_links(page_file: Path, store_root: Path) -> list[str]:
    """One line per link in the page that does not resolve to a file inside the store."""
    return broken_links_in(page_file.read_text("utf-8", errors="replace"), page_file, store_root)


def broken_links_in(text: str, page_file: Path, store_root: Path, exists: dict[str, bool] | None = None) -> list[str]:
    """The same, for text that will stand at `page_file` (a model's answer before it is written).
    `exists` remembers which targets exist, for a caller checking many pages."""
    # String paths, normalised rather than resolved: a link is text, and the store holds no
    # symlinks of kbuild's making; resolving every link cost more than the rest of `kbuild check`.
    root = os.path.normpath(os.path.abspath(store_root))
    here = os.path.dirname(os.path.abspath(page_file))
    known = {} if exists is None else exists
    problems = []
    for target in LINK.findall(checked_text(text, page_file.name)):
        if ":" in target or target.startswith("//"):  # a scheme (or a drive): only then parse it
            parts = urlparse(target)
            if parts.scheme or target.startswith("//"):
                problems.append(f"links outside the store: {target}")
                continue
            path = parts.path
        else:
            path = target.split("#", 1)[0].split("?", 1)[0]
        if not path:
            continue  # an anchor within the page
        resolved = os.path.normpath(os.path.join(here, unquote(path)))
        if resolved != root and not resolved.startswith(root + os.sep):
            problems.append(f"links outside the store: {target}")
            continue
        found = known.get(resolved)
        if found is None:
            found = known[resolved] = os.path.exists(resolved)
        if not found:
            problems.append(f"links to a missing file: {target}")
    return problems
