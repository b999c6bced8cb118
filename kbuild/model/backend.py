"""What the rules ask of a model, as a protocol every backend (kbuild's own or a plug-in's) meets.

The abilities a backend may lack are declared here too, with the answer of one that lacks them,
so a caller asks a typed question instead of probing for an attribute. A backend that subclasses
`Backend` (as kbuild's own do) inherits those answers and overrides what it can do.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..checks.grounding import Doubt
    from .settings import ModelSettings


@runtime_checkable
class Backend(Protocol):
    name: str
    label: str

    # -- abilities a backend may lack, answered here for one that does --------------------------

    notice: str | None = None  # why this backend answers when nobody chose it: a build says so once
    asks_model: bool = True  # whether its answers cost model calls, which `kbuild status` estimates
    settings: ModelSettings | None = None  # the OpenAI-compatible server it calls, which `kbuild doctor` asks

    async def yes_probability(self, ctx: Any, task: str, question: str, context: str) -> tuple[float, bool] | None:
        """p(yes) to a yes/no question about `context`, and whether it comes from the model's
        logprobs; None when this backend cannot judge (the meaning check then ends at its edit stage)."""
        return None

    async def judge_disagreement(self, ctx: Any, first: str, second: str, attribute: str, values: str) -> bool:
        """Whether two statements that code found to differ (`attribute`: a limit or the force of
        an obligation; `values`: the two) truly disagree; a backend that cannot judge lets code's
        finding stand."""
        return True

    async def write_synthesis(self, ctx: Any, concept: str, facts: list[dict[str, Any]],
                              check: Any) -> list[dict[str, Any]]:
        """One to three sentences on what `facts` ({"ref", "title", "sentences"}: each fact's
        source title and its sentences about `concept`) say of it together, each {"text", "cites"}
        citing the refs it draws on; `check` gives a reply's failures. A backend that writes by
        code writes none: the concept's page quotes each of those sentences already."""
        return []

    # -- what every backend answers -------------------------------------------------------------

    def params(self, task: str) -> dict[str, object]: ...

    def prompts(self, task: str) -> list[Any]: ...

    @property
    def code(self) -> tuple[object, ...]: ...

    async def read_chunk(self, ctx: Any, span: str, headings: list[str], title: str, figures: dict[str, str],
                         previous: str, views: dict[str, str], picks: int, check: Any = None) -> dict[str, Any]: ...

    async def describe_figure(self, ctx: Any, png: bytes, nearby: str, name: str, title: str) -> str: ...

    async def summarise_source(self, ctx: Any, title: str, summaries: list[str], check: Any = None) -> str: ...

    async def abstract(self, ctx: Any, title: str, summaries: list[str], check: Any = None) -> str: ...

    async def write_section(self, ctx: Any, kind: str, about: str, title: str, facts: list[dict[str, Any]],
                            check: Any) -> list[dict[str, Any]]: ...

    async def write_spec(self, ctx: Any, name: str, statements: list[dict[str, Any]]) -> list[dict[str, Any]]: ...

    async def ground(self, ctx: Any, doubts: Sequence[Doubt]) -> list[int]: ...
