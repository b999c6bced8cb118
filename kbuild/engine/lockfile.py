"""The committed lock: the dependency graph without values, so a fresh clone can see staleness.

Deterministic and diff-friendly: queries sorted by id, one dependency per line, so a rebuilt
page shows in `git diff` as the lines of the hashes that changed.
"""
from __future__ import annotations

import json
from pathlib import Path

from .files import atomic_write
from .state import Memo

LOCK_VERSION = 1


class LockError(ValueError):
    pass


def render_lock(memos: dict[str, Memo]) -> bytes:
    dumps = json.dumps
    lines = ["{", f' "version": {LOCK_VERSION},', ' "queries": {']
    entries = []
    for qid in sorted(memos):
        m = memos[qid]
        groups = []
        for group in m.deps:
            items = ", ".join(dumps([d, h]) for d, h in group)
            groups.append(f"    [{items}]")
        deps = "[\n" + ",\n".join(groups) + "\n   ]" if groups else "[]"
        outputs = dumps(m.outputs, sort_keys=True, separators=(", ", ": "))
        entries.append(
            f"  {dumps(qid)}: {{\n"
            f'   "rule": {dumps(m.rule)},\n'
            f'   "key": {dumps(m.key)},\n'
            f'   "fingerprint": {dumps(m.fingerprint)},\n'
            f'   "hash": {dumps(m.hash)},\n'
            f'   "outputs": {outputs},\n'
            + (f'   "notes": {dumps(m.notes, sort_keys=True)},\n' if m.notes else "")
            + f'   "deps": {deps}\n'
            "  }"
        )
    lines.append(",\n".join(entries))
    lines += [" }", "}", ""]
    return "\n".join(lines).encode()


def write_lock(path: Path, memos: dict[str, Memo]) -> bytes:
    data = render_lock(memos)
    atomic_write(path, data)
    return data


def read_lock(path: Path) -> dict[str, Memo]:
    try:
        doc = json.loads(path.read_bytes())
        if doc.get("version") != LOCK_VERSION:
            raise LockError(f"{path} has lock version {doc.get('version')!r}; this kbuild reads {LOCK_VERSION}")
        return {
            qid: Memo(qid, e["rule"], e["key"], e["fingerprint"], e["deps"], e["hash"], e["outputs"], e.get("notes", {}))
            for qid, e in doc["queries"].items()
        }
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        if isinstance(exc, LockError):
            raise
        raise LockError(
            f"{path} is not a valid kbuild lock ({exc}); if a merge conflict left it broken, "
            "take either side and run `kbuild` to bring it up to date"
        ) from None
