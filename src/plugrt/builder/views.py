"""Reshapes as views: a layer that only gives its input other dimensions shares its input's memory.

A ``Reshape``, ``Squeeze``, ``Unsqueeze``, ``Flatten`` or copy (``Identity``) writes its input's
elements in the same order (:meth:`~plugrt.nodes.base.Node.views_input`). When both tensors are the
engine's own activations (not its inputs, outputs or constants, linear, of known size) the memory
plan lays the result over the input (``BuildState.shares``; the two lifetimes merge in
``builder/memory.py``), and the executor skips the layer: a view costs no kernel and no memory.
Tensors a plugin writes in place keep their copies (``builder/in_place.py`` decided those first).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..core.types import TensorFormat
from ..engine.plan import LayerPlan, host_computed
from ..nodes.base import Node
from ..ops.base import create_operator, registered_operators
from .state import BuildState

__all__ = ["reshapes", "share_views"]


def share_views(state: BuildState) -> int:
    """Lay every eligible reshaping layer's output over its input (see the module's note); the count laid."""
    operators = registered_operators()
    written_in_place = set(state.shares) | set(state.shares.values())
    size_symbols = {sym for layer in state.layers for sym in layer.size_outputs.values()}
    laid = 0
    for layer in state.layers:
        if layer.is_plugin or len(layer.outputs) != 1 or not layer.inputs or layer.shape_inputs:
            continue
        if host_computed(layer, state.tensors, size_symbols):  # written on the host, never run: nothing to save
            continue
        source, target = layer.inputs[0], layer.outputs[0]
        if {source, target} & written_in_place or not _plain(state, source, size_symbols):
            continue
        if not _plain(state, target, size_symbols) or state.tensors[source].dtype != state.tensors[target].dtype:
            continue
        if not reshapes(layer, operators):
            continue
        state.shares[target] = source
        laid += 1
    return laid


def reshapes(layer: LayerPlan, operators: Mapping[str, type[Node]] | None = None) -> bool:
    """Whether standard layer ``layer`` writes its input's elements in the same order, only in other dimensions
    (:meth:`~plugrt.nodes.base.Node.views_input`; only a kind that can is made and asked)."""
    kind = (operators if operators is not None else registered_operators()).get(layer.kind)
    if layer.is_plugin or kind is None or kind.views_input is Node.views_input:
        return False
    return bool(create_operator(layer.kind, dict(layer.params), {}).views_input())


def _plain(state: BuildState, index: int, size_symbols: set[str]) -> bool:
    """An internal, linear tensor whose size does not depend on data."""
    tensor = state.tensors[index]
    if tensor.role != "internal" or tensor.format != TensorFormat.LINEAR:
        return False
    return not any(d.symbols() & size_symbols for d in tensor.shape)
