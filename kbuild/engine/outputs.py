"""The files queries write: written atomically, left alone when unchanged, and removed when no
query produces them any more, but only when they are still what kbuild wrote."""
from __future__ import annotations

import shutil
import time
from pathlib import Path

from .buildstate import BuildState
from .files import atomic_write
from .hashing import ABSENT, hash_bytes
from .state import FileRead, Memo


class Outputs:
    """The files queries write, and those removed when no query writes them any more."""

    def __init__(self, db: BuildState) -> None:
        self.db = db
        self.produced: set[str] = set()  # every output a query produced in this build
        self.read_removals: dict[str, str] = {}  # files to remove once no query reads them: path -> hash

    def intact(self, memo: Memo) -> bool:
        return all(self.db.hasher.hash(p) == d for p, d in memo.outputs.items())

    def write(self, produced: dict[str, bytes], previous: dict[str, str]) -> dict[str, str]:
        area = self.db.engine.outputs
        written: dict[str, str] = {}
        for path, data in sorted(produced.items()):
            digest = hash_bytes(data)
            # an unchanged file is not touched; a symlink is replaced even when its target matches
            if self.db.hasher.hash(path) != digest or (area.root / path).is_symlink():
                full = area.path(path)  # checked through the file system where it is written
                try:
                    # No fsync per file: the commit that records this output syncs the disk once
                    # for every file written since the one before (BuildState.commit), and an
                    # output lost to a power cut before that is caught by its recorded hash anyway.
                    atomic_write(full, data, durable=False)
                except OSError as exc:
                    exc.filename = path  # the output, not its temporary file: what the user knows
                    raise
                self.db.hasher.wrote(path, digest)
                self.db.unsynced = True
            written[path] = digest
            self.produced.add(path)
        for path in previous.keys() - written.keys():
            self.remove(path, previous[path])
        return written

    def remove(self, path: str, recorded: str) -> None:
        """Remove a file a query no longer produces, if it is still what kbuild wrote: never a
        file outside the outputs' folder, one whose content is not the recorded one (edited by
        hand, or never ours), or one a query reads (until it is read no more: see
        finish_removals)."""
        if path in self.produced:  # another query makes it now
            return
        full = self.db.engine.root / path
        why = self.db.engine.outputs.problem(path)
        if why is None and full.is_symlink():
            why = f"{path} is a symlink now, not the file kbuild wrote"
        if why is None:
            current = self.db.hasher.hash(path)
            if current == ABSENT:
                return
            if current != recorded:
                why = f"{path} is not what kbuild wrote there (edited by hand?)"
        if why is None and self.db.state.readers([FileRead.of(path)]):
            self.read_removals[path] = recorded  # a query still reads it; decided at the end
            return
        if why is not None:
            self.db.report.warnings.setdefault(path, []).append(f"kept {path}, which no query produces any more: {why}; "
                                                             "remove it yourself if it is not wanted")
            return
        if path in self.db.lock_only_outputs:  # only the lock's word says kbuild wrote it: a copy is kept
            try:
                kept = self._keep_copy(path)
            except OSError as exc:  # no copy, no removal
                self.db.report.warnings.setdefault(path, []).append(
                    f"kept {path}, which no query produces any more: no copy of it could be kept ({exc.strerror}); "
                    "remove it yourself if it is not wanted")
                return
            self.db.report.warnings.setdefault(path, []).append(
                f"removed {path}, which {self.db.lock_key} says a query no longer built wrote; a copy is in "
                f"{kept.relative_to(self.db.engine.root) if kept.is_relative_to(self.db.engine.root) else kept}")
        full.unlink(missing_ok=True)
        self.db.hasher.forget(path)
        for folder in full.parents:  # folders the removed files leave empty go too
            if folder == self.db.engine.root or not folder.is_relative_to(self.db.engine.root):
                break
            try:
                folder.rmdir()
            except OSError:  # not empty (or gone): stop climbing
                break
        self.db.report.removed.append(path)

    def _keep_copy(self, path: str) -> Path:
        """A copy of an output in the state folder's overwritten/<path>.<time>, before it goes."""
        stamp, n = time.strftime("%Y%m%dT%H%M%S"), 1
        target = self.db.engine.local.overwritten / f"{path}.{stamp}"
        while target.exists():
            target = self.db.engine.local.overwritten / f"{path}.{stamp}-{n}"
            n += 1
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(self.db.engine.root / path, target)
        return target

    def finish_removals(self) -> None:
        """Remove the files that were read when their writer stopped producing them, if no
        query reads them now (a raw copy under its old name), and keep those still read (a file
        a person writes, which a hostile lock named as an output)."""
        pending, self.read_removals = self.read_removals, {}
        for path, recorded in sorted(pending.items()):
            if not self.db.state.readers([FileRead.of(path)]) and not self.db.state.writers([path]):
                self.remove(path, recorded)
