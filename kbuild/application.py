"""What the command line needs of an application built on the engine (the knowledge base).

A Kbuildfile may define one object that satisfies `Application` (the default pipeline's
`kb = knowledge_base(...)` does); `kbuild add`, `search`, `context`, `check`, `doctor` and `watch`
reach the store, its projects and the model through it. A Kbuildfile with rules only has none,
and those commands say so or fall back to the Kbuildfile alone.
"""
from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # annotations only: finding the application must not import the model's clients
    from .engine import Query, Rule
    from .model import Backend
    from .store.layout import Store


@runtime_checkable
class Application(Protocol):
    root: Path  # the build root, where the Kbuildfile is
    store: Store  # paths in the store; `store.root` is its folder, relative to `root`
    backend: Backend  # what answers the model's questions; `doctor` asks whether it is reachable
    rules: list[Rule]

    def projects(self) -> list[str]: ...

    def targets(self) -> list[Query]: ...

    def before_build(self) -> list[str]: ...  # work outside the graph (downloads); a line per problem

    def target_globs(self) -> list[str]: ...  # globs, relative to `root`, whose matches decide targets()

    def fetches(self) -> bool: ...  # whether before_build has work to do (then no build is skipped unseen)

    @property
    def grounded_rules(self) -> list[str]: ...  # rules whose pages must carry a passing grounding verdict

    def unbuilt(self, built: Collection[str]) -> list[tuple[str, str, str]]: ...  # (page, why, fix) of what is asked, not built


def find_application(namespace: Mapping[str, object]) -> Application | None:
    """The application a Kbuildfile defines at module level, if any (the first, in file order)."""
    return next((value for value in namespace.values() if isinstance(value, Application)), None)

