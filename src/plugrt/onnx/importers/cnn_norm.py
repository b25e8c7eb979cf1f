"""ONNX importers: BatchNormalization, InstanceNormalization, LayerNormalization, GroupNormalization.

Inference batch normalization with constant statistics is an affine map per
channel folded at import; when its input comes straight from a convolution
with a constant kernel, it is folded into a copy of that convolution instead
(the original stays in the network only if something else reads it), as
inference runtimes do. GroupNormalization's scale and bias are per group up to
opset 20 and per channel from opset 21.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.types import DataType
from ...network.operator_layer import IOperatorLayer
from ...network.tensor import ITensor
from ...ops.normalization import fold_batch_norm
from .base import ImportContext, register_importer
from .cnn import constant_value, uniform

__all__: list[str] = []

_FLOATS = (DataType.FLOAT, DataType.HALF)


def _input(ctx: ImportContext, inputs: list[Any], index: int, what: str) -> ITensor:
    tensor: ITensor = ctx.input(inputs, index, what)
    if ctx.dtype_of(tensor) not in _FLOATS:
        ctx.fail(f"{what} must be float or float16, got {ctx.dtype_of(tensor).name}")
    return tensor


def _requested_outputs(ctx: ImportContext) -> int:
    """1 + the index of the last output the node names."""
    named = [i for i, name in enumerate(ctx.node.output) if name]
    return named[-1] + 1 if named else 1


@register_importer("BatchNormalization")
def import_batch_normalization(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    x = _input(ctx, inputs, 0, "X")
    stats = [_input(ctx, inputs, i, what) for i, what in enumerate(("scale", "B", "mean", "var"), start=1)]
    epsilon = float(ctx.attr("epsilon", 1e-5))
    if ctx.opset < 9 and not ctx.attr("spatial", 1):
        ctx.fail("spatial=0 (statistics per element rather than per channel) is not supported")
    outputs = _requested_outputs(ctx)
    training = bool(ctx.attr("training_mode", 0)) if ctx.opset >= 14 else outputs > 1
    if ctx.opset < 7 and ctx.has_attr("is_test"):
        training = not ctx.attr("is_test")
    if training:
        if outputs > 3:
            ctx.fail("the saved mean and variance outputs of training mode are not supported")
        params = {"epsilon": epsilon, "training_mode": True, "momentum": float(ctx.attr("momentum", 0.9))}
        params["num_outputs"] = outputs
        return ctx.op("batch_normalization", [x, *stats], params, num_outputs=outputs)
    values = [constant_value(ctx, t) for t in stats]
    if any(v is None for v in values):
        return ctx.op("batch_normalization", [x, *stats], {"epsilon": epsilon})
    scale, bias, mean, var = (np.asarray(v) for v in values)
    folded = fold_batch_norm(scale, bias, mean, var, epsilon)
    fused = _fold_into_conv(ctx, x, folded)
    if fused is not None:
        return [fused]
    return ctx.op("batch_normalization", [x], {"epsilon": epsilon}, folded)


def _fold_into_conv(ctx: ImportContext, x: ITensor, folded: dict[str, np.ndarray]) -> ITensor | None:
    """A copy of the convolution producing ``x`` with the affine map folded in, or None."""
    conv = x.producer
    if not isinstance(conv, IOperatorLayer) or conv.kind != "convolution" or len(conv._inputs) != 1:
        return None
    if "kernel" not in conv.weights:
        return None
    scale, shift = folded["scale"], folded["shift"]
    kernel = conv.weights["kernel"]
    maps = kernel.shape[0] * kernel.shape[1]
    if scale.shape[0] != maps:
        return None
    bias = np.asarray(conv.weights.get("bias", np.zeros(maps, np.float32)), dtype=np.float32)
    weights = {
        "kernel": np.ascontiguousarray(kernel * scale.reshape(kernel.shape[0], kernel.shape[1], 1)),
        "bias": np.ascontiguousarray(bias * scale + shift, dtype=np.float32),
    }
    params = dict(conv.params)
    params["has_bias"] = True
    params["uniform_kernel"] = uniform(weights["kernel"])
    (out,) = ctx.op("convolution", [conv._inputs[0]], params, weights)
    return out


def _affine(ctx: ImportContext, tensors: list[ITensor | None], names: tuple[str, ...]) -> tuple[list[Any], dict]:
    """Constant scale/bias as FLOAT weights, the others as inputs (in order)."""
    op_inputs: list[Any] = []
    weights: dict[str, np.ndarray] = {}
    for tensor, name in zip(tensors, names):
        if tensor is None:
            continue
        value = constant_value(ctx, tensor)
        if value is not None:
            weights[name] = np.ascontiguousarray(value, dtype=np.float32)
        else:
            op_inputs.append(tensor)
    return op_inputs, weights


def _channels_first(ctx: ImportContext, inputs: list[Any], names: tuple[str, str, str]) -> tuple[ITensor, ...]:
    """The data input, of rank >= 3 (``[N, C, spatial...]``), with its scale and bias inputs (named ``names``)."""
    x, scale, bias = (_input(ctx, inputs, index, name) for index, name in enumerate(names))
    if ctx.rank_of(x) < 3:
        ctx.fail(f"{ctx.node.op_type} takes [N, C, spatial...], got rank {ctx.rank_of(x)}")
    return x, scale, bias


@register_importer("InstanceNormalization")
def import_instance_normalization(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    x, scale, bias = _channels_first(ctx, inputs, ("input", "scale", "B"))
    extra, weights = _affine(ctx, [scale, bias], ("scale", "bias"))
    params = {"mode": "instance", "epsilon": float(ctx.attr("epsilon", 1e-5))}
    return ctx.op("normalization", [x, *extra], params, weights)


@register_importer("LayerNormalization")
def import_layer_normalization(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    x = _input(ctx, inputs, 0, "X")
    scale = _input(ctx, inputs, 1, "Scale")
    bias = _input(ctx, inputs, 2, "B") if len(inputs) > 2 and inputs[2] is not None else None
    if int(ctx.attr("stash_type", 1)) != 1:
        ctx.fail(f"stash_type {ctx.attr('stash_type')} is not supported; plugrt computes statistics in float")
    rank = ctx.rank_of(x)
    axis = ctx.axis(int(ctx.attr("axis", -1)), rank)
    extra, weights = _affine(ctx, [scale, bias], ("scale", "bias"))
    stash = _requested_outputs(ctx) - 1
    params = {
        "mode": "layer",
        "axis": axis,
        "epsilon": float(ctx.attr("epsilon", 1e-5)),
        "has_bias": bias is not None,
        "stash_outputs": stash,
    }
    return ctx.op("normalization", [x, *extra], params, weights, num_outputs=1 + stash)


@register_importer("GroupNormalization")
def import_group_normalization(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    x, scale, bias = _channels_first(ctx, inputs, ("X", "scale", "bias"))
    groups = int(ctx.required_attr("num_groups"))
    if groups < 1:
        ctx.fail(f"num_groups must be >= 1, got {groups}")
    if int(ctx.attr("stash_type", 1)) != 1:
        ctx.fail(f"stash_type {ctx.attr('stash_type')} is not supported; plugrt computes statistics in float")
    channels = ctx.dims_of(x)[1]
    if channels >= 0 and channels % groups:
        ctx.fail(f"{channels} channels do not split into {groups} groups")
    expected = groups if ctx.opset < 21 else channels
    for tensor, what in ((scale, "scale"), (bias, "bias")):
        size = ctx.dims_of(tensor)
        if expected >= 0 and size != [expected]:
            per = "group" if ctx.opset < 21 else "channel"
            ctx.fail(f"{what} has shape {size}; opset {ctx.opset} takes one value per {per} ([{expected}])")
    extra, weights = _affine(ctx, [scale, bias], ("scale", "bias"))
    params = {
        "mode": "group",
        "num_groups": groups,
        "epsilon": float(ctx.attr("epsilon", 1e-5)),
        "per_group_affine": ctx.opset < 21,
    }
    return ctx.op("normalization", [x, *extra], params, weights)
