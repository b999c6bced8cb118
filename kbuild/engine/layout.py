"""The engine's own files in the local state folder: what `Engine` and `BuildLock` write there."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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
    def cache(self) -> Path:
        """Cached answers to expensive calls: the one thing here a rebuild cannot recompute for free."""
        return self.path / "cache"

    @property
    def build_lock(self) -> Path:
        return self.path / "build.lock"
