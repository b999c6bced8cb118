"""The layout is the architecture (docs/architecture.md): kbuild's import graph has no circle, the
engine and the text library import nothing of kbuild outside themselves, and each part imports
only the parts the document allows it. The graph is read from the source (ast), with every
import: at a module's top, inside a function, and under TYPE_CHECKING."""
from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import networkx as nx

REPO = Path(__file__).resolve().parents[1]

# kbuild/'s top: the shell's own modules; every other part is a package.
TOP = {"__init__", "__main__", "entry", "buildfile", "application", "plugins"}


def allowed_arrows() -> dict[str, set[str]]:
    """The parts each part may import, from the block of docs/architecture.md that draws them (a
    part is a package under kbuild/, or a module at its top; "kbuild" is the top package). Within
    a part anything goes, as long as it makes no circle."""
    text = (REPO / "docs/architecture.md").read_text().split("## The arrows", 1)[1]
    block = text.split("```", 2)[1]
    arrows = {}
    for line in block.strip().splitlines():
        name, _, targets = line.partition("->")
        arrows[name.strip()] = {t.strip() for t in targets.split(",") if t.strip()}
    return arrows


def module_files(root: Path) -> dict[str, Path]:
    """Module name -> file, for kbuild/ and for rules/, which installs as kbuild.rules."""
    found = {}
    for top, package in (("kbuild", ["kbuild"]), ("rules", ["kbuild", "rules"])):
        for path in (root / top).rglob("*.py"):
            parts = package + list(path.relative_to(root / top).with_suffix("").parts)
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def import_graph(root: Path) -> nx.DiGraph:
    """An edge for each module a module imports, wherever the import stands in it. `from P import
    name` is an edge to P.name when that is a module, else to P."""
    modules = module_files(root)
    graph = nx.DiGraph()
    for name, path in modules.items():
        graph.add_node(name)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                submodules = [f"{source}.{alias.name}" for alias in node.names if f"{source}.{alias.name}" in modules]
                targets = submodules + ([source] if len(submodules) < len(node.names) else [])
            else:
                continue
            for target in targets:
                while target and target not in modules:  # `import kbuild.a.b` of a name inside a module
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph.add_edge(name, target)
    return graph


def part(module: str) -> str:
    """The part a module belongs to: a package under kbuild/, or a module at its top."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "kbuild"


def circles(graph: nx.DiGraph) -> list[set[str]]:
    return [c for c in nx.strongly_connected_components(graph) if len(c) > 1]


def test_kbuild_has_no_import_circle() -> None:
    found = [sorted(c) for c in circles(import_graph(REPO))]
    assert not found, f"import circles (break each: hand a value in, or move what both need below both): {found}"


def test_the_engine_imports_nothing_of_kbuild_outside_it() -> None:
    graph = import_graph(REPO)
    outside = sorted((a, b) for a, b in graph.edges if part(a) == "engine" and part(b) != "engine")
    assert not outside, f"the engine speaks only of queries, revisions, files and dependencies: {outside}"


def test_the_text_library_imports_nothing_of_kbuild_outside_it() -> None:
    graph = import_graph(REPO)
    outside = sorted((a, b) for a, b in graph.edges if part(a) == "text" and part(b) != "text")
    assert not outside, f"kbuild.text reads text for every part, so it depends on none: {outside}"


def test_each_part_imports_only_the_parts_docs_architecture_allows() -> None:
    graph, allowed = import_graph(REPO), allowed_arrows()
    parts = {part(m) for m in graph}
    assert parts <= allowed.keys(), f"parts docs/architecture.md does not place: {sorted(parts - allowed.keys())}"
    wrong = sorted((a, b) for a, b in graph.edges if part(a) != part(b) and part(b) not in allowed[part(a)])
    assert not wrong, f"imports against the arrows of docs/architecture.md (move the code, or change the doc): {wrong}"


def test_kbuilds_top_holds_only_the_shell_and_the_wheel_lists_every_package() -> None:
    top = {p.stem for p in (REPO / "kbuild").glob("*.py")}
    assert top == TOP, f"a module at kbuild/'s top belongs in a part's package: {sorted(top - TOP)}"
    packages = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "kbuild").rglob("__init__.py")}
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    assert packages | {"kbuild.rules"} == listed, "pyproject.toml's [tool.setuptools] packages must list each package"


def test_the_graph_sees_imports_inside_functions_and_for_type_checking(tmp_path: Path) -> None:
    """The checks above would pass on any tree if the graph missed the imports that make circles."""
    package = tmp_path / "kbuild" / "part"
    package.mkdir(parents=True)
    (tmp_path / "kbuild" / "__init__.py").write_text("")
    (tmp_path / "rules").mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from . import b\n    return b\n")
    (package / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .c import C\n")
    (package / "c.py").write_text("from kbuild.part.a import f\nC = int\n")
    (tmp_path / "rules" / "r.py").write_text("from kbuild.part import a\n")
    graph = import_graph(tmp_path)
    assert circles(graph) == [{"kbuild.part.a", "kbuild.part.b", "kbuild.part.c"}]
    assert graph.has_edge("kbuild.rules.r", "kbuild.part.a")
