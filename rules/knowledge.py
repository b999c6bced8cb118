"""The knowledge base: kbuild's default pipeline, as an application on the engine.

sources -> raw copies -> text -> chunks -> facts and summaries -> indexes, views and specs. The
rules are the module-level functions of this package; `KnowledgeBase` configures them with one
set of settings and tells the command line what to build and where the store is.
"""
from __future__ import annotations

import json
import re
from collections.abc import Collection
from pathlib import Path

from kbuild.retrieval.embedding import SemanticSettings
from kbuild.engine import FOLDER, Query, Rule, atomic_write
from kbuild.store.localstate import LocalState
from kbuild.model import Backend
from kbuild.store.fetch import fetch_urls
from kbuild.store.layout import Store
from kbuild.store.sources import SourcesError, parse

from . import concepts, contradictions, facts, glossary, indexes, search_index, search_vectors, sources, specs, summaries, views
from .settings import KnowledgeSettings

URL_ENTRY = re.compile(r"^[\s-]*url\s*:", re.M)  # a source given by its address, in sources.yml
MODULES = (sources, facts, summaries, glossary, contradictions, concepts, views, specs, search_index, search_vectors,
           indexes)  # every rule of the pipeline is in one of these


def pipeline_rules() -> list[Rule]:
    """The pipeline's rules as the modules define them, in order."""
    return [value for module in MODULES for value in vars(module).values()
            if isinstance(value, Rule) and value.fn.__module__ == module.__name__]


class KnowledgeBase:
    """The default rule set over one store, with one backend answering its questions."""

    def __init__(self, root: Path, settings: KnowledgeSettings) -> None:
        self.root = root
        self.settings = settings
        self.rules: list[Rule] = [r.configured(settings) for r in pipeline_rules()]
        self._root_index = next(r for r in self.rules if r.name == indexes.root_index.name)
        self._disagreements = next(r for r in self.rules if r.name == contradictions.project_disagreements.name)

    def unbuilt(self, built: Collection[str]) -> list[tuple[str, str, str]]:
        """(page, why, what to do) for each problem of a sources.yml and each page it asks for
        that `built` (the ids of the queries built) has no query for."""
        found = []
        for project in self.projects():
            path = self.store.sources_file(project)
            try:
                listed = parse((self.root / path).read_bytes(), path)
            except (SourcesError, OSError) as exc:
                found.append((path, str(exc), f"fix {path}"))
                continue
            found += [(path, problem, f"fix {path}") for problem in listed.problems]
            found += [(self.store.source_index(project, s.id), f"not built: source {s.id} is listed in {path}", "kbuild")
                      for s in listed.sources if indexes.source_index(project, s.id).id not in built]
            found += [(self.store.view(project, v.name), f"not built: view {v.name} is requested in {path}", "kbuild")
                      for v in listed.views if views.view_page(project, v.name).id not in built]
            found += [(self.store.spec(project, s.name), f"not built: spec {s.name} is requested in {path}", "kbuild")
                      for s in listed.specs if specs.spec_page(project, s.name).id not in built]
        return found

    @property
    def grounded_rules(self) -> list[str]:
        """The rules whose pages carry a grounding verdict in the lock, which `kbuild check` requires."""
        return [facts.fact.name, views.view_page.name, specs.spec_page.name]

    @property
    def store(self) -> Store:
        return self.settings.store

    @property
    def backend(self) -> Backend:
        return self.settings.backend

    @property
    def semantic(self) -> SemanticSettings | None:
        """The embedder of semantic ranking, or None when search ranks by words only."""
        return self.settings.semantic

    def projects(self) -> list[str]:
        folder = self.root / self.store.root
        return sorted(p.parent.name for p in folder.glob("*/sources.yml"))

    def targets(self) -> list[Query]:
        projects = self.projects()  # each project's disagreements, which `kbuild check` reports
        return [self._root_index(*projects), *(self._disagreements(p) for p in projects)]

    def target_globs(self) -> list[str]:
        return [f"{self.store.root}/*/sources.yml"]  # what projects() lists

    def fetches(self) -> bool:
        """Whether a sources.yml lists a url: read as text, since parsing every sources.yml of a
        large store costs more than the rest of a build with nothing to do."""
        return any(URL_ENTRY.search(p.read_text(errors="replace"))
                   for p in (self.root / self.store.root).glob("*/sources.yml"))

    def before_build(self) -> list[str]:
        """Download url sources; a failure with no earlier copy is reported by the build itself
        (the raw rule reads why from the local state), one with a copy is a line here."""
        if not self.fetches():
            return []
        problems = fetch_urls(self.root, self.store)
        record = LocalState(self.root / FOLDER).fetch_problems
        record.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(record, json.dumps({f"{p}/{s}": why for (p, s), (_, why) in sorted(problems.items())}).encode())
        return [f"{project}/{source}: {url} {why}; kept the copy fetched before"
                for (project, source), (url, why) in problems.items()
                if (self.root / self.store.raw_dir(project, source)).is_dir()]
