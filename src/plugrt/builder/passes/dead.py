"""Dead-layer removal: standard layers whose results nobody reads (left over after fusion).

The network walk (``builder/graph.py``) already builds only the layers the outputs depend
on; fusion then leaves constants and other producers whose only reader was fused into a
layer that no longer reads them (GELU's 0.5 and 1.4142, a pattern's epsilon). They are
removed, last first, so a chain of them goes at once; their weights leave the plan. Plugin
layers and layers that define data-dependent sizes stay.
"""

from __future__ import annotations

from .graph import LayerGraph

__all__ = ["remove_dead_layers"]


def remove_dead_layers(graph: LayerGraph) -> list[str]:
    """Remove every dead standard layer; their names, in the order removed."""
    io = set(graph.io)
    removed = []
    for step in reversed(graph.steps()):
        layer = graph.layer(step)
        if layer.is_plugin or layer.size_outputs:
            continue
        if any(o in io or graph.read_by(o) for o in layer.outputs):
            continue
        removed.append(layer.name)
        graph.remove(step)
    return removed
