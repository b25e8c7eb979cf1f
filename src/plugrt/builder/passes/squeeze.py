"""The squeeze-and-excitation rule: global average pooling, two 1x1 convolutions and a broadcast ``Mul``.

``GlobalAveragePool(x) → Conv 1x1 (+ act) → Conv 1x1 (+ act) → Mul(x, ·)`` becomes one
``squeeze_excitation`` layer (``ops/squeeze_excitation.py``) when the pooling, the two
convolutions and the product's scale are read by the next of them alone, the convolutions
are plain (one group, unit strides, no padding, kernel and bias as weights, no residual or
scalar map after the activation) and everything is FLOAT, or (on a GPU, only this) everything HALF: there the fused
kernel is many small launches, and it pays only where it keeps a HALF channels-last run of convolutions unbroken
(its ``Mul`` would read and write NCHW tensors: the convolutions around it reorder; MobileNetV3's fp16 export). The rule anchors at the ``Mul``,
after ``conv_activation`` has given the convolutions their activations. The fused layer is
named ``"squeeze-excitation [<pooling> .. <Mul>]"``.
"""

from __future__ import annotations

from typing import Any

from ...core.types import DataType
from ...engine.plan import LayerPlan
from .graph import Fusion, LayerGraph

__all__ = ["squeeze_excitation"]



def _types(graph: LayerGraph) -> tuple[DataType, ...]:
    """The types the block fuses in (see the module's note)."""
    return (DataType.HALF,) if graph.gpu else (DataType.FLOAT, DataType.HALF)


def _single_position_conv(graph: LayerGraph, tensor: int, reader: int) -> int | None:
    """The step of a plain 1x1 convolution writing ``tensor``, read by ``reader`` alone, else None."""
    step = graph.producer.get(tensor)
    if step is None or graph.only_reader(tensor) != reader or not graph.fusable(step):
        return None
    conv = graph.layer(step)
    p = conv.params
    if conv.kind != "convolution" or len(conv.inputs) != 1 or len(conv.outputs) != 1 or "kernel" not in conv.weights:
        return None
    if p.get("residual") or "post_scale" in p or "post_shift" in p or p.get("uniform_kernel"):
        return None
    if int(p.get("group", 1)) != 1 or any(k != 1 for k in p.get("kernel_shape", ())):
        return None
    if any(s != 1 for s in p.get("strides", [1])) or any(d != 0 for d in p.get("pads", [0])):
        return None
    if p.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID") or (p.get("has_bias") and "bias" not in conv.weights):
        return None
    return step if graph.tensors[tensor].dtype in _types(graph) else None


def _activation(conv: LayerPlan, k: int) -> dict[str, Any]:
    return {
        f"activation{k}": conv.params.get("activation", ""),
        f"activation{k}_alpha": float(conv.params.get("activation_alpha", 0.0)),
        f"activation{k}_beta": float(conv.params.get("activation_beta", 0.0)),
    }


def squeeze_excitation(graph: LayerGraph, step: int) -> Fusion | None:
    """The SE block ending in the ``Mul`` at ``step`` as one layer (see the module's note)."""
    mul = graph.layer(step)
    if mul.kind != "elementwise" or mul.params.get("op") != "PROD" or len(mul.inputs) != 2 or mul.weights:
        return None
    if not graph.fusable(step) or graph.tensors[mul.outputs[0]].dtype not in _types(graph):
        return None
    for position in (0, 1):
        x, s = mul.inputs[position], mul.inputs[1 - position]
        if x == s or len(graph.tensors[x].shape) < 3 or not graph.shape_equal(x, mul.outputs[0]):
            continue
        second = _single_position_conv(graph, s, step)
        if second is None:
            continue
        first = _single_position_conv(graph, graph.layer(second).inputs[0], second)
        if first is None:
            continue
        pooled = graph.layer(first).inputs[0]
        pool_step = graph.producer.get(pooled)
        if pool_step is None or graph.only_reader(pooled) != first or not graph.fusable(pool_step):
            continue
        pool = graph.layer(pool_step)
        if pool.kind != "global_pooling" or pool.params.get("mode") != "AVERAGE" or pool.inputs != [x]:
            continue
        conv1, conv2 = graph.layer(first), graph.layer(second)
        weights = {"kernel1": conv1.weights["kernel"], "kernel2": conv2.weights["kernel"]}
        for name, conv in (("bias1", conv1), ("bias2", conv2)):
            if "bias" in conv.weights:
                weights[name] = conv.weights["bias"]
        fused = LayerPlan(
            f"squeeze-excitation [{pool.name} .. {mul.name}]",
            "squeeze_excitation",
            [x],
            list(mul.outputs),
            params={**_activation(conv1, 1), **_activation(conv2, 2)},
            weights=weights,
        )
        return Fusion([pool_step, first, second, step], fused)
    return None
