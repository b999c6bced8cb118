"""What the rules ask of a model, as a protocol every backend (kbuild's own or a plug-in's) meets."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..checks.grounding import Doubt


class Backend(Protocol):
    name: str
    label: str

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

    async def judge_disagreement(self, ctx: Any, first: str, second: str, attribute: str, values: str) -> bool: ...

