"""The engine's own files: the lock, and what `Engine` and `BuildLock` write in the local state folder."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

LOCK_FILE = "kbuild.lock"  # in the build root; committed, it carries the graph to a fresh clone
FOLDER = ".kbuild"  # beside the lock, under the build root; never committed


@dataclass(frozen=True)
class StateFolder:
    """The local state folder, rebuildable from the lock and the call cache."""

    path: Path

    @property
    def state_db(self) -> Path:
        """The memo of every query and the stat cache (SQLite; -wal, -shm and -journal beside it)."""
        return self.path / "state.db"

    @property
    def state_db_files(self) -> list[Path]:
        """state.db and the files SQLite keeps beside it: what dropping the state removes."""
        return [self.path / f"state.db{suffix}" for suffix in ("", "-wal", "-shm", "-journal")]

    @property
    def cache(self) -> Path:
        """Cached answers to expensive calls: the one thing here a rebuild cannot recompute for free."""
        return self.path / "cache"

    @property
    def build_lock(self) -> Path:
        return self.path / "build.lock"

    @property
    def overwritten(self) -> Path:
        """Files a build overwrote or removed that no build here is known to have written (a
        person's edit, an output only the lock vouched for), kept to be recovered: `kbuild clean`
        keeps them."""
        return self.path / "overwritten"
