"""The committed lock as files: `kbuild.lock` alone, or split into shards beside it.

One lock file grows by about 300 bytes a query, and git hosts refuse a file over 100 MiB
(docs/scale.md): a store of a few hundred thousand queries cannot keep its graph in one file.
Split, each query's entry lies in the shard named by the first element of its key, when that is
a string (`kbuild.lock.d/<name>.lock`), and in `kbuild.lock` otherwise. Each file has the format
of lockfile.py, so each is sorted, diffs and merges as the single lock does, and a build that
changed the queries of one shard rewrites that file alone.

Which file holds an entry decides nothing about its value, so it is in no fingerprint: the
layout is the engine's own setting (`Engine(split_lock=...)`), and a build whose lock is laid
out otherwise (the setting changed, an entry moved by hand) reads every file and writes the lock
whole in its layout. Reading never depends on where an entry lies: every file's entries are
taken, and an id found twice is an error.
"""
from __future__ import annotations

import json
import mmap
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from .hashing import ABSENT, hash_bytes
from .lockfile import LockError, entries_of_ids, lock_entries, patch_lock_pieces, read_lock, render_lock
from .state import Memo

SUFFIX = ".lock"
# A shard's file name is the key's first element where it is a plain name, lower-cased so that
# two names differing in case share a file on a case-insensitive disk, rather than overwrite
# each other; any other name is spelled by its hash ("_" + hex, which no plain name starts with).
_PLAIN = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def shard_of(key: Sequence[Any]) -> str | None:
    """The shard of a query with this key, or None for the main lock file."""
    if not key or not isinstance(key[0], str):
        return None
    name = key[0].lower()
    return name if _PLAIN.fullmatch(name) else "_" + hash_bytes(key[0].encode())[:16]


def key_of(qid: str) -> list[Any] | None:
    """The key a query id was made from (rule.query_id), or None when the id cannot be read back
    (a rule name with a parenthesis in it)."""
    start = qid.find("(")
    if start < 0 or not qid.endswith(")"):
        return None
    try:
        key = json.loads("[" + qid[start + 1:-1] + "]")
    except ValueError:
        return None
    from .rule import query_id  # rule imports the engine's context: not at module load

    return key if query_id(qid[:start], key) == qid else None


class LockFiles:
    def __init__(self, path: Path, split: bool) -> None:
        self.path = path  # kbuild.lock: always written, so a store always has one
        self.split = split
        self.folder = path.with_name(path.name + ".d")
        self._shard_files: dict[str, Path] = {}  # by the key's first element: an import asks once an entry

    def file_for(self, key: Sequence[Any]) -> Path:
        if not self.split or not key or not isinstance(key[0], str):
            return self.path
        file = self._shard_files.get(key[0])
        if file is None:
            shard = shard_of(key)
            assert shard is not None
            file = self._shard_files[key[0]] = self.folder / (shard + SUFFIX)
        return file

    def name(self, file: Path) -> str:
        """How a lock file is named in the digests, messages and the state folder: from the lock's folder."""
        return file.relative_to(self.path.parent).as_posix()

    def present(self) -> list[Path]:
        """The lock files there are: kbuild.lock, then every shard, whatever the layout (a lock
        split before the setting was turned off still holds entries). LockError when the shards'
        folder or a shard is not a plain folder or file: the lock is written only inside the project."""
        files = [self.path] if os.path.lexists(self.path) else []
        if os.path.islink(self.folder):
            raise LockError(f"{self.name(self.folder)} is a symlink; the lock's shards must be files in the "
                            f"project: remove it (git rm {self.name(self.folder)}) and run `kbuild`")
        try:
            entries = [e for e in os.scandir(self.folder) if e.name.endswith(SUFFIX)]
        except (FileNotFoundError, NotADirectoryError):
            entries = []
        for e in entries:  # a planted pipe would hang the read, a symlink lead out of the project
            if not e.is_file(follow_symlinks=False):
                raise LockError(f"{self.name(self.folder / e.name)} is not a regular file (a symlink, a pipe?); "
                                "remove it and run `kbuild`")
        return files + sorted(self.folder / e.name for e in entries)

    def digests(self, hash_of: Callable[[Path], str]) -> dict[str, str]:
        """Each present file's name and content hash."""
        return {self.name(f): hash_of(f) for f in self.present()}

    def digest(self, digests: Mapping[str, str]) -> str:
        """One hash for the whole lock and its layout. A single lock's is its file's, as before
        the lock could be split, so a store made then is not read as changed."""
        if not digests:
            return ABSENT
        if not self.split and list(digests) == [self.name(self.path)]:
            return next(iter(digests.values()))
        layout = "split" if self.split else "one file"
        return hash_bytes(json.dumps([layout, sorted(digests.items())]).encode())

    def read(self) -> Iterator[tuple[Path, dict[str, Memo]]]:
        """Each lock file with its memos. LockError when one is not a lock, or an id is in two."""
        seen: dict[str, Path] = {}
        for file in self.present():
            memos = read_lock(file)
            for qid in memos:
                other = seen.setdefault(qid, file)
                if other is not file:  # the same object unless in two files: Path's == is slow
                    raise LockError(f"{self.name(file)} and {self.name(other)} both have the entry {qid}; "
                                    "take the lock from one commit and run `kbuild`")
            yield file, memos

    def entries(self) -> dict[str, bytes] | None:
        """Every entry of every file as its bytes (lockfile.lock_entries), or None when a file is
        not a lock this code wrote or an id is in two files."""
        found: dict[str, bytes] = {}
        for file in self.present():
            try:
                entries = lock_entries(file.read_bytes())
            except OSError:
                return None
            if entries is None or not found.keys().isdisjoint(entries):
                return None
            found.update(entries)
        return found

    def entries_for(self, ids: Iterable[str]) -> dict[str, bytes] | None:
        """The entries of `ids` (those the lock holds), each found by a binary search of the file
        the layout puts it in; every entry (entries()) when one is not where the layout says,
        which a lock laid out otherwise can be. None as for entries()."""
        wanted: dict[Path, list[str]] = {}
        for qid in ids:
            key = key_of(qid)
            if key is None:
                return self.entries()
            wanted.setdefault(self.file_for(key), []).append(qid)
        found: dict[str, bytes] = {}
        for file, group in wanted.items():
            try:
                entries = entries_of_ids(file.read_bytes(), group)
            except FileNotFoundError:
                return self.entries()
            except OSError:
                return None
            if entries is None:
                return None
            found.update(entries)
        return found if len(found) == sum(map(len, wanted.values())) else self.entries()

    def render(self, memos: Mapping[str, Memo]) -> dict[Path, bytes | None]:
        """Every file of the lock of `memos`, and None for each present shard that has no entry any more."""
        groups: dict[Path, dict[str, Memo]] = {self.path: {}}
        for qid, memo in memos.items():
            groups.setdefault(self.file_for(memo.key), {})[qid] = memo
        files: dict[Path, bytes | None] = {f: None for f in self.present() if f != self.path}
        files.update((f, render_lock(group)) for f, group in groups.items())
        return files

    def patch(self, memos: Mapping[str, Memo], changed: set[str]) -> dict[Path, list[bytes | memoryview] | None] | None:
        """The files that the `changed` queries' entries lie in, each rendered again from the one
        on disk, mapped into memory (lockfile.patch_lock_pieces), as the pieces to write; None
        for a shard left empty; the other files are as they are. None when a file cannot be
        patched (not a lock this code wrote, or an id whose key cannot be read back), and the
        lock is rendered whole."""
        groups: dict[Path, set[str]] = {}
        for qid in changed:
            memo = memos.get(qid)
            key = memo.key if memo is not None else key_of(qid)
            if key is None:
                return None
            groups.setdefault(self.file_for(key), set()).add(qid)
        files: dict[Path, list[bytes | memoryview] | None] = {}
        empty = render_lock({})
        for file, group in groups.items():
            try:
                old = _mapped(file)
            except FileNotFoundError:
                old = empty  # a shard that had no entry
            except (OSError, ValueError):
                return None
            pieces = patch_lock_pieces(old, memos, group)
            if pieces is None:
                return None
            left_empty = file != self.path and sum(map(len, pieces)) == len(empty) and b"".join(pieces) == empty
            files[file] = None if left_empty else pieces
        return files


def _mapped(file: Path) -> bytes | mmap.mmap:
    """The file's bytes mapped into memory, read only (an empty file as it is: it cannot be
    mapped). The map lasts while any view of it does; the lock is only ever replaced by a
    rename, never written in place, so what it maps does not change under it."""
    with open(file, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
