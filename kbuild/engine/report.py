"""What a build reports, and the errors that end a query or a build."""
from __future__ import annotations

import errno
import sqlite3
from dataclasses import dataclass, field
from typing import Any, Literal

SQLITE_CORRUPT, SQLITE_FULL, SQLITE_NOTADB = 11, 13, 26


class BuildLocked(RuntimeError):
    pass


class BuildStopped(RuntimeError):
    """A build that cannot go on (the disk is full): one line for the user. What finished is
    kept (its outputs, its memos, its cached calls); the lock is not written, so it never names
    a state that was not committed."""


class StateDamaged(BuildStopped):
    """The local state is not a readable database. It is a cache of the lock and the files,
    so it is dropped and the build starts again from the lock."""


def out_of_space(exc: BaseException) -> bool:
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    return isinstance(exc, sqlite3.Error) and (getattr(exc, "sqlite_errorcode", None) == SQLITE_FULL
                                               or "database or disk is full" in str(exc))


def state_damaged(exc: BaseException) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(exc, sqlite3.DatabaseError) and (
        code is not None and code & 0xFF in (SQLITE_CORRUPT, SQLITE_NOTADB)
        or "malformed" in str(exc) or "not a database" in str(exc))


def stop_for(exc: BaseException, where: str) -> BuildStopped | None:
    """The BuildStopped an error `where` means, or None when it fails one query only."""
    if out_of_space(exc):
        return BuildStopped(f"no space left on the device ({where}); free some space and run "
                            "`kbuild` again (what was built is kept)")
    if state_damaged(exc):
        return StateDamaged(f"the local state .kbuild/state.db is damaged ({exc})")
    return None


class CycleError(RuntimeError):
    def __init__(self, members: list[str]) -> None:
        self.members = members
        super().__init__("dependency cycle: " + " -> ".join(members))


class Problem(Exception):
    """A failure the user can act on (bad input, a refused reply): shown as its message alone,
    with no exception type and no traceback unless asked for."""


class CallDeferred(Exception):
    """Raised by a call's compute when its answer will come to a later build (the request was
    handed to a service that answers in its own time): the query waits. It is neither failed
    nor cached; it runs again in the next build, and so does every query reading it."""


class QueryFailed(Exception):
    """Raised inside a rule when a query it reads has failed in this build, or is `waiting` for
    a deferred call (then its reader waits too, even one that builds around failures)."""

    def __init__(self, query_id: str, reason: str, waiting: bool = False) -> None:
        self.query_id = query_id
        self.reason = reason
        self.waiting = waiting
        super().__init__(f"{query_id} {'waits' if waiting else 'failed'}: {reason}")


@dataclass
class Report:
    """What one build did. `reasons` says why each executed query ran."""

    executed: list[str] = field(default_factory=list)
    reused: int = 0
    cutoff: dict[str, Literal["exact", "hook"]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    waiting: dict[str, str] = field(default_factory=dict)  # queries left for a later build: a call was deferred
    warnings: dict[str, list[str]] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)  # cutoff hooks' decisions, by query
    reasons: dict[str, str] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    calls: int = 0
    cache_hits: int = 0  # answers not computed, from the local cache or the remote one
    remote_hits: int | None = None  # ... of them from the remote call cache; None: there is none
    seconds: float = 0.0
    errors: dict[str, BaseException] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        """Nothing failed and nothing waits: every target is built."""
        return not self.failed and not self.waiting

    def root_failures(self) -> dict[str, str]:
        """The failures that are causes, not queries that failed because something they read did."""
        return {q: m for q, m in self.failed.items() if not isinstance(self.errors.get(q), QueryFailed)}

    def summary(self) -> str:
        parts = [
            f"{len(self.executed)} ran",
            f"{self.reused} reused",
            f"{len(self.cutoff)} cut off",
            f"{len(self.failed)} failed",
            *([f"{len(self.waiting)} waiting"] if self.waiting else []),
            f"{self.calls} calls ({self.cache_hits} cached"
            + ("" if self.remote_hits is None else f", {self.remote_hits} from the remote") + ")",
            *(f"{value:.4f} {name}" if isinstance(value, float) and not value.is_integer() else f"{value:g} {name}"
              for name, value in sorted(self.counters.items())),
            f"{self.seconds:.2f}s",
        ]
        return ", ".join(parts)
