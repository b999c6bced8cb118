"""The recorded graph as a networkx DiGraph: edges point from a query to what it read."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .state import FileRead, Memo, flat

if TYPE_CHECKING:
    import networkx as nx


def to_graph(memos: dict[str, Memo], files: bool = True) -> nx.DiGraph:
    import networkx as nx  # 0.4 s to import: only `kbuild graph` and `explain` pay it, not every build

    graph = nx.DiGraph()
    for qid, memo in memos.items():
        graph.add_node(qid, kind="query", rule=memo.rule, outputs=sorted(memo.outputs))
        for dep, _ in flat(memo.deps):
            if isinstance(dep, FileRead):
                if files:
                    graph.add_node(dep, kind="file")
                    graph.add_edge(qid, dep)
            else:
                graph.add_edge(qid, dep)
    return graph
