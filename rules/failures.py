"""What a page says of a page it is built on that failed.

A page above a failed one is built from what did build and names what failed (`not_built`): the
failure stays visible there, and in the build's exit code, while the rest of the project (its
indexes, its search index, its views and specs) keeps up with its sources. It names a failure,
never its reason: a query records only that what it read failed, so a reason written into a page
would go stale while the failure stayed.
"""
from __future__ import annotations

from typing import Any

from kbuild.engine import QueryFailed


def not_built(name: str) -> str:
    """A listing's line for what failed to build."""
    return f"- {name}: not built; run `kbuild` to see why"


def built(values: list[Any]) -> int:
    return sum(not isinstance(v, QueryFailed) for v in values)
