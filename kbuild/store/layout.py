"""Paths in the store (README.md, "The store"). Topic first: kb/<project>/<what>/<source>/<page>.

Every path is computed here from validated ids, never taken from a model or a document.
"""
from __future__ import annotations

import re
from posixpath import join, relpath

ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,79}$")


class BadId(ValueError):
    pass


def check_id(kind: str, value: str) -> str:
    if not ID.match(value) or ".." in value:
        raise BadId(
            f"{kind} id {value!r} must be 1-80 lowercase letters, digits, '.', '_' or '-', "
            "starting with a letter or digit (and no '..')"
        )
    return value


class Store:
    """Relative paths (to the build root) of everything in one store."""

    def __init__(self, root: str = "kb") -> None:
        self.root = root.strip("/")

    def __repr__(self) -> str:
        return f"Store({self.root!r})"

    def index(self) -> str:
        return join(self.root, "index.md")

    def project(self, project: str) -> str:
        return join(self.root, project)

    def project_index(self, project: str) -> str:
        return join(self.root, project, "index.md")

    def sources_file(self, project: str) -> str:
        return join(self.root, project, "sources.yml")

    def notes_dir(self, project: str) -> str:
        """Notes learned while working (kbuild learn): sources written through a delta, not by a build."""
        return join(self.root, project, "notes")

    def note(self, project: str, note: str) -> str:
        return join(self.notes_dir(project), f"{note}.md")

    def tombstones(self, project: str) -> str:
        return join(self.notes_dir(project), "tombstones.yml")

    def raw_index(self, project: str) -> str:
        return join(self.root, project, "raw", "index.md")

    def raw_dir(self, project: str, source: str) -> str:
        return join(self.root, project, "raw", source)

    def original(self, project: str, source: str, ext: str) -> str:
        return join(self.raw_dir(project, source), f"original{ext}")

    def meta(self, project: str, source: str) -> str:
        return join(self.raw_dir(project, source), "meta.yml")

    def facts_index(self, project: str) -> str:
        return join(self.root, project, "facts", "index.md")

    def facts_dir(self, project: str, source: str) -> str:
        return join(self.root, project, "facts", source)

    def source_index(self, project: str, source: str) -> str:
        return join(self.facts_dir(project, source), "index.md")

    def text(self, project: str, source: str) -> str:
        return join(self.facts_dir(project, source), "text.md")

    def pages_index(self, project: str, source: str) -> str:
        return join(self.facts_dir(project, source), "pages", "index.md")

    def figures_index(self, project: str, source: str) -> str:
        return join(self.facts_dir(project, source), "figures", "index.md")

    def source_part_index(self, project: str, source: str, part: str) -> str:
        """The index of one group of facts of a source too long for one index."""
        return join(self.facts_dir(project, source), f"index-{part}.md")

    def views_index(self, project: str) -> str:
        return join(self.root, project, "artifacts", "views", "index.md")

    def view(self, project: str, view: str) -> str:
        return join(self.root, project, "artifacts", "views", f"{view}.md")

    def specs_index(self, project: str) -> str:
        return join(self.root, project, "artifacts", "specs", "index.md")

    def spec(self, project: str, spec: str) -> str:
        return join(self.root, project, "artifacts", "specs", f"{spec}.md")

    def page_image(self, project: str, source: str, page: int) -> str:
        return join(self.facts_dir(project, source), "pages", f"p-{page:03d}.png")

    def figure(self, project: str, source: str, name: str, ext: str) -> str:
        return join(self.facts_dir(project, source), "figures", f"{name}{ext}")

    def fact(self, project: str, source: str, slug: str) -> str:
        return join(self.facts_dir(project, source), f"{slug}.md")

    def artifacts_index(self, project: str) -> str:
        return join(self.root, project, "artifacts", "index.md")

    def glossary(self, project: str) -> str:
        return join(self.root, project, "glossary.md")

    def glossary_data(self, project: str) -> str:
        """What search and context read of the glossary (kbuild.retrieval.expansion)."""
        return join(self.root, project, "glossary.json")

    def concepts_index(self, project: str) -> str:
        return join(self.root, project, "concepts", "index.md")

    def concept(self, project: str, concept: str) -> str:
        return join(self.root, project, "concepts", f"{concept}.md")

    GENERATED = ("raw", "facts", "artifacts", "search-index", "concepts")  # the folders of a project the build writes
    GENERATED_FILES = ("index.md", "glossary.md", "glossary.json")  # ... and its files

    def generated(self, path: str) -> bool:
        """Whether `path` (relative to the root) is a page the build writes: the store's index, a
        project's index and glossary, or a file in a project's raw/, facts/, artifacts/, search-index/ or concepts/. The rest
        of the store (sources.yml, notes/, what a person put there) no rule writes."""
        parts = path.split("/")
        store = self.root.split("/") if self.root else []
        if parts[:len(store)] != store:
            return False
        inside = parts[len(store):]
        return inside == ["index.md"] or len(inside) == 2 and inside[1] in self.GENERATED_FILES \
            or len(inside) > 2 and inside[1] in self.GENERATED


def link(from_page: str, to: str) -> str:
    """A relative Markdown link target from one store page to another path: what
    posixpath.relpath gives. Store paths are plain relative paths, whose parts are compared as
    they stand, where relpath makes both absolute first (a view page of 2,000 facts has 2,400
    links). Any other path goes to relpath itself."""
    start = from_page.rsplit("/", 1)[0] if "/" in from_page else "."
    to_parts, start_parts = to.split("/"), [] if start == "." else start.split("/")
    if to.startswith("/") or start.startswith("/") or not _PLAIN.isdisjoint(to_parts) \
            or not _PLAIN.isdisjoint(start_parts):
        return relpath(to, start=start)
    common = 0
    for a, b in zip(to_parts, start_parts):
        if a != b:
            break
        common += 1
    return "/".join([".."] * (len(start_parts) - common) + to_parts[common:]) or "."


_PLAIN = frozenset(("", ".", ".."))  # a path with one of these parts is not plain
