"""Elementwise chains: runs of elementwise layers where each result feeds only the next, as one operator.

A chain is two or more FLOAT or HALF layers among ``elementwise`` (SUM, SUB, PROD, DIV,
MAX, MIN, POW), ``unary`` (the float functions) and ``activation``, each reading the
previous one's result (its only reader, not an engine output) and, for binary layers, one
more operand whose shape broadcasts to the chain's without enlarging it (a constant, a
bias, the chain's own input, any tensor of that shape). It becomes one
``fused_elementwise`` layer (``ops/fused_elementwise.py``) that computes every step block
by block in the output's memory, bit-identical to the layers it replaces. Named
``"elementwise chain [<first> .. <last>, N layers]"``.

An inference batch normalization of FLOAT ``scale`` and ``shift`` weights (``x * scale + shift``, the same two
float32 operations) joins a chain as two steps by constants the fused layer holds (its weights ``c0``, ``c1``, ...
shaped ``[1, C, 1, ...]``): a normalization that no convolution before it takes in (DenseNet's after each
concatenation, a pre-activation block's) then runs with its activation in one pass instead of two layers.

GELU activations (``OWN_LAYER``) stay layers of their own: their layer has kernels the chain does
not (PyTorch's, chosen by timing at build), many times faster than the NumPy evaluation a chain
makes of them (one thread, over 512 x 3199 floats: 13.4 ms against 0.56), which outweighs the
memory pass a chain saves. (wav2vec2's feature extractor: group norm's ``Mul``/``Add`` then GELU.)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.types import DataType
from ...engine.plan import LayerPlan
from ...ops.fused_elementwise import BINARY_OPS, UNARY_OPS
from .graph import FLOAT_TYPES, Fusion, LayerGraph, folded_batch_norm

__all__ = ["OWN_LAYER", "elementwise_chain", "fused_name", "is_elementwise"]

#: activation types that never join a chain (see the module's note)
OWN_LAYER = frozenset({"GELU_ERF", "GELU_TANH"})


def is_elementwise(graph: LayerGraph, step: int) -> bool:
    """True for a float elementwise, unary or activation layer a chain (or a GELU region) may hold."""
    layer = graph.layers[step]
    if layer is None or not graph.fusable(step) or len(layer.outputs) != 1 or layer.weights:
        return False
    if graph.tensors[layer.outputs[0]].dtype not in FLOAT_TYPES:
        return False
    if any(graph.tensors[i].dtype != graph.tensors[layer.outputs[0]].dtype for i in layer.inputs):
        return False
    if layer.kind == "elementwise":
        return layer.params.get("op") in BINARY_OPS and len(layer.inputs) == 2
    if layer.kind == "unary":
        return layer.params.get("op") in UNARY_OPS and len(layer.inputs) == 1
    return layer.kind == "activation" and len(layer.inputs) == 1


def _chainable(graph: LayerGraph, step: int) -> bool:
    layer = graph.layers[step]
    if layer is not None and layer.kind == "activation" and layer.params.get("type") in OWN_LAYER:
        return False
    return is_elementwise(graph, step) or _scale_shift(graph, step)


def _scale_shift(graph: LayerGraph, step: int) -> bool:
    """True for a FLOAT inference batch normalization by weights over ``[N, C, ...]`` (see the module's note)."""
    layer = graph.layers[step]
    if layer is None or not graph.fusable(step) or not folded_batch_norm(layer):
        return False
    x, y = graph.tensors[layer.inputs[0]], graph.tensors[layer.outputs[0]]
    return x.dtype == y.dtype == DataType.FLOAT and len(x.shape) >= 2


def fused_name(what: str, graph: LayerGraph, steps: list[int]) -> str:
    """``"<what> [<first layer> .. <last layer>, N layers]"``, the name of a layer made of ``steps``."""
    ordered = sorted(steps)
    return f"{what} [{graph.layer(ordered[0]).name} .. {graph.layer(ordered[-1]).name}, {len(ordered)} layers]"


def _broadcasts_into(graph: LayerGraph, operand: int, full: int) -> bool:
    """True when ``operand``'s shape is ``full``'s with some dimensions 1 (same rank)."""
    a, b = graph.tensors[operand].shape, graph.tensors[full].shape
    return len(a) == len(b) and all(d == f or (d.is_constant() and d.get_constant_value() == 1) for d, f in zip(a, b))


def _steps(
    graph: LayerGraph, layer: LayerPlan, value: int, operands: list[int], constants: dict[str, str]
) -> list[dict[str, Any]]:
    """The fused operator's steps for ``layer`` reading the running ``value``; new operands join ``operands``, new
    constants (fused-layer weight name: graph weight key) ``constants``."""
    if layer.kind == "unary":
        return [{"unary": layer.params["op"]}]
    if layer.kind == "activation":
        return [
            {
                "activation": layer.params["type"],
                "alpha": float(layer.params.get("alpha", 0.0)),
                "beta": float(layer.params.get("beta", 0.0)),
            }
        ]
    if layer.kind == "batch_normalization":
        rank = len(graph.tensors[value].shape)
        steps = []
        for op, name in (("PROD", "scale"), ("SUM", "shift")):
            vector = np.asarray(graph.weights[layer.weights[name]], np.float32).reshape(-1)
            k = len(constants)
            constants[f"c{k}"] = graph.add_weight(
                f"{layer.name}/{name} [1, C, 1, ...]", vector.reshape((1, -1) + (1,) * (rank - 2))
            )
            steps.append({"binary": op, "left": -1, "right": -2 - k})
        return steps

    def ref(tensor: int) -> int:
        if tensor == value:
            return -1
        if tensor not in operands:
            operands.append(tensor)
        return operands.index(tensor)

    left, right = layer.inputs
    return [{"binary": layer.params["op"], "left": ref(left), "right": ref(right)}]


def _main_input(graph: LayerGraph, layer: LayerPlan) -> int | None:
    """The input a chain's first layer runs on: the one shaped like its output (a non-constant one first)."""
    candidates = [i for i in layer.inputs if graph.shape_equal(i, layer.outputs[0])]
    candidates.sort(key=lambda i: graph.tensors[i].role == "constant")
    return candidates[0] if candidates else None


def elementwise_chain(graph: LayerGraph, step: int) -> Fusion | None:
    """The longest chain starting at ``step`` (two layers or more), as one ``fused_elementwise`` layer."""
    if not _chainable(graph, step):
        return None
    first = graph.layer(step)
    x = _main_input(graph, first)
    if x is None:
        return None
    operands = [x]  # input 0 is the chain's input
    constants: dict[str, str] = {}
    value = x
    steps_taken: list[int] = []
    params: list[dict[str, Any]] = []
    current = step
    while True:
        layer = graph.layer(current)
        other = [i for i in layer.inputs if i != value]
        if any(not _broadcasts_into(graph, i, value) for i in other) or not graph.shape_equal(layer.outputs[0], value):
            break
        params.extend(_steps(graph, layer, value, operands, constants))
        steps_taken.append(current)
        value = layer.outputs[0]
        reader = graph.only_reader(value)
        if reader is None or not _chainable(graph, reader):
            break
        current = reader
    if len(steps_taken) < 2:
        return None
    fused = LayerPlan(
        fused_name("elementwise chain", graph, steps_taken),
        "fused_elementwise",
        operands,
        [value],
        params={"steps": params},
        weights=constants,
    )
    return Fusion(steps_taken, fused)
