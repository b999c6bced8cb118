"""The knowledge base's settings, and how they reach the graph.

Every rule of the pipeline is a module-level function that names the settings it reads
(`@rule(settings=...)`); `knowledge_base()` configures each with one `KnowledgeSettings`, and
the engine puts what decides each named setting into that rule's fingerprint. So a changed
setting makes exactly the queries that read it stale, and a rule cannot read a setting it did
not name (the engine refuses).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbuild.retrieval.embedding import SemanticSettings, embedder_for
from kbuild.engine import Context, Decisive, rule
from kbuild.model import Backend
from kbuild.store.layout import Store


class Task:
    """A setting that is one task the backend is asked: it reads as the backend's parameters for
    that task (model, temperature...), which with the task's prompt templates decide only the
    rules that ask it."""

    def __init__(self, task: str) -> None:
        self.task = task

    def __get__(self, settings: KnowledgeSettings, owner: type) -> dict[str, object]:
        return settings.backend.params(self.task)


@dataclass(frozen=True, eq=False)
class KnowledgeSettings:
    store: Store
    backend: Backend  # answers every task; decided by its name and code (its tasks' settings say the rest)
    floor_tokens: int  # the sizes a fact is cut to
    cap_tokens: int
    semantic: SemanticSettings | None = None  # rank by meaning too (off by default): the embedder of the sections

    figure = Task("figure")
    reading = Task("reading")
    grounding = Task("grounding")
    source_summary = Task("source summary")
    abstract = Task("abstract")
    view = Task("view")
    spec = Task("spec")
    disagreement = Task("disagreement")
    concept = Task("concept")

    @property
    def label(self) -> str:
        """How pages name who wrote their words ("written by gpt-4o-mini (model output, ...)")."""
        return self.backend.label

    def decided_by(self, name: str) -> Decisive:
        if name == "backend":
            return Decisive({"name": self.backend.name}, tuple(self.backend.code))
        if name in TASKS:
            task = TASKS[name]
            return Decisive(self.backend.params(task), files=tuple(Path(p) for p in self.backend.prompts(task)))
        if name == "semantic":  # what decides the vectors, never the key
            return Decisive(embedder_for(self.semantic).identity() if self.semantic else None)
        if name == "store":
            return Decisive(self.store.root)
        return Decisive(getattr(self, name))


# each task's setting by its name, as the rules declare them
TASKS = {name: value.task for name, value in vars(KnowledgeSettings).items() if isinstance(value, Task)}
KnowledgeContext = Context[KnowledgeSettings]  # a rule's context: `ctx.settings.NAME` read with its field's type


def model_rule(*tasks: str, settings: Iterable[str] = (), uses: Iterable[Any] = (), **options: Any) -> Callable[..., Any]:
    """A rule that asks the backend `tasks`: it reads the backend and those tasks' settings, and
    the meaning check's code decides its cutoff. One place declares it, so no model-backed rule
    can leave the backend's code or a task's prompts out of its fingerprint."""
    from kbuild.checks import meaning

    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise ValueError(f"unknown model tasks {unknown}; known: {', '.join(TASKS)}")
    return rule(settings=("backend", *tasks, *settings), uses=(meaning, *uses), **options)
