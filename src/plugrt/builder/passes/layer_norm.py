"""Layer normalization written out: mean, centre, variance, epsilon, square root, divide (, gamma, beta).

The pattern over the last axis ``a`` of ``x`` (every mean keeping the reduced axis)::

    m = ReduceMean(x, a)          d = x - m
    v = ReduceMean(d * d, a)      (the square a product of d by itself or Pow(d, 2))
    n = d / Sqrt(v + eps)         (or d * Reciprocal(Sqrt(v + eps)))
    y = n * gamma + beta          (optional; gamma and beta constants of N = x's last dimension)

becomes the ``normalization`` operator in ``layer`` mode (what ONNX ``LayerNormalization``
imports to), reading ``x``, gamma and beta; without gamma it gets a weight of ones, without
beta no bias. Every intermediate must be read only by the next step of the pattern. Named
``"LayerNorm [<first> .. <last>, N layers]"``. The operator sums squares in another order
than the layers do: results agree to about 1e-6 relative in FLOAT.
"""

from __future__ import annotations

import numpy as np

from ...core.types import nptype
from ...engine.plan import LayerPlan
from .chains import fused_name
from .graph import FLOAT_TYPES, Fusion, LayerGraph

__all__ = ["layer_norm", "residual_layer_norm"]


def _kind(graph: LayerGraph, step: int | None, kind: str, **params: object) -> LayerPlan | None:
    if step is None or not graph.fusable(step):
        return None
    layer = graph.layer(step)
    if layer.kind != kind or any(layer.params.get(k) != v for k, v in params.items()):
        return None
    return layer


def _other(layer: LayerPlan, tensor: int) -> int | None:
    """The input of a binary layer that is not ``tensor`` (None unless ``tensor`` is exactly one of them)."""
    if len(layer.inputs) != 2 or layer.inputs.count(tensor) != 1:
        return None
    return layer.inputs[1] if layer.inputs[0] == tensor else layer.inputs[0]


def _next(graph: LayerGraph, tensor: int) -> int | None:
    return graph.only_reader(tensor)


def _affine(graph: LayerGraph, step: int | None, value: int, op: str, width: int) -> tuple[int, int] | None:
    """(step, constant) where layer ``step`` is ``op(value, c)`` with ``c`` a constant of ``width`` values on the last axis."""
    layer = _kind(graph, step, "elementwise", op=op)
    if layer is None or step is None:
        return None
    c = _other(layer, value)
    if c is None:
        return None
    stored = graph.value(c)
    shape = graph.tensors[c].shape
    if stored is None or stored.size != width or len(shape) > len(graph.tensors[value].shape):
        return None
    if not all(d.is_constant() and d.get_constant_value() == 1 for d in shape[:-1]):
        return None
    return step, c


def layer_norm(graph: LayerGraph, step: int) -> Fusion | None:
    """The pattern starting at the ``ReduceMean`` at ``step``, as one ``normalization`` layer."""
    first = _kind(graph, step, "reduce", op="AVG", keep_dims=True)
    if first is None or len(first.inputs) != 1:
        return None
    x, mean = first.inputs[0], first.outputs[0]
    shape = graph.tensors[x].shape
    dtype = graph.tensors[x].dtype
    if not shape or dtype not in FLOAT_TYPES or first.params.get("axes") != 1 << (len(shape) - 1):
        return None
    if not shape[-1].is_constant():
        return None
    width = shape[-1].get_constant_value()
    steps = [step]
    centre = _kind(graph, _next(graph, mean), "elementwise", op="SUB")
    if centre is None or centre.inputs != [x, mean]:
        return None
    steps.append(graph.producer[centre.outputs[0]])
    d = centre.outputs[0]
    readers = sorted(graph.read_by(d))
    if len(readers) != 2 or not graph.private(d):
        return None
    square_step, divide_step = readers
    square = graph.layer(square_step)
    is_square = (square.kind == "elementwise" and square.params.get("op") == "PROD" and square.inputs == [d, d]) or (
        square.kind == "elementwise"
        and square.params.get("op") == "POW"
        and square.inputs[0] == d
        and graph.scalar(square.inputs[1]) == 2.0
    )
    if not is_square or not graph.fusable(square_step):
        return None
    steps.append(square_step)
    variance = _kind(
        graph, _next(graph, square.outputs[0]), "reduce", op="AVG", keep_dims=True, axes=first.params["axes"]
    )
    if variance is None:
        return None
    steps.append(graph.producer[variance.outputs[0]])
    add = _kind(graph, _next(graph, variance.outputs[0]), "elementwise", op="SUM")
    eps_tensor = None if add is None else _other(add, variance.outputs[0])
    epsilon = None if eps_tensor is None else graph.scalar(eps_tensor)
    if add is None or epsilon is None or epsilon < 0:
        return None
    steps.append(graph.producer[add.outputs[0]])
    root = _kind(graph, _next(graph, add.outputs[0]), "unary", op="SQRT")
    if root is None:
        return None
    steps.append(graph.producer[root.outputs[0]])
    divide = graph.layer(divide_step)
    if _kind(graph, divide_step, "elementwise", op="DIV") is not None and divide.inputs == [d, root.outputs[0]]:
        if graph.only_reader(root.outputs[0]) != divide_step:
            return None
    else:
        inverse = _kind(graph, _next(graph, root.outputs[0]), "unary", op="RECIP")
        if inverse is None or _kind(graph, divide_step, "elementwise", op="PROD") is None:
            return None
        if sorted(divide.inputs) != sorted([d, inverse.outputs[0]]) or d == inverse.outputs[0]:
            return None
        if graph.only_reader(inverse.outputs[0]) != divide_step:
            return None
        steps.append(graph.producer[inverse.outputs[0]])
    steps.append(divide_step)
    value = divide.outputs[0]
    inputs = [x]
    weights: dict[str, str] = {}
    scaled = _affine(graph, _next(graph, value), value, "PROD", width)
    if scaled is not None:
        steps.append(scaled[0])
        inputs.append(scaled[1])
        value = graph.layer(scaled[0]).outputs[0]
    shifted = _affine(graph, _next(graph, value), value, "SUM", width) if scaled is not None else None
    if shifted is not None:
        steps.append(shifted[0])
        inputs.append(shifted[1])
        value = graph.layer(shifted[0]).outputs[0]
    if not graph.shape_equal(value, x) or any(graph.tensors[i].dtype != dtype for i in inputs):
        return None
    if scaled is None:  # the operator needs a scale: ones
        weights["scale"] = graph.add_weight(f"{graph.layer(step).name}/layer_norm_scale", np.ones(width, nptype(dtype)))
    fused = LayerPlan(
        fused_name("LayerNorm", graph, steps),
        "normalization",
        inputs,
        [value],
        params={
            "mode": "layer",
            "epsilon": float(epsilon),
            "axis": len(shape) - 1,
            "has_bias": shifted is not None,
            "stash_outputs": 0,
        },
        weights=weights,
    )
    return Fusion(steps, fused)


def residual_layer_norm(graph: LayerGraph, step: int) -> Fusion | None:
    """``SUM(a, b)`` of two tensors of one shape, then a layer normalization of the sum at ``step``, as one
    ``normalization`` layer reading ``a`` and the residual ``b`` (a transformer's ``LayerNorm(x + r)``). Where
    something else reads the sum too (a pre-LN block's next residual, after the normalization), the fused layer
    also writes it (``keep_sum``)."""
    norm = _kind(graph, step, "normalization", mode="layer")
    if norm is None or norm.params.get("stash_outputs") or norm.params.get("residual"):
        return None
    total = norm.inputs[0]
    add_step = graph.producer.get(total)
    add = _kind(graph, add_step, "elementwise", op="SUM")
    if add is None or add_step is None or len(add.inputs) != 2 or total in norm.inputs[1:]:
        return None
    dtype = graph.tensors[total].dtype
    if dtype not in FLOAT_TYPES or any(
        graph.tensors[i].dtype != dtype or not graph.shape_equal(i, total) for i in add.inputs
    ):
        return None
    keep = graph.only_reader(total) != step
    layer = LayerPlan(
        f"{add.name} + {norm.name}",
        "normalization",
        [*add.inputs, *norm.inputs[1:]],
        [*norm.outputs, *([total] if keep else [])],
        params={**norm.params, "residual": True, "keep_sum": keep},
        weights=dict(norm.weights),
    )
    return Fusion([add_step, step], layer)
