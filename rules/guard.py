"""The grounding guardrail, shared by every rule that writes statements: ask before writing."""
from __future__ import annotations

from typing import Any

from kbuild.engine import Problem
from kbuild.engine.hashing import hash_bytes


async def write_grounded(ctx: Any, backend: Any, path: str, page: str, claims: str, sources: list[str]) -> None:
    """Write `page` only if the backend finds nothing in `claims` (the page's own statements)
    that `sources` do not support, and record the verdict with the page's hash in the lock.

    A page that fails is not written: its previous version stays, and its query fails, so nothing
    is built on it in this run.
    """
    unsupported = await backend.ground(ctx, claims, sources)
    if unsupported:
        listed = "; ".join(f"\"{s[:80]}\"" for s in unsupported[:5])
        raise Problem(f"{path}: its sources do not support {listed}; the previous version stays")
    ctx.write(path, page)
    by = "code" if backend.name == "offline" else f"code and {backend.params('grounding').get('model')}"
    ctx.note("grounding", {"passed": True, "by": by, "page": hash_bytes(page.encode())})
