"""Forgetting a note: a tombstone instead of its text, and no copy of the text left behind.

`kbuild forget ID` takes the note out of sources.yml, deletes its file, records a tombstone in
kb/PROJECT/notes/tombstones.yml and removes every cached model call and logged call that holds
its words; the build it then runs removes or rebuilds every page built on it. The tombstone keeps
no words, only a hash of each sentence (its words, lowercased), so that `kbuild check` can fail
while any page still carries one of them without the store keeping what was forgotten.
"""
from __future__ import annotations

import io
import json
import re
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict
from ruamel.yaml import YAML

from ..store.layout import Store

WORD = re.compile(r"\w+")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
SHORTEST = 5  # words: a shorter sentence ("Refunds are fast.") is too common to mean this note


class Fingerprint(BaseModel):
    model_config = ConfigDict(frozen=True)

    words: int
    hash: str


class Tombstone(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    forgotten_at: str
    by: str
    reason: str | None = None
    revision: int
    sentences: list[Fingerprint]


def _hash(words: list[str]) -> str:
    from ..engine import hash_bytes

    return hash_bytes(" ".join(words).encode())


def fingerprints(text: str) -> list[Fingerprint]:
    """A hash of each sentence of `text` long enough to be its own."""
    found = []
    for sentence in SENTENCE_END.split(text):
        words = WORD.findall(sentence.lower())
        if len(words) >= SHORTEST:
            found.append(Fingerprint(words=len(words), hash=_hash(words)))
    return sorted(set(found), key=lambda f: (f.words, f.hash))


class Forgotten:
    """What was forgotten, as fingerprints: does a text carry any of it?"""

    def __init__(self, prints: Iterable[Fingerprint]) -> None:
        self.by_length: dict[int, set[str]] = {}
        for p in prints:
            self.by_length.setdefault(p.words, set()).add(p.hash)

    def __bool__(self) -> bool:
        return bool(self.by_length)

    def carried_in_json(self, text: str) -> bool:
        """Whether any string of a JSON document (a logged request) carries forgotten words."""
        try:
            return any(self.carried_by(s) for s in _strings(json.loads(text)))
        except ValueError:
            return self.carried_by(text)

    def carried_by(self, text: str) -> bool:
        if not self.by_length:
            return False
        words = WORD.findall(text.lower())
        for length, hashes in self.by_length.items():
            for start in range(len(words) - length + 1):
                if _hash(words[start:start + length]) in hashes:
                    return True
        return False


def _yaml() -> YAML:
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    return yaml


def tombstones(root: Path, store: Store, project: str) -> list[Tombstone]:
    path = root / store.tombstones(project)
    if not path.is_file():
        return []
    data = _yaml().load(path.read_text("utf-8")) or []
    return [Tombstone.model_validate(entry) for entry in data]


def all_tombstones(root: Path, store: Store, projects: Iterable[str]) -> dict[str, list[Tombstone]]:
    return {p: found for p in projects if (found := tombstones(root, store, p))}


def write_tombstone(root: Path, store: Store, project: str, tombstone: Tombstone) -> None:
    from ..engine import atomic_write

    kept = [t for t in tombstones(root, store, project) if t.id != tombstone.id] + [tombstone]
    out = io.StringIO()
    _yaml().dump([t.model_dump(mode="json") for t in kept], out)
    path = root / store.tombstones(project)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, out.getvalue().encode())


def _strings(value: object) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def purge_call_cache(folder: Path, forgotten: Forgotten) -> int:
    """Delete every cached call whose request or answer carries forgotten words: asked again, it
    is a call, never a wrong answer."""
    removed = 0
    for file in sorted(folder.glob("??/*.json")):
        try:
            record = json.loads(file.read_text("utf-8"))
        except (OSError, ValueError):
            continue
        if forgotten.carried_in_json(json.dumps(record)):
            file.unlink(missing_ok=True)
            removed += 1
    return removed
