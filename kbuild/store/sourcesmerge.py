"""A three-way merge of sources.yml, entry by entry: what `kbuild merge-sources` (git's merge
driver for kb/*/sources.yml) does.

Two branches that each `kbuild add` a source both append at the end of the file, which git's
text merge calls a conflict. Here an entry is one item of `sources` (known by its `id`), of
`views` or `specs` (by their `name`); the top-level settings (`kind`, `title`) are entries of
their own. An entry one side changed, added or removed and the other left as the common
ancestor had it is taken from the side that changed it; an entry both sides changed differently
(or one removed and the other changed) is a conflict, shown between git's markers.

The result is our side's text with their changes spliced in, line by line, so that every
comment of ours is kept, and theirs come with the entries they are in or just above. When git's
own text merge is clean and means the same, its text is taken instead (it keeps their comments
elsewhere too). When the splice cannot be made to mean the merge (a hand-written flow list, an
indentation the splice does not follow), the merged entries are written out through ruamel's
round-trip dumper, which keeps our comments.
"""
from __future__ import annotations

import io
import json
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

# section -> the key that names an entry in it
SECTIONS = {"sources": "id", "views": "name", "specs": "name"}
MARKERS = ("<<<<<<< ours\n", "=======\n", ">>>>>>> theirs\n")


class Unmergeable(ValueError):
    """A side is not a mapping of YAML (conflict markers, a broken file): nothing to merge entry by entry."""


@dataclass
class MergedListing:
    text: str
    from_theirs: list[str] = field(default_factory=list)  # entries taken from their side, as "source c"
    conflicts: list[str] = field(default_factory=list)  # entries both sides changed, as "source c"


@dataclass
class _Block:
    """An entry's lines in one side's text: the comment lines just above it, and its own."""

    leading: list[str]
    content: list[str]
    start: int  # the first line of `content`
    column: int  # where the entry's text starts (after "- " for a list item)


@dataclass
class _Side:
    text: str
    data: dict[str, Any]
    lines: list[str]
    top: dict[str, _Block]  # a top-level key -> its lines
    items: dict[str, dict[str, _Block]]  # section -> entry key -> its lines
    block_style: dict[str, bool]  # section -> whether it is a list written one item per "- "


def merge_listings(base: str, ours: str, theirs: str) -> MergedListing:
    """Merge their side into ours; Unmergeable when a side is not a YAML mapping."""
    sides = [_read(text, which, empty_ok=which == "the common ancestor")
             for text, which in ((base, "the common ancestor"), (ours, "our side"), (theirs, "their side"))]
    o, a, b = sides
    expected, from_theirs, conflicts = _merge_data(o.data, a.data, b.data)
    result = MergedListing("", from_theirs, conflicts)
    if not conflicts:
        merged = text_merge(base, ours, theirs)
        if merged is not None and merged[1] and _means(merged[0], expected):
            result.text = merged[0]
            return result
    spliced = _splice(o, a, b, conflicts)
    if conflicts or (spliced is not None and _means(spliced, expected)):
        result.text = spliced if spliced is not None else _marked_whole(ours, theirs)
        return result
    result.text = _dump_over(ours, expected)
    return result


# --- what the merge means ---------------------------------------------------------------------

_MISSING = object()


def _label(section: str, key: str) -> str:
    return f"{section[:-1] if section in SECTIONS else 'setting'} {key}"


def _entry_key(section: str, entry: Any) -> str:
    """How an entry is known: its id or name; an entry without one, by what it holds."""
    name = entry.get(SECTIONS[section]) if isinstance(entry, dict) else None
    if isinstance(name, str):
        return name
    return "#" + json.dumps(entry, sort_keys=True, default=str)


def _keyed(section: str, entries: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for entry in entries if isinstance(entries, list) else []:
        key = _entry_key(section, entry)
        if key in found:
            raise Unmergeable(f"{section} lists {key} twice")
        found[key] = entry
    return found


def _three_way(was: Any, mine: Any, other: Any) -> tuple[Any, str]:
    """The merged value and where it came from: "ours", "theirs" or "conflict" (ours kept)."""
    if other == was or mine == other:
        return mine, "ours"
    if mine == was:
        return other, "theirs"
    return mine, "conflict"


def _merge_data(o: dict[str, Any], a: dict[str, Any], b: dict[str, Any]) -> tuple[dict[str, Any], list[str], list[str]]:
    merged: dict[str, Any] = {}
    from_theirs: list[str] = []
    conflicts: list[str] = []
    keys = list(a) + [k for k in b if k not in a] + [k for k in o if k not in a and k not in b]
    for top in keys:
        if top in SECTIONS and any(isinstance(side.get(top), list) for side in (o, a, b)):
            entries = _merge_section(top, o.get(top), a.get(top), b.get(top), from_theirs, conflicts)
            if entries is not None:
                merged[top] = entries
            continue
        value, came = _three_way(o.get(top, _MISSING), a.get(top, _MISSING), b.get(top, _MISSING))
        _note(came, _label(top, top), from_theirs, conflicts)
        if value is not _MISSING:
            merged[top] = value
    return merged, from_theirs, conflicts


def _note(came: str, label: str, from_theirs: list[str], conflicts: list[str]) -> None:
    """Where a merged entry came from, when it is not ours: their side, or a conflict."""
    if came == "theirs":
        from_theirs.append(label)
    elif came == "conflict":
        conflicts.append(label)


def _merge_section(section: str, o: Any, a: Any, b: Any, from_theirs: list[str],
                   conflicts: list[str]) -> list[Any] | None:
    was, mine, other = _keyed(section, o), _keyed(section, a), _keyed(section, b)
    entries: list[Any] = []
    for key in [*mine, *(k for k in other if k not in mine), *(k for k in was if k not in mine and k not in other)]:
        value, came = _three_way(was.get(key, _MISSING), mine.get(key, _MISSING), other.get(key, _MISSING))
        _note(came, _label(section, key), from_theirs, conflicts)
        if value is not _MISSING:
            entries.append(value)
    if a is None and not entries:
        return None  # ours has no such section and nothing comes into it
    return entries


# --- reading a side ---------------------------------------------------------------------------

def _round_trip() -> YAML:
    yaml = YAML()  # as kbuild.store.sources writes the file: comments, order and quoting kept
    yaml.preserve_quotes = True
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def _plain(text: str) -> Any:
    return YAML(typ="safe").load(text) if text.strip() else {}


def _means(text: str, expected: dict[str, Any]) -> bool:
    try:
        return _plain(text) == expected
    except YAMLError:
        return False


def _read(text: str, which: str, empty_ok: bool = False) -> _Side:
    try:
        data = _plain(text)
        doc = _round_trip().load(text) if text.strip() else CommentedMap()
    except YAMLError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise Unmergeable(f"{which} is not valid YAML ({first})") from None
    if data is None and empty_ok:
        data, doc = {}, CommentedMap()
    if not isinstance(data, dict) or not isinstance(doc, CommentedMap):
        raise Unmergeable(f"{which} is not a mapping with a `sources:` list")
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    top = _top_blocks(doc, lines)
    items: dict[str, dict[str, _Block]] = {}
    block_style: dict[str, bool] = {}
    for section in SECTIONS:
        seq = doc.get(section)
        if isinstance(seq, CommentedSeq):
            block_style[section] = not seq.fa.flow_style() and len(seq) > 0
            if block_style[section]:
                items[section] = _item_blocks(section, seq, top[section], lines)
    return _Side(text, data, lines, top, items, block_style)


def _is_filler(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


def _split_trailing(lines: list[str]) -> tuple[list[str], list[str]]:
    """A run of lines into its content and the comment and blank lines after it."""
    end = len(lines)
    while end > 0 and _is_filler(lines[end - 1]):
        end -= 1
    return lines[:end], lines[end:]


def _top_blocks(doc: CommentedMap, lines: list[str]) -> dict[str, _Block]:
    keys = list(doc)
    starts = [doc.lc.key(k)[0] for k in keys]
    blocks: dict[str, _Block] = {}
    leading = _split_trailing(lines[:starts[0]])[1] if starts else []
    for n, key in enumerate(keys):
        end = starts[n + 1] if n + 1 < len(keys) else len(lines)
        content, after = _split_trailing(lines[starts[n]:end])
        blocks[key] = _Block(leading, content, starts[n], 0)
        leading = after
    return blocks


def _item_blocks(section: str, seq: CommentedSeq, owner: _Block, lines: list[str]) -> dict[str, _Block]:
    starts = [seq.lc.item(n)[0] for n in range(len(seq))]
    end_of_section = owner.start + len(owner.content)
    blocks: dict[str, _Block] = {}
    leading = [line for line in lines[owner.start + 1:starts[0]] if _is_filler(line)]
    for n, entry in enumerate(seq):
        end = starts[n + 1] if n + 1 < len(seq) else end_of_section
        content, after = _split_trailing(lines[starts[n]:end])
        blocks[_entry_key(section, entry)] = _Block(leading, content, starts[n], seq.lc.item(n)[1])
        leading = after
    return blocks


# --- writing the merge ------------------------------------------------------------------------

def text_merge(base: str, ours: str, theirs: str) -> tuple[str, bool] | None:
    """git's own text merge, and whether it is clean (else the text has git's markers); None
    when git cannot run."""
    with tempfile.TemporaryDirectory(prefix="kbuild-merge-") as folder:
        paths = []
        for name, text in (("ours", ours), ("base", base), ("theirs", theirs)):
            path = Path(folder) / name
            path.write_text(text, "utf-8")
            paths.append(str(path))
        try:
            done = subprocess.run(["git", "merge-file", "-p", "-L", "ours", "-L", "base", "-L", "theirs", *paths], capture_output=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return None
    if done.returncode < 0 or done.returncode > 127:
        return None
    try:
        return done.stdout.decode("utf-8"), done.returncode == 0
    except UnicodeDecodeError:
        return None


def _shifted(lines: list[str], by: int) -> list[str]:
    """Lines moved right (or left, as far as their spaces go) by `by` columns."""
    if by >= 0:
        return [(" " * by + line) if line.strip() else line for line in lines]
    return [line[min(-by, len(line) - len(line.lstrip(" "))):] for line in lines]


def _conflict(mine: list[str], other: list[str]) -> list[str]:
    return [MARKERS[0], *mine, MARKERS[1], *other, MARKERS[2]]


def _splice(o: _Side, a: _Side, b: _Side, conflicts: list[str]) -> str | None:
    """Our text with their changes put in, line by line; None when it cannot be done so."""
    replace: dict[int, list[str]] = {}  # the first line of one of our blocks -> the lines in its place
    drop: set[int] = set()  # our lines taken out
    after: dict[int, list[str]] = {}  # after our line n, these lines
    conflicted = set(conflicts)

    def put(block: _Block, lines: list[str]) -> None:
        replace[block.start] = lines
        drop.update(range(block.start + 1, block.start + len(block.content)))

    def block_lines(block: _Block, with_leading: bool = True) -> list[str]:
        return [*(block.leading if with_leading else []), *block.content]

    for top in [*a.data, *(k for k in b.data if k not in a.data), *(k for k in o.data if k not in a.data)]:
        if top in SECTIONS and any(isinstance(s.data.get(top), list) for s in (o, a, b)):
            if not _splice_section(top, o, a, b, put, drop, after, conflicted):
                return None
            continue
        was, mine, other = (s.data.get(top, _MISSING) for s in (o, a, b))
        if other == was or mine == other:
            continue
        ours_block, theirs_block = a.top.get(top), b.top.get(top)
        if mine == was or _label(top, top) in conflicted:
            theirs_lines = block_lines(theirs_block, False) if theirs_block else []
            if ours_block is None:
                if not a.top:
                    return None
                last = max(a.top.values(), key=lambda blk: blk.start)
                at = last.start + len(last.content) - 1
                lines = _conflict([], theirs_lines) if mine != was else [*theirs_block.leading, *theirs_lines]
                after.setdefault(at, []).extend(lines)
            elif mine != was:
                put(ours_block, _conflict(ours_block.content, theirs_lines))
            else:
                put(ours_block, theirs_lines)
    out: list[str] = []
    for n, line in enumerate(a.lines):
        if n in replace:
            out.extend(replace[n])
        elif n not in drop:
            out.append(line)
        out.extend(after.get(n, []))
    return "".join(out)


def _splice_section(section: str, o: _Side, a: _Side, b: _Side, put: Callable[[_Block, list[str]], None], drop: set[int],
                    after: dict[int, list[str]], conflicted: set[str]) -> bool:
    was, mine, other = (_keyed(section, s.data.get(section)) for s in (o, a, b))
    ours_blocks, theirs_blocks = a.items.get(section, {}), b.items.get(section, {})
    new = [k for k in other if k not in mine and k not in was]
    changed = [k for k in mine if k in other and other[k] != mine[k] and (mine[k] == was.get(k, _MISSING)
                                                                           or _label(section, k) in conflicted)]
    removed = [k for k in mine if k not in other and k in was]
    revived = [k for k in other if k not in mine and k in was and other[k] != was[k]]  # ours removed, theirs changed
    if not (new or changed or removed or revived):
        return True
    if not a.block_style.get(section) or any(k not in theirs_blocks for k in [*new, *changed, *revived]):
        return False
    column = next(iter(ours_blocks.values())).column

    def theirs_lines(key: str, with_leading: bool) -> list[str]:
        block = theirs_blocks[key]
        return _shifted([*(block.leading if with_leading else []), *block.content], column - block.column)

    for key in changed:
        block = ours_blocks[key]
        put(block, _conflict(block.content, theirs_lines(key, False)) if _label(section, key) in conflicted
            else theirs_lines(key, False))
    for key in removed:
        block = ours_blocks[key]
        if _label(section, key) in conflicted:
            put(block, _conflict(block.content, []))
        else:
            put(block, [])
            drop.update(range(block.start - len(block.leading), block.start))
    last = max(ours_blocks.values(), key=lambda blk: blk.start)
    at = last.start + len(last.content) - 1
    for key in revived:
        after.setdefault(at, []).extend(_conflict([], theirs_lines(key, False)))
    for key in new:
        after.setdefault(at, []).extend(theirs_lines(key, True))
    return True


def _marked_whole(ours: str, theirs: str) -> str:
    end = "" if ours.endswith("\n") or not ours else "\n"
    return MARKERS[0] + ours + end + MARKERS[1] + theirs + ("" if theirs.endswith("\n") else "\n") + MARKERS[2]


def _dump_over(ours: str, expected: dict[str, Any]) -> str:
    """The merged entries written over our side's document, which keeps our comments where the
    entries it holds are the merged ones."""
    yaml = _round_trip()
    doc = yaml.load(ours) if ours.strip() else CommentedMap()
    for key in [k for k in doc if k not in expected]:
        del doc[key]
    for key, value in expected.items():
        if key in SECTIONS and isinstance(value, list):
            current = doc.get(key)
            kept = _keyed(key, list(current)) if isinstance(current, CommentedSeq) else {}
            seq = CommentedSeq([kept.get(_entry_key(key, v), v) if kept.get(_entry_key(key, v)) == v else v
                                for v in value])
            seq.fa.set_block_style()
            doc[key] = seq
        elif doc.get(key, _MISSING) != value:
            doc[key] = value
    out = io.StringIO()
    yaml.dump(doc, out)
    return out.getvalue()
