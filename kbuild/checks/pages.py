"""What `kbuild check` finds in a page by itself: where its links lead, what secrets it holds and,
in a page of kbuild's own voice, what instructions to a model.

Both are a function of the page's bytes and of where it stands, so a verdict recorded with the
page's hash holds for as long as the page has that hash: a rule that writes a page records it
(`note_page`, into the lock through ctx.note, as grounding verdicts are), and `kbuild check` on a
fresh clone then reads no page twice and scans no unchanged page again. Whether the files its
links lead to exist is not the page's own: that is looked up on every check.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..engine.hashing import hash_bytes
from ..text.injection import find_injections
from .links import link_targets, missing_links
from ..text.secrets import find_secrets

NOTE = "page_checks"  # the note: {page path: verdict}


def verdict(path: str, data: bytes, root: Path, store_root: Path, code: bool = False) -> dict[str, Any]:
    """The verdict of the page `path` (relative to `root`) holding `data`: its hash, its links
    as [target, the file it names relative to `root`, or None when outside `store_root`], the
    kinds of secret it holds, and the kinds of instruction to a model a page in kbuild's own voice
    holds. `code`: the page quotes a source that is code (whose quote holds no links)."""
    text = data.decode("utf-8", errors="replace")
    top = os.path.normpath(os.path.abspath(root))
    return {
        "page": hash_bytes(data),
        "links": [[target, None if resolved is None else _relative(resolved, top)]
                  for target, resolved in link_targets(text, root / path, store_root, code=code)],
        # The whole page, quotes and code included: only raw/ keeps a source's words as they were.
        "secrets": sorted(set(find_secrets(text))),
        "injections": find_injections(text) if in_own_voice(path) else [],
    }


def in_own_voice(path: str) -> bool:
    """Whether the page speaks in kbuild's voice (an index, a view, a spec: lines it chose or a
    model wrote), where no instruction to a model belongs; a fact and text.md quote their
    source, which may hold one (and say whose words they are)."""
    name = path.rsplit("/", 1)[-1]
    return name.startswith("index") or "/artifacts/" in path


def _relative(resolved: str, top: str) -> str:
    """`resolved` (normalised, absolute) from `top` (the same), with / between its parts: a
    link inside the store is inside `top`, and slicing it off is what os.path.relpath gives,
    without making both absolute again for each of a page's links."""
    if resolved.startswith(top + os.sep):
        return resolved[len(top) + 1:].replace(os.sep, "/")
    return os.path.relpath(resolved, top).replace(os.sep, "/")


def note_page(ctx: Any, path: str, data: bytes | str, store_root: Path, code: bool = False) -> None:
    """Record the verdict of a page the rule writes at `path`, with its hash, among its notes."""
    raw = data.encode() if isinstance(data, str) else bytes(data)
    recorded = dict(ctx.notes.get(NOTE) or {})
    recorded[path] = verdict(path, raw, ctx.root, store_root, code)
    ctx.note(NOTE, recorded)


def links_of(found: dict[str, Any], root: Path, store_root: Path) -> list[tuple[str, str | None]]:
    """The links of a verdict as link_targets gives them, for the store at `store_root`: a file
    the verdict names outside it leads outside the store."""
    top = os.path.normpath(os.path.abspath(root))
    store = os.path.normpath(os.path.abspath(store_root))
    links: list[tuple[str, str | None]] = []
    for target, relative in found["links"]:
        resolved = None if relative is None else top if relative == "." else os.path.join(top, relative)
        inside = resolved is not None and (resolved == store or resolved.startswith(store + os.sep))
        links.append((target, resolved if inside else None))
    return links


def recorded(notes: dict[str, Any], path: str, page_hash: str) -> dict[str, Any] | None:
    """The verdict recorded for the page at `path` when it was of this hash; else None."""
    found = (notes.get(NOTE) or {}).get(path) if isinstance(notes.get(NOTE), dict) else None
    if not (isinstance(found, dict) and found.get("page") == page_hash and isinstance(found.get("links"), list)
            and all(isinstance(found.get(key), list) and all(isinstance(k, str) for k in found[key])
                    for key in ("secrets", "injections"))):
        return None
    for link in found["links"]:  # a lock is a file anyone can edit: a verdict of another shape is none
        if not (isinstance(link, list) and len(link) == 2 and isinstance(link[0], str)
                and (link[1] is None or (isinstance(link[1], str) and _inside(link[1])))):
            return None
    return found


def _inside(relative: str) -> bool:
    return relative == "." or not (relative.startswith("/") or ".." in relative.split("/") or "" in relative.split("/"))
