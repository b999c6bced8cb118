"""The recorded dependency graph as text: Graphviz dot, Mermaid or JSON (`kbuild graph`)."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import networkx as nx

Format = Literal["dot", "mermaid", "json"]
FORMATS: tuple[Format, ...] = ("dot", "mermaid", "json")


def around(graph: nx.DiGraph, node: str) -> nx.DiGraph:
    """`node` with what it is built on and what is built on it, directly or not."""
    import networkx as nx

    return graph.subgraph({node} | nx.descendants(graph, node) | nx.ancestors(graph, node)).copy()


def render(graph: nx.DiGraph, fmt: Format) -> str:
    """Nodes and edges sorted, so the same graph always prints the same text."""
    nodes = sorted(graph.nodes)
    edges = sorted(graph.edges)
    if fmt == "json":
        return json.dumps({"nodes": [{"id": n, **graph.nodes[n]} for n in nodes],
                           "edges": [list(e) for e in edges]}, indent=1, sort_keys=True)
    if fmt == "mermaid":
        ids = {n: f"n{i}" for i, n in enumerate(nodes)}  # Mermaid ids cannot hold a path's characters
        lines = ["graph LR"]
        lines += [f'  {ids[n]}["{n.replace(chr(34), "#quot;")}"]' for n in nodes]
        lines += [f"  {ids[a]} --> {ids[b]}" for a, b in edges]
        return "\n".join(lines)
    lines = ["digraph kbuild {", "  rankdir=LR;"]
    for n in nodes:
        shape = "note" if graph.nodes[n].get("kind") == "file" else "box"
        lines.append(f"  {json.dumps(n)} [shape={shape}];")
    lines += [f"  {json.dumps(a)} -> {json.dumps(b)};" for a, b in edges]
    lines.append("}")
    return "\n".join(lines)
