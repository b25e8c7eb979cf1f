"""Outer-scope names of ONNX subgraphs (the bodies of Loop, Scan and the branches of If).

A subgraph may read any name visible where its node sits without listing it as
an input. These helpers find those names (so that the node depends on their
producers and the importer can pass them in) and rename them (when a function
body holding the node is expanded under a prefix).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from onnx import AttributeProto, GraphProto, NodeProto

__all__ = ["free_names", "node_free_names", "rename_free_names", "subgraphs"]


def subgraphs(node: NodeProto) -> Iterator[GraphProto]:
    """The graphs held in ``node``'s attributes."""
    for attribute in node.attribute:
        if attribute.type == AttributeProto.GRAPH:
            yield attribute.g
        elif attribute.type == AttributeProto.GRAPHS:
            yield from attribute.graphs


def free_names(graph: GraphProto) -> list[str]:
    """Names ``graph`` (or a subgraph inside it) reads without defining them, in first-use order."""
    defined = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    defined |= {t.values.name for t in graph.sparse_initializer}
    found: dict[str, None] = {}
    for node in graph.node:
        for name in [*node.input, *node_free_names(node)]:
            if name and name not in defined:
                found.setdefault(name, None)
        defined.update(n for n in node.output if n)
    for value in graph.output:
        if value.name not in defined:
            found.setdefault(value.name, None)
    return list(found)


def node_free_names(node: NodeProto) -> list[str]:
    """The outer-scope names the subgraphs of ``node`` read (its implicit inputs)."""
    found: dict[str, None] = {}
    for graph in subgraphs(node):
        for name in free_names(graph):
            found.setdefault(name, None)
    return list(found)


def rename_free_names(node: NodeProto, rename: Callable[[str], str]) -> None:
    """Rename, in place, the outer-scope names read by the subgraphs of ``node``."""
    for graph in subgraphs(node):
        _rename_in_graph(graph, rename)


def _rename_in_graph(graph: GraphProto, rename: Callable[[str], str]) -> None:
    outer = set(free_names(graph))
    if not outer:
        return
    mapping = {name: rename(name) for name in outer}

    def inner(name: str) -> str:
        return mapping.get(name, name)

    for node in graph.node:
        node.input[:] = [inner(n) if n else n for n in node.input]
        rename_free_names(node, lambda n: mapping.get(n, n))
    for value in graph.output:
        value.name = inner(value.name)

