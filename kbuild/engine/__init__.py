"""kbuild's engine: memoised queries over content-hashed inputs, with early cutoff.

It knows queries, rules, files and hashes; what the rules compute is not its business.

Names are imported from their modules when first asked for (PEP 562), so that a command that
needs one small part (`kbuild.engine.layout`, to find `.kbuild/`) does not import asyncio,
SQLite and the whole algorithm.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# `rule` is a function and the name of its module: bound here, or importing the module would
# leave the package's `rule` naming the module
from .rule import Decisive, Query, Rule, rule

EXPORTS = {
    "BuildLocked": "report", "BuildStopped": "report", "CallCache": "callcache", "CallDeferred": "report", "Change": "verify",
    "Context": "context", "CycleError": "report", "Engine": "engine", "FileRead": "state", "LockError": "lockfile",
    "Memo": "state", "PathEscapesRoot": "files", "Problem": "report", "QueryFailed": "report", "Reason": "verify",
    "Report": "report", "read_lock": "lockfile", "to_graph": "graph", "hash_bytes": "hashing",
    "atomic_write": "files", "FOLDER": "layout",
}
__all__ = sorted([*EXPORTS, "Decisive", "Query", "Rule", "rule"])


def __getattr__(name: str) -> Any:
    if name not in EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{EXPORTS[name]}"), name)
    globals()[name] = value  # once found, an ordinary attribute
    return value


if TYPE_CHECKING:
    from .callcache import CallCache
    from .context import Context
    from .engine import Engine
    from .files import PathEscapesRoot, atomic_write
    from .graph import to_graph
    from .hashing import hash_bytes
    from .layout import FOLDER
    from .lockfile import LockError, read_lock
    from .report import BuildLocked, BuildStopped, CallDeferred, CycleError, Problem, QueryFailed, Report
    from .state import FileRead, Memo
    from .verify import Change, Reason
