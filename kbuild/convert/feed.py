"""An RSS or Atom feed as the document a reader of it sees: the feed's title, then each item under
its own heading, with its date, author and link, and its text (HTML, escaped inside the XML)
rendered to Markdown as a web page's is (kbuild.convert.html).

Read as code, a feed is XML whose items' text is `&lt;p&gt;`-escaped HTML: no heading to cut it
at, and markup for every word. Any other XML stays code.

The standard library's parser: with expat 2.4.1 or later (Python's own build carries it) an
entity that expands without bound is refused, and no external entity is ever fetched.
"""
from __future__ import annotations

import xml.etree.ElementTree as ElementTree

from .html import html_to_markdown
from .model import Converted
from .text import decode

FEEDS = {"rss", "feed", "RDF"}  # the root of RSS 2.0, Atom, RSS 1.0
TEXT = ("encoded", "content", "description", "summary")  # an item's text, fullest first


def convert_feed(data: bytes) -> Converted | None:
    """The feed in `data` as Markdown; None when `data` is not a feed (or not well-formed XML)."""
    text, warnings = decode(data)
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError:
        return None
    if _local(root.tag) not in FEEDS:
        return None
    channel = next((child for child in root if _local(child.tag) == "channel"), root)
    items = [e for e in root.iter() if _local(e.tag) in ("item", "entry")]
    parts = [f"# {_one_line(_field(channel, 'title')) or 'Feed'}"]
    about = _field(channel, "description") or _field(channel, "subtitle")
    if about:
        parts.append(html_to_markdown(about))
    for item in items:
        parts.append(f"## {_one_line(_field(item, 'title')) or 'Untitled'}")
        byline = [_one_line(_field(item, name)) for name in ("pubDate", "published", "updated", "date", "creator")]
        link = _link(item)
        if link:
            byline.append(f"[link]({link})")
        if any(byline):
            parts.append(" · ".join(b for b in byline if b))
        body = next((_field(item, name) for name in TEXT if _field(item, name)), "")
        if body:
            parts.append(html_to_markdown(body))
    markdown = "\n\n".join(p for p in parts if p.strip())
    return Converted(text=markdown + "\n", pages=[], figures=[], kind="feed", warnings=warnings)


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _field(element: ElementTree.Element, name: str) -> str:
    """The text of `element`'s first child named `name` (in any namespace), its markup as text
    (an Atom `content` of type xhtml holds elements, not escaped HTML)."""
    for child in element:
        if _local(child.tag) == name:
            inner = "".join(ElementTree.tostring(c, encoding="unicode") for c in child)
            return ((child.text or "") + inner).strip()
    return ""


def _link(item: ElementTree.Element) -> str:
    for child in item:
        if _local(child.tag) == "link":
            href = (child.get("href") or child.text or "").strip()
            if href.startswith(("http://", "https://")):
                return href
    return ""


def _one_line(text: str) -> str:
    return " ".join(html_to_markdown(text).split()) if "<" in text or "&" in text else " ".join(text.split())
