"""Kbuildfile.py: a plain Python file that declares rules and says what to build."""
from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .application import Application, find_application
from .engine import Query, Rule

if TYPE_CHECKING:
    from .engine import Engine

FILENAME = "Kbuildfile.py"


class BuildfileError(Exception):
    pass


@dataclass
class Buildfile:
    path: Path
    rules: list[Rule]
    targets: Callable[[], Iterable[Query]]
    max_calls: int
    before_build: Callable[[], list[str]] | None  # work outside the graph (downloads); returns problems
    namespace: dict[str, Any]
    output_folder: str | None = None  # relative to the root: where every output lies (None: anywhere inside it)
    application: Application | None = None  # the knowledge base it defines (kb = knowledge_base(...)), if any
    harness_files: tuple[str, ...] = ()  # AGENTS.md, CLAUDE.md..., relative to the root: get the root index (kbuild.store.harness)
    split_lock: bool = False  # the lock as a file per project (kbuild.lock.d/), for stores too large for one file

    @property
    def root(self) -> Path:
        return self.path.parent

    def engine(self) -> Engine:
        from .engine import Engine  # asyncio and SQLite: not for the commands that only find the Kbuildfile

        return Engine(self.root, self.rules, max_calls=self.max_calls, output_folder=self.output_folder,
                      split_lock=self.split_lock, may_write=self._may_write())

    def _may_write(self) -> Callable[[str, str], bool] | None:
        """The application's rules write only its store's pages (a Kbuildfile's own rules write
        anywhere in the output folder)."""
        app = self.application
        if app is None:
            return None
        names, store = frozenset(r.name for r in app.rules), app.store
        return lambda rule, path: rule not in names or store.generated(path)

    def inputs_in_output_folder(self) -> set[str]:
        """Files inside the output folder that a person edits, relative to the root: the
        application's (every sources.yml of the default pipeline); the rest there is generated."""
        app = self.application
        return {app.store.sources_file(project) for project in app.projects()} if app is not None else set()

    @property
    def store(self) -> Path:
        """The folder of the pages: what `show` may print and where outputs may be written."""
        return self.root / self.output_folder if self.output_folder else self.root


def find(start: Path) -> Path:
    """The Kbuildfile.py in `start` or the nearest folder above it, as git finds .git."""
    for folder in [start, *start.parents]:
        candidate = folder / FILENAME
        if candidate.is_file():
            return candidate
    raise BuildfileError(f"no {FILENAME} in {start} or any folder above it; run `kbuild init` to write one")


def load(path: Path) -> Buildfile:
    """Run the Kbuildfile and collect what it declares.

    Every Rule it defines or imports at module level (alone or in a list) is known to the engine,
    so a recorded query can be verified without running its parent; `targets()` names what
    `kbuild` builds; an optional `before_build()` does work outside the graph first (fetching url
    sources) and returns a line per problem.
    """
    module = types.ModuleType("Kbuildfile")
    module.__file__ = str(path)
    sys.path.insert(0, str(path.parent))  # so the Kbuildfile can import modules beside it
    try:
        # compiled from its text, not imported: an import would cache its bytecode in
        # __pycache__ beside it, a write in the user's project, outside the store
        exec(compile(path.read_bytes(), str(path), "exec"), vars(module))
    except (Exception, SystemExit) as exc:  # a Kbuildfile that exits is a broken Kbuildfile too
        raise BuildfileError(f"{path} failed to run: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.path.remove(str(path.parent))
    namespace: dict[str, Any] = vars(module)
    targets = namespace.get("targets")
    if not callable(targets):
        raise BuildfileError(f"{path} must define `def targets():` returning the queries to build")
    rules: list[Rule] = []
    for value in namespace.values():
        candidates = value if isinstance(value, (list, tuple)) else [value]
        rules.extend(v for v in candidates if isinstance(v, Rule) and v not in rules)
    for rule in rules:  # a prompt that cannot be read fails every page of its rule: say so before building
        missing = next((p for p in rule.files if not Path(p).is_file()), None)
        if missing is not None:
            raise BuildfileError(f"rule {rule.name} names the prompt {missing}, which cannot be read; if it is "
                                 "kbuild's own, reinstall kbuild (pip install --force-reinstall kbuild), "
                                 "else fix the rule's files=")
    max_calls = namespace.get("max_calls", 4)
    if not isinstance(max_calls, int) or max_calls < 1:
        raise BuildfileError(f"{path}: max_calls must be a whole number of at least 1")
    before_build = namespace.get("before_build")
    if before_build is not None and not callable(before_build):
        raise BuildfileError(f"{path}: before_build must be a function")
    application = find_application(namespace)
    output_folder = namespace.get("output_folder")
    if output_folder is None and application is not None:  # the default pipeline's store (kb/)
        output_folder = application.store.root
    if output_folder is not None and (not isinstance(output_folder, str) or not _inside(output_folder)):
        raise BuildfileError(f"{path}: output_folder must be a folder inside the project, like \"out\"")
    harness_file = namespace.get("harness_file", ())
    harness_files = (harness_file,) if isinstance(harness_file, str) else harness_file
    if not isinstance(harness_files, (list, tuple)) or not all(isinstance(f, str) and _inside(f) for f in harness_files):
        raise BuildfileError(f"{path}: harness_file must be a file name inside the project, like \"AGENTS.md\", "
                             "or a list of them")
    split_lock = namespace.get("split_lock", False)
    if not isinstance(split_lock, bool):
        raise BuildfileError(f"{path}: split_lock must be True or False")
    return Buildfile(path.resolve(), rules, targets, max_calls, before_build, namespace, output_folder, application,
                     tuple(harness_files), split_lock)


def _inside(folder: str) -> bool:
    parts = Path(folder).parts
    return bool(parts) and not Path(folder).is_absolute() and ".." not in parts
