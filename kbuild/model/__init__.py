"""Model backends: what the rules ask of a model, and who answers.

A backend answers the questions of the rules: read a chunk (in one answer: its rewrite, its
summary, and the sentences each default view should say), summarise a source, write a project's
abstract, put a table or figure into words, write a section of a view on request (statements
citing facts) and a spec (requirements citing statements), and say which of the statements that
code could not clear their closest source sentences do not support (the grounding check). `params(task)` and the backend's `code` go into the fingerprint of the rule that asks, so
that switching backend or model, or changing the backend's code, makes exactly those pages stale.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # the checks import the offline backend: no import cycle at run time
    from ..checks.grounding import Doubt

from .offline import OfflineBackend
from .settings import ModelSettings, choose_backend


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


__all__ = ["Backend", "ModelSettings", "OfflineBackend", "choose_backend"]
