"""The layout of `.kbuild/`, the local state: the one place that names what lies in it.

The engine's files (state.db, cache/, build.lock) are named by `kbuild.engine.layout`; the rest
are kbuild's logs, which `kbuild logs`, `kbuild search --misses` and `kbuild explain` read back.
Everything here is rebuildable or disposable, which is why `kbuild clean` may delete it, but the
hand edits a forced build overwrote (`overwritten/`), which it keeps.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from ..engine.buildlock import BuildLock
from ..engine.layout import StateFolder


@dataclass(frozen=True)
class LocalState(StateFolder):
    @property
    def call_log(self) -> Path:
        """Every model call, with its prompt and response (kbuild.model.calllog)."""
        return self.path / "logs.db"

    @property
    def lookups(self) -> Path:
        """Every search and context request, with what it found (kbuild.retrieval.search)."""
        return self.path / "lookups.jsonl"

    @property
    def fetch_problems(self) -> Path:
        """Why each url source that failed to download did (JSON by "project/source"): the
        message its raw/ copy's page fails with (kbuild.store.fetch)."""
        return self.path / "fetch-problems.json"

    @property
    def batches(self) -> Path:
        """Batches of model calls submitted and not collected, and what collected ones answered
        (kbuild.model.batches)."""
        return self.path / "batches"

    @property
    def reports(self) -> Path:
        """The newest build reports, for `kbuild explain` (kbuild.store.reports)."""
        return self.path / "reports"

    def clear(self, keep_cache: bool) -> None:
        """Delete everything here, with the call cache unless `keep_cache`; under the build lock,
        since a build running now would lose its state under it (BuildLocked says who holds it)."""
        # the lock file is held meanwhile; overwritten hand edits are a person's, not rebuildable
        kept = {self.build_lock, self.overwritten} | ({self.cache} if keep_cache else set())
        with BuildLock(self.path):
            for item in self.path.iterdir():
                if item not in kept:
                    shutil.rmtree(item) if item.is_dir() else item.unlink()
