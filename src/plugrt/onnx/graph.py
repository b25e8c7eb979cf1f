"""Graph checks before import: producers of every node input, one producer per name, no cycles.

Nodes are imported in topological order (ONNX requires it, but models in the
wild are not always sorted); the original order is kept where it is valid.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import PlugrtError
from .scopes import node_free_names

__all__ = ["GraphError", "NodeOrder", "Problem", "sorted_nodes"]


class GraphError(PlugrtError, ValueError):
    """The ONNX graph is malformed (a missing producer, a cycle, a bad input ...)."""


@dataclass(frozen=True)
class Problem:
    """One malformed spot of the graph, about node ``index``."""

    index: int
    node: Any
    message: str


@dataclass
class NodeOrder:
    """Indices of the importable nodes in a valid order, and the problems found."""

    indices: list[int] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def sorted_nodes(graph: Any, available: set[str]) -> NodeOrder:
    """Topological order of ``graph.node``; ``available`` names are graph inputs and initializers.

    Nodes whose inputs are never produced, that produce an already produced
    name, or that sit on a cycle are reported and left out with everything
    downstream of them.
    """
    nodes = list(graph.node)
    order = NodeOrder()
    producer: dict[str, int] = {}
    bad: set[int] = set()
    for index, node in enumerate(nodes):
        for name in node.output:
            if not name:
                continue
            if name in producer or name in available:
                first = f"node {producer[name]}" if name in producer else "a graph input or initializer"
                order.problems.append(
                    Problem(
                        index, node, f"output {name!r} is already produced by {first}; ONNX names are assigned once"
                    )
                )
                bad.add(index)
            else:
                producer[name] = index
    waiting: dict[int, int] = {}
    consumers: dict[int, list[int]] = {}
    for index, node in enumerate(nodes):
        if index in bad:
            continue
        needs = set()
        for name in [*node.input, *node_free_names(node)]:
            if not name or name in available:
                continue
            if name not in producer:
                order.problems.append(
                    Problem(index, node, f"input {name!r} is not produced by any node, graph input or initializer")
                )
                bad.add(index)
                break
            needs.add(producer[name])
        if index in bad:
            continue
        waiting[index] = len(needs)
        for source in needs:
            consumers.setdefault(source, []).append(index)
    ready = [i for i, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    done: set[int] = set()
    while ready:
        index = heapq.heappop(ready)
        order.indices.append(index)
        done.add(index)
        for consumer in consumers.get(index, []):
            if consumer in waiting:
                waiting[consumer] -= 1
                if waiting[consumer] == 0:
                    heapq.heappush(ready, consumer)
    stuck = [i for i in waiting if i not in done and waiting[i] > 0]
    on_cycle = _cycle_members(stuck, nodes, producer, bad)
    for index in stuck:
        if index in on_cycle:
            names = ", ".join(f"{i} ({nodes[i].op_type} {nodes[i].name!r})" for i in sorted(on_cycle)[:8])
            order.problems.append(Problem(index, nodes[index], f"the graph has a cycle through nodes {names}"))
    return order


def _cycle_members(stuck: list[int], nodes: list[Any], producer: dict[str, int], bad: set[int]) -> set[int]:
    """Stuck nodes that lie on a cycle (the rest only wait for them or for a bad node)."""
    members: set[int] = set()
    stuck_set = set(stuck)
    edges = {i: {producer[n] for n in nodes[i].input if n in producer and producer[n] in stuck_set} for i in stuck}
    for start in stuck:
        seen: set[int] = set()
        frontier = list(edges[start])
        while frontier:
            current = frontier.pop()
            if current == start:
                members.add(start)
                break
            if current in seen:
                continue
            seen.add(current)
            frontier.extend(edges.get(current, ()))
    return members
