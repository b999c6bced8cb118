"""The mess of real sources, cleaned into the text a reader sees, line for line.

Markdown documents carry inline HTML (`## <a name="retry"></a> 4.2.1 Retry Limits`,
`<div class="breaker"></div>`, `&mdash;`); PDFs carry ligature glyphs ("veriﬁed"). Left in
text.md, they become fact names (`a-name-retry-a-4-2-1-retry-limits`), breadcrumbs full of raw
HTML, and words that no search finds. Both cleanings keep every line where it was (line N of
text.md is still line N of the source), and leave code (fenced blocks, inline code) untouched.
"""
from __future__ import annotations

import html
import re
from collections.abc import Callable

from ..text.markdown import FENCE

# Ligatures and the like: compatibility characters whose NFKC form is the plain letters. NFKC
# over the whole text would also turn ² into 2 and ½ into 1⁄2, which changes what a text says.
LIGATURES = str.maketrans({"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl",
                           "\ufb05": "st", "\ufb06": "st"})

CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
EMPTY_ANCHOR = re.compile(r"<a\s+(?:name|id)\s*=\s*[\"'][^\"']*[\"']\s*(?:/>|>\s*</a\s*>)", re.I)
LINK = re.compile(r"<a\s+[^>]*?href\s*=\s*[\"']([^\"']*)[\"'][^>]*>(.*?)</a\s*>", re.I)
IMAGE = re.compile(r"<img\s+[^>]*?alt\s*=\s*[\"']([^\"']*)[\"'][^>]*/?>", re.I)
STRONG = re.compile(r"<(b|strong)\b[^>]*>(.*?)</\1\s*>", re.I)
EMPHASIS = re.compile(r"<(i|em)\b[^>]*>(.*?)</\1\s*>", re.I)
CODE = re.compile(r"<code\b[^>]*>(.*?)</code\s*>", re.I)
BREAK = re.compile(r"<br\s*/?>", re.I)
# Any other tag is a wrapper: its words stay, the tag goes (div, span, sup, p, section, font...).
# A comment (page markers are comments) and a tag name we do not know as HTML are left alone.
TAG = re.compile(r"</?(?:a|abbr|b|big|center|cite|dfn|div|em|font|i|img|ins|kbd|mark|nav|p|q|s|samp|section|"
                 r"small|span|strike|strong|sub|sup|tt|u|var|article|aside|header|footer|main|figure|"
                 r"figcaption|details|summary|del)\b[^>]*>", re.I)


def plain_letters(text: str) -> str:
    """Ligature glyphs as the letters they stand for."""
    return text.translate(LIGATURES)


def markdown_without_html(text: str) -> str:
    """Inline HTML as its Markdown meaning: anchors dropped, links and emphasis as Markdown,
    wrappers unwrapped, entities decoded. Fenced blocks and code spans stay as written."""
    lines = text.split("\n")
    fence: str | None = None
    for n, line in enumerate(lines):
        opened = FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            continue
        if "<" in line or "&" in line:
            lines[n] = _outside_code(line, _clean)
    return "\n".join(lines)


def _outside_code(line: str, clean: Callable[[str], str]) -> str:
    parts, last = [], 0
    for span in CODE_SPAN.finditer(line):
        parts.append(clean(line[last:span.start()]))
        parts.append(span.group(0))
        last = span.end()
    parts.append(clean(line[last:]))
    return "".join(parts)


def _clean(text: str) -> str:
    text = EMPTY_ANCHOR.sub("", text)
    text = LINK.sub(lambda m: f"[{m.group(2)}]({m.group(1)})" if m.group(2).strip() else "", text)
    text = IMAGE.sub(lambda m: m.group(1), text)
    text = STRONG.sub(r"**\2**", text)
    text = EMPHASIS.sub(r"*\2*", text)
    text = CODE.sub(r"`\1`", text)
    text = BREAK.sub(" ", text)
    text = TAG.sub("", text)
    if "&" in text:
        text = html.unescape(text)
    # a heading whose anchor stood first keeps one space after its marks
    return re.sub(r"^(#{1,6})\s{2,}", r"\1 ", text) if text.startswith("#") else text
