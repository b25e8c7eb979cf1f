"""Affine maps after a convolution or a batch normalization: per-channel ones folded into the convolution's
kernel and bias or the normalization's scale and shift, scalar ones after a convolution's activation into its
epilogue.

Exporters that do not fold batch normalization themselves (PaddlePaddle's: PP-OCR's
``Conv → Mul(scale) → Add(shift)``, or a bias ``Add`` after a bias-less ``Conv``) leave an
elementwise layer per map after the convolution; Caffe2's DenseNet-121 follows each batch normalization with
``Mul(w) → Add(b)``. When the convolution's kernel and bias are weights, it computes no activation yet (or the
normalization is an inference one of ``scale`` and ``shift`` weights), it is FLOAT, its result is read by that
layer alone, and the other operand is a constant that is one value per output map (shape
``[1, M, 1, ...]``, ``[M, 1, ...]`` or one element), the layer is folded into a copy of the
convolution (of the normalization: ``scale`` as the kernel, ``shift`` as the bias):

=======================  ===============================  ============================
layer                    kernel                           bias
=======================  ===============================  ============================
``PROD(conv, c)``        ``kernel * c``                   ``bias * c``
``DIV(conv, c)``         ``kernel / c``                   ``bias / c``
``SUM(conv, c)``         --                               ``bias + c``
``SUB(conv, c)``         --                               ``bias - c``
``SUB(c, conv)``         ``-kernel``                      ``c - bias``
=======================  ===============================  ============================

(either operand order for PROD and SUM). The rule anchors at the elementwise layer, so a
``Mul`` then an ``Add`` fold one after the other. Results differ from the unfused layers
by the rounding of the scaled kernel: a few float32 ulp of each product (the tests hold
them to 1e-5 of the output's scale). The folded layer is named ``"<conv> + <layer>"`` (``"<norm> + <layer>"``).

**After the activation** (``conv_scale_shift``): a convolution that applies an activation
(``conv_activation``) and is read alone by an elementwise ``PROD``/``DIV``/``SUM``/``SUB`` with
a one-element FLOAT constant takes it as the scalar affine map ``y * scale + shift`` at the end
of its epilogue (``post_scale``, ``post_shift``; a ``Mul`` then an ``Add`` fold one after the
other): PP-OCR's learnable affine after each hard-swish (``y * a + b``, 24-28 per model), which
otherwise stays a two-layer chain between the convolutions. For a ``Mul`` then an ``Add`` the
NumPy kernel computes the float32 operations of the unfused layers (a multiply, then an add;
other orders fold their constants in float64 first); PyTorch's computes ``shift + scale * y``
in one pass (a fused multiply-add may round once: within 1 ulp).
"""

from __future__ import annotations

import numpy as np

from ...core.types import DataType
from ...engine.plan import LayerPlan
from .graph import Fusion, LayerGraph, folded_batch_norm

__all__ = ["conv_affine", "conv_scale_shift"]

_FOLDABLE = ("PROD", "DIV", "SUM", "SUB")


def _per_map(value: np.ndarray, rank: int, maps: int) -> np.ndarray | None:
    """``value`` as ``[maps]`` float64 when it holds one value per output map (or one value), else None."""
    if value.ndim > rank or value.dtype.kind != "f":
        return None
    shape = (1,) * (rank - value.ndim) + value.shape
    if any(d != 1 for k, d in enumerate(shape) if k != 1) or shape[1] not in (1, maps):
        return None
    return np.broadcast_to(value.astype(np.float64).reshape(-1), (maps,))


def _affine_producer(graph: LayerGraph, tensor: int, reader: int) -> int | None:
    """The step of a layer writing ``tensor``, read by ``reader`` alone, whose per-map multiplier and offset are
    weights a fold can replace: a FLOAT convolution (kernel and bias weights, no activation yet) or a folded batch
    normalization (``scale`` and ``shift``); else None."""
    step = graph.producer.get(tensor)
    if step is None or graph.only_reader(tensor) != reader or not graph.fusable(step):
        return None
    if graph.tensors[tensor].dtype != DataType.FLOAT:
        return None
    layer = graph.layer(step)
    if folded_batch_norm(layer):
        return step
    if layer.kind != "convolution" or layer.params.get("activation") or len(layer.inputs) != 1:
        return None
    if "kernel" not in layer.weights or (layer.params.get("has_bias") and "bias" not in layer.weights):
        return None
    return step if len(layer.outputs) == 1 else None


def _foldable(graph: LayerGraph, step: int) -> LayerPlan | None:
    """The layer at ``step`` when it is a FLOAT two-input elementwise layer a convolution may take in, else None."""
    layer = graph.layer(step)
    if layer.kind != "elementwise" or layer.params.get("op") not in _FOLDABLE or len(layer.inputs) != 2:
        return None
    if not graph.fusable(step) or layer.weights or graph.tensors[layer.outputs[0]].dtype != DataType.FLOAT:
        return None
    return layer


def _folded(
    op: str, position: int, multiplier: np.ndarray, offset: np.ndarray, c: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The multiplier (``[maps, ...]``) and offset (``[maps]``) of ``op`` applied to the layer's result as operand
    ``position`` of it with the per-map constant ``c`` (the module's table), in float64."""
    rows = (slice(None),) + (None,) * (multiplier.ndim - 1)
    if op == "PROD":
        return multiplier * c[rows], offset * c
    if op == "DIV":
        return multiplier / c[rows], offset / c
    if op == "SUM":
        return multiplier, offset + c
    if position == 0:  # y - c
        return multiplier, offset - c
    return -multiplier, c - offset  # c - y


def conv_affine(graph: LayerGraph, step: int) -> Fusion | None:
    """The elementwise layer at ``step`` folded into the convolution or batch normalization before it (see the
    module's table)."""
    layer = _foldable(graph, step)
    if layer is None:
        return None
    op = layer.params["op"]
    for position, link in enumerate(layer.inputs):
        other = layer.inputs[1 - position]
        producer_step = _affine_producer(graph, link, step) if other != link else None
        if producer_step is None or not graph.shape_equal(link, layer.outputs[0]):
            continue
        if op == "DIV" and position != 0:  # c / y is no affine map of y
            continue
        producer = graph.layer(producer_step)
        value = graph.value(other)
        if value is None or graph.tensors[other].dtype != DataType.FLOAT:
            continue
        norm = producer.kind == "batch_normalization"
        maps = graph.weights[producer.weights["scale"]].size if norm else int(producer.params["num_output_maps"])
        c = _per_map(value, len(graph.tensors[link].shape), maps)
        if c is None:
            continue
        fused = (_norm_folded if norm else _conv_folded)(graph, producer, layer, position, c)
        return Fusion([producer_step, step], fused)
    return None


def _norm_folded(graph: LayerGraph, norm: LayerPlan, layer: LayerPlan, position: int, c: np.ndarray) -> LayerPlan:
    """The batch normalization ``norm`` with the elementwise ``layer`` by ``c`` folded into its scale and shift."""
    name = f"{norm.name} + {layer.name}"
    scale = np.asarray(graph.weights[norm.weights["scale"]], np.float64).reshape(-1)
    shift = np.asarray(graph.weights[norm.weights["shift"]], np.float64).reshape(-1)
    scale, shift = _folded(layer.params["op"], position, scale, shift, c)
    weights = {
        "scale": graph.add_weight(f"{name}/scale", np.ascontiguousarray(scale, dtype=np.float32)),
        "shift": graph.add_weight(f"{name}/shift", np.ascontiguousarray(shift, dtype=np.float32)),
    }
    return LayerPlan(name, "batch_normalization", list(norm.inputs), list(layer.outputs), dict(norm.params), weights)


def _conv_folded(graph: LayerGraph, conv: LayerPlan, layer: LayerPlan, position: int, c: np.ndarray) -> LayerPlan:
    """The convolution ``conv`` with the elementwise ``layer`` by ``c`` folded into its kernel and bias."""
    name, maps = f"{conv.name} + {layer.name}", c.size
    packed = graph.weights[conv.weights["kernel"]]
    kernel = packed.astype(np.float64).reshape(maps, -1)
    bias = (
        np.asarray(graph.weights[conv.weights["bias"]], np.float64).reshape(-1)
        if "bias" in conv.weights
        else np.zeros(maps)
    )
    kernel, bias = _folded(layer.params["op"], position, kernel, bias, c)
    weights = {
        "kernel": graph.add_weight(f"{name}/kernel", np.ascontiguousarray(kernel.reshape(packed.shape), np.float32)),
        "bias": graph.add_weight(f"{name}/bias", np.ascontiguousarray(bias, dtype=np.float32)),
    }
    params = {**conv.params, "has_bias": True}
    folded = graph.weights[weights["kernel"]].reshape(-1)
    params["uniform_kernel"] = bool(folded.size > 1 and np.all(folded == folded[0]))
    return LayerPlan(name, "convolution", list(conv.inputs), list(layer.outputs), params, weights)


def conv_scale_shift(graph: LayerGraph, step: int) -> Fusion | None:
    """The elementwise layer at ``step`` by a one-element constant, folded into the epilogue of the convolution
    before it when that applies an activation (see the module's note)."""
    layer = _foldable(graph, step)
    if layer is None:
        return None
    op = layer.params["op"]
    for position, link in enumerate(layer.inputs):
        other = layer.inputs[1 - position]
        conv_step = graph.producer.get(link)
        if other == link or conv_step is None or graph.only_reader(link) != step or not graph.fusable(conv_step):
            continue
        conv = graph.layer(conv_step)
        if conv.kind != "convolution" or not conv.params.get("activation") or len(conv.outputs) != 1:
            continue
        c = graph.scalar(other)
        if c is None or graph.tensors[link].dtype != DataType.FLOAT or not graph.shape_equal(link, layer.outputs[0]):
            continue
        if op == "DIV" and (position != 0 or c == 0.0):  # c / y is no affine map of y
            continue
        scale, shift = float(conv.params.get("post_scale", 1.0)), float(conv.params.get("post_shift", 0.0))
        if op == "PROD":
            scale, shift = scale * c, shift * c
        elif op == "DIV":
            scale, shift = scale / c, shift / c
        elif op == "SUM":
            shift = shift + c
        elif position == 0:  # y - c
            shift = shift - c
        else:  # c - y
            scale, shift = -scale, c - shift
        params = {**conv.params, "post_scale": scale, "post_shift": shift}
        fused = LayerPlan(
            f"{conv.name} + {layer.name}",
            "convolution",
            list(conv.inputs),
            list(layer.outputs),
            params=params,
            weights=dict(conv.weights),
        )
        return Fusion([conv_step, step], fused)
    return None
