"""What a page does when something it is built from failed."""
from __future__ import annotations

from typing import Any

from kbuild.engine import Context, QueryFailed


def complete(ctx: Context, values: list[Any]) -> list[Any]:
    """The values, or the first failure raised where the page has an earlier version: a page
    above a failed one keeps that version rather than be made again from the rest, which would
    hide what failed. A page made for the first time lists what failed (QueryFailed values stay
    in the list for the caller to name) rather than not exist, which would leave its links
    dangling."""
    failed = next((v for v in values if isinstance(v, QueryFailed)), None)
    if failed is not None and ctx.built_before:
        raise failed
    return values


def built(values: list[Any]) -> int:
    return sum(not isinstance(v, QueryFailed) for v in values)
