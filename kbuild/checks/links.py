"""Every link in the store must resolve to a file inside the store.

Words quoted from a source (text.md, and the Original section of a fact page) carry the source's
links as text.md was made from them (kbuild.store.links): resolved to the store, or absolute
http(s) links, or gone. So they are checked like the rest, and an http(s) link quoted from the
source may stand in what is written from it (a fact's rewrite). Code holds no links: fences,
inline code, and what a page quotes from a source that is code are not read for them.
"""
from __future__ import annotations

import os
import re
from collections.abc import Collection
from pathlib import Path
from urllib.parse import unquote, urlparse

from ..store.pages import quoted_part, without_quoted
from ..text.markdown import FENCED_BLOCK

# A "\\[" is an escaped bracket, words and not a link. An image's "!" is not matched: findall gives the same targets without it, and a pattern that
# starts with "[" is looked for by that character alone, not tried at every character.
LINK = re.compile(r"\[(?<!\\\[)(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CODE = re.compile(r"`[^`\n]*`")
WEB = ("http", "https")


def checked_text(page: str, name: str) -> str:
    """The part of a page that is kbuild's own words, not the source's."""
    if name == "text.md":
        return ""
    return _without_code(without_quoted(page))


def quoted_text(page: str, name: str) -> str:
    """The part of a page that quotes its source word for word."""
    if name == "text.md":
        return page
    return quoted_part(page)


def _without_code(text: str) -> str:
    return CODE.sub("", FENCED_BLOCK.sub("", text))


def broken_links(page_file: Path, store_root: Path) -> list[str]:
    """One line per link in the page that does not resolve to a file inside the store."""
    return broken_links_in(page_file.read_text("utf-8", errors="replace"), page_file, store_root)


def links_in(text: str) -> list[str]:
    """The targets of the links in `text`, outside code."""
    return LINK.findall(_without_code(text))


def broken_links_in(text: str, page_file: Path, store_root: Path, exists: dict[str, bool] | None = None,
                    repeats: Collection[str] = (), code: bool = False) -> list[str]:
    """The same, for text that will stand at `page_file` (a model's answer before it is written).
    `exists` remembers which targets exist, for a caller checking many pages. `repeats` are the
    links of the source's words the text was written from, which it may repeat: made when text.md
    was, and checked on the finished store (a page they lead to may not be written yet). The http(s)
    links of the page's own quote may stand anywhere in it. `code` says the source is code: what looks
    like a link in its quote is code (`handlers[kind](event)`), also where the page repeats it."""
    return missing_links(link_targets(text, page_file, store_root, code, repeats), exists)


def link_targets(text: str, page_file: Path, store_root: Path, code: bool = False,
                 repeats: Collection[str] = ()) -> list[tuple[str, str | None]]:
    """What the links of `text` (standing at `page_file`) lead to, a function of the text and of
    where it stands alone: (target, the absolute path of the file it names, or None when it leads
    outside the store), in the order written, without the links that need no file. `repeats`
    and `code` as for broken_links_in. What the page says, apart from whether those files exist
    (missing_links), so that the first can be recorded with the page's hash (checks/pages.py)."""
    # String paths, normalised rather than resolved: a link is text, and the store holds no
    # symlinks of kbuild's making; resolving every link cost more than the rest of `kbuild check`.
    root = os.path.normpath(os.path.abspath(store_root))
    here = os.path.dirname(os.path.abspath(page_file))
    quoted = quoted_text(text, page_file.name)
    every = links_in(text)
    quote = every if quoted is text else links_in(quoted)  # text.md is all quote: read once
    accepted = {*repeats, *(t for t in quote if code or urlparse(t).scheme in WEB)}
    found: list[tuple[str, str | None]] = []
    for target in every:
        if target in accepted:
            continue
        if ":" in target or target.startswith("//"):  # a scheme (or a drive): only then parse it
            parts = urlparse(target)
            if parts.scheme or target.startswith("//"):
                found.append((target, None))
                continue
            path = parts.path
        else:
            path = target.split("#", 1)[0].split("?", 1)[0]
        if not path:
            continue  # an anchor within the page
        resolved = os.path.normpath(os.path.join(here, unquote(path)))
        inside = resolved == root or resolved.startswith(root + os.sep)
        found.append((target, resolved if inside else None))
    return found


def missing_links(targets: Collection[tuple[str, str | None]], exists: dict[str, bool] | None = None) -> list[str]:
    """One line per link of `targets` (as link_targets gives them) that leads outside the store
    or to no file in it. `exists` remembers which files exist, for a caller checking many pages."""
    known = {} if exists is None else exists
    problems = []
    for target, resolved in targets:
        if resolved is None:
            problems.append(f"links outside the store: {target}")
            continue
        found = known.get(resolved)
        if found is None:
            found = known[resolved] = os.path.exists(resolved)
        if not found:
            problems.append(f"links to a missing file: {target}")
    return problems
