"""Model backends: what the rules ask of a model, and who answers.

A backend answers the questions of the rules: rewrite a chunk, summarise a chunk, summarise a
source, write a project's abstract, put a table or figure into words, write a section of a view
(statements citing facts) and a spec (requirements citing statements), and say which statements
of a page its sources do not support (the grounding check). `params(task)` and the backend's `code` go into the fingerprint of the rule that asks, so
that switching backend or model, or changing the backend's code, makes exactly those pages stale.
"""
from __future__ import annotations

from typing import Any, Protocol

from .offline import OfflineBackend
from .settings import ModelSettings, choose_backend


class Backend(Protocol):
    name: str
    label: str

    def params(self, task: str) -> dict[str, object]: ...

    def prompts(self, task: str) -> list[Any]: ...

    @property
    def code(self) -> tuple[object, ...]: ...

    async def rewrite(self, ctx: Any, span: str, headings: list[str], title: str,
                      figures: dict[str, str], previous: str, check: Any = None) -> str: ...

    async def summarise_chunk(self, ctx: Any, span: str, headings: list[str], previous: str) -> str: ...

    async def describe_figure(self, ctx: Any, png: bytes, nearby: str, name: str, title: str) -> str: ...

    async def summarise_source(self, ctx: Any, title: str, summaries: list[str]) -> str: ...

    async def abstract(self, ctx: Any, title: str, summaries: list[str]) -> str: ...

    async def write_section(self, ctx: Any, kind: str, about: str, title: str, facts: list[dict[str, Any]],
                            check: Any) -> list[dict[str, Any]]: ...

    async def write_spec(self, ctx: Any, name: str, statements: list[dict[str, Any]]) -> list[dict[str, Any]]: ...

    async def ground(self, ctx: Any, page: str, sources: list[str]) -> list[str]: ...


__all__ = ["Backend", "ModelSettings", "OfflineBackend", "choose_backend"]
