"""Duplicate layers: a layer that computes what an earlier layer computes is removed (common subexpressions).

Two layers compute the same thing when they are standard layers of the same kind with equal parameters,
equal weights and the same input tensors, and their outputs are tensors of the same type, format and shape.
The later one goes; whoever read its outputs reads the earlier one's. Layers are visited in order and a
merge rewires the readers at once, so a repeated chain (exports recompute an attention mask, a position
range or a shape's arithmetic once per block: BERT's mask ``Where`` twelve times) collapses layer by layer.

Every kernel is deterministic, so the engine's results are bit-identical. Plugin layers (opaque, and may
keep state), control flow (subgraphs), layers that define data-dependent sizes and layers writing engine
inputs or outputs are never merged. Weights compare by content up to :data:`CONTENT_BYTES` each (larger
ones by their key in the plan: the same stored array), so the pass costs no pass over a model's weights.
The pass runs after the fusion rules (which look for patterns whose inner tensors only they read) and before
dead-layer removal.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable
from enum import Enum
from typing import Any

import numpy as np

from ...engine.plan import LayerPlan
from .graph import LayerGraph

__all__ = ["CONTENT_BYTES", "merge_duplicates"]

#: weights up to this size compare by content; larger ones by their key in the plan's weight table
CONTENT_BYTES = 1 << 16
#: kinds never merged: their parameters hold subgraphs run by sub-engines of their own
_NEVER = frozenset({"if", "loop", "scan"})


def merge_duplicates(graph: LayerGraph) -> list[str]:
    """Remove every layer that repeats an earlier one's computation; the removed layers' names, in order."""
    first: dict[Hashable, int] = {}
    merged: list[str] = []
    for step in graph.steps():
        layer = graph.layer(step)
        if layer.is_plugin or layer.size_outputs or layer.kind in _NEVER or not layer.outputs:
            continue
        if any(not graph.private(o) and graph.tensors[o].role != "constant" for o in layer.outputs):
            continue
        key = _signature(graph, layer)
        earlier = first.setdefault(key, step)
        if earlier == step:
            continue
        kept = graph.layer(earlier)
        if not all(_same_tensor(graph, a, b) for a, b in zip(kept.outputs, layer.outputs)):
            continue
        graph.remove(step)
        for mine, theirs in zip(layer.outputs, kept.outputs):
            graph.redirect(mine, theirs)
        merged.append(layer.name)
    return merged


def _signature(graph: LayerGraph, layer: LayerPlan) -> Hashable:
    weights = tuple(sorted((name, _weight_key(graph, key)) for name, key in layer.weights.items()))
    return (
        layer.kind,
        _frozen(layer.params),
        weights,
        tuple(layer.inputs),
        tuple(layer.shape_inputs),
        len(layer.outputs),
        layer.workspace,
    )


def _weight_key(graph: LayerGraph, key: str) -> Hashable:
    value = graph.weights.get(key)
    if value is None or value.nbytes > CONTENT_BYTES:
        return ("key", key)
    array = np.ascontiguousarray(value)
    return ("value", array.dtype.str, array.shape, hashlib.sha1(array.tobytes()).hexdigest())


def _frozen(value: Any) -> Hashable:
    """A hashable stand-in for a parameter value that is equal exactly when the values are."""
    if isinstance(value, dict):
        return ("dict", tuple(sorted((str(k), _frozen(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_frozen(v) for v in value))
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (np.generic, float)):
        return ("scalar", type(value).__name__, np.asarray(value).tobytes())  # NaN equals NaN, -0.0 is not 0.0
    if isinstance(value, Enum) or value is None or isinstance(value, (bool, int, str, bytes)):
        return (type(value).__name__, value)
    return ("object", id(value))  # equal only to itself: an unknown value never makes two layers alike


def _same_tensor(graph: LayerGraph, a: int, b: int) -> bool:
    """True when tensors ``a`` and ``b`` have one type, format and shape (and shape-tensor values)."""
    ta, tb = graph.tensors[a], graph.tensors[b]
    if ta.dtype != tb.dtype or ta.format != tb.format or ta.role != tb.role or not graph.shape_equal(a, b):
        return False
    if (ta.values is None) != (tb.values is None):
        return False
    return ta.values is None or list(ta.values) == list(tb.values or [])
