"""Early cutoff: a query that ran again and produced the value it had before, or one its rule's
cutoff hook judges the same, presents its old hash (and keeps its old value and files), so
nothing that read it runs again."""
from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .rule import Cutoff, Judgement

if TYPE_CHECKING:
    from .context import Context


@dataclass(frozen=True)
class Verdict:
    """A cutoff hook's answer: is the new value the same as the old?"""

    same: bool
    decision: dict[str, Any] | None = None  # how a hook that explains itself decided: for the report and explain


def _takes_context(hook: Callable[..., Any]) -> bool:
    """A cutoff hook is hook(old, new), or hook(ctx, old, new) when it needs to ask a model."""
    return len(inspect.signature(hook).parameters) == 3


async def judge(hook: Cutoff, ctx: Context, old_value: Any, new_value: Any) -> Verdict:
    """Ask a rule's cutoff hook whether `new_value` means the same as `old_value`."""
    returned = hook(ctx, old_value, new_value) if _takes_context(hook) else hook(old_value, new_value)
    if inspect.isawaitable(returned):
        returned = await returned
    if isinstance(returned, Judgement):
        same = bool(returned.same)
        return Verdict(same, {"same": same, "stage": returned.stage, "probability": returned.probability,
                              "reason": returned.reason})
    return Verdict(bool(returned))
