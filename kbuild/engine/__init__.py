"""kbuild's engine: memoised queries over content-hashed inputs, with early cutoff.

It knows queries, rules, files and hashes; what the rules compute is not its business.
"""
from .context import Context
from .engine import Engine
from .report import BuildLocked, BuildStopped, CycleError, Problem, QueryFailed, Report
from .callcache import CallCache
from .files import PathEscapesRoot
from .graph import to_graph
from .lockfile import LockError, read_lock
from .rule import Query, Rule, rule
from .state import FileRead, Memo
from .verify import Change, Reason

__all__ = [
    "BuildLocked", "BuildStopped", "CallCache", "Change", "Context", "CycleError", "Engine", "FileRead", "LockError", "Memo",
    "PathEscapesRoot", "Problem", "Query", "QueryFailed", "Reason", "Report", "Rule", "read_lock", "rule", "to_graph",
]
