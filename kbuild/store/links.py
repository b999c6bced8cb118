"""The links a source quotes, made to work in the store: text.md keeps them only where they lead.

A document's relative links (`[the main volume](volume-1.html)`) point beside the document, not
beside its pages in the store, where they dangle. When text.md is made, each Markdown link and
image outside code becomes one of:

- a link to the index page of the source it names, when it names another source of the project
  (its path, or its url, whatever the #fragment). The index, not the fact holding the heading:
  that would make each source's text read the other's, and two sources that link to each other
  would wait on each other;
- an absolute url, when the source was fetched over http(s): a relative link is joined to its url;
- its words alone (an image: its alt text), otherwise: a file that is not a source, a scheme
  other than http(s).

Links to what the conversion itself wrote beside text.md (a PDF's figures) and absolute http(s)
links stay as they are. Line N of text.md stays line N of the source.
"""
from __future__ import annotations

import posixpath
import re
from urllib.parse import unquote, urldefrag, urljoin, urlparse

from ..text.markdown import LINK_OR_CODE
from .layout import link

WEB = ("http", "https")


def rewrite_source_links(text: str, origin: str, page: str, sources: dict[str, str], own: set[str]) -> str:
    """`text` of the source at `origin` (a path relative to the build root, or a url), with each
    link resolved or neutralised for a page at `page` (a store path beside text.md).

    `sources` maps each source's origin to its index page; `own` holds the targets the conversion
    wrote beside text.md."""
    paths = {posixpath.normpath(o): index for o, index in sources.items() if not _is_url(o)}
    urls = {urldefrag(o).url: index for o, index in sources.items() if _is_url(o)}

    def resolved(target: str) -> str | None:
        """Where the link should lead from `page`, or None to drop it."""
        if target.startswith("#") or target.split("#", 1)[0] in own:
            return target  # an anchor in the document itself, or a figure beside text.md
        parts = urlparse(target)
        if parts.scheme or target.startswith("//") or _is_url(origin):
            absolute = urljoin(origin, target) if _is_url(origin) else target
            index = urls.get(urldefrag(absolute).url)
            if index is not None:
                return link(page, index)
            return absolute if urlparse(absolute).scheme in WEB else None  # not javascript:, file:, mailto:
        if not parts.path:
            return None
        named = posixpath.normpath(posixpath.join(posixpath.dirname(origin), unquote(parts.path)))
        index = paths.get(named)
        return link(page, index) if index is not None else None

    def replace(match: re.Match[str]) -> str:
        if match.group("code"):
            return match.group(0)
        target = resolved(match.group("target"))
        if target is None:  # the words stay, on as many lines as the link took
            return match.group("words") + "\n" * (match.group(0).count("\n") - match.group("words").count("\n"))
        whole = match.group(0)
        start, end = match.span("target")
        return whole[: start - match.start()] + target + whole[end - match.start():]

    return LINK_OR_CODE.sub(replace, text)


def needs_sources(text: str, own: set[str]) -> bool:
    """Whether `text` has a link that only the listing of sources can resolve: most documents
    have none, and they are not converted again when another source is added or moved."""
    if "](" not in text:  # every link and image has it; a search for it is a scan in C, not the regex's walk
        return False
    targets = (m.group("target") for m in LINK_OR_CODE.finditer(text) if not m.group("code"))
    return any(not t.startswith("#") and t.split("#", 1)[0] not in own for t in targets)


def _is_url(origin: str) -> bool:
    return urlparse(origin).scheme in (*WEB, "file")
