"""Text that looks like a credential: removed where source text enters kbuild.

The `text` rule redacts the converted text before anything else reads it, so text.md, every
fact's Original and rewrite, every summary, index and view, and every model request (and so the
call cache and the call log) are built from text that never held the secret. Only the copy
under raw/ keeps the source as it was. What a model writes is redacted again, and `kbuild check`
fails while any page but a raw copy holds a secret. What a secret looks like is secret_kinds.
"""
from __future__ import annotations

import re

MARKER = "[secret removed]"
SHORTEST = 4  # a value is replaced wherever it stands: a one-letter "password" would eat the page


def _findings(text: str) -> list[tuple[str, str]]:
    """(kind, value) for each secret, once each: two detectors that find one secret found one."""
    # Imported here, not above: detect-secrets' plugins take about 50 ms that every `kbuild`
    # would pay at start while only a converted source and a written page are scanned.
    from .secret_kinds import KINDS

    lower = text.lower()
    found: dict[str, str] = {}
    for kind, (hints, finder) in KINDS.items():
        if any(h in lower for h in hints):
            for value in finder(text):
                if len(value) >= SHORTEST:
                    found.setdefault(value, kind)
    kept: list[tuple[str, str]] = []  # a value inside another (a key and `AccountKey=<key>`) is that one
    for value in sorted(found, key=len, reverse=True):
        if not any(value in longer for _, longer in kept):
            kept.append((found[value], value))
    return kept


def find_secrets(text: str) -> list[str]:
    """What kinds of credentials the text holds (one entry per finding)."""
    return [kind for kind, _ in _findings(text)]


def redact(text: str) -> str:
    """The text with every secret found in it replaced by the marker, wherever it stands."""
    return redacted(text)[0]


def redacted(text: str) -> tuple[str, list[str]]:
    """redact(text) and find_secrets(text), from one scan of it."""
    found = _findings(text)
    for _, value in found:  # longest first
        text = text.replace(value, MARKER)
    return text, [kind for kind, _ in found]


USERINFO = re.compile(r"(?<=://)[^/?#\s]*@")  # the user:password@ of a url, up to its last @ before the path


def without_userinfo(text: str) -> str:
    """`text` with the user and password of every url in it (`https://bob:hunter2@host/`)
    replaced by the marker: an error line names the url, never the credentials in it."""
    return USERINFO.sub(MARKER + "@", text) if "@" in text else text
