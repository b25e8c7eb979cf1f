"""ONNX importers: convolution, Gemm, pooling, LRN and PRelu.

Constant kernels, biases and slopes become operator weights laid out once for
the kernel that uses them (conv kernels packed for the im2col matrix multiply,
Gemm's B and C pre-scaled by alpha and beta); when such an input is computed at
run time it is an operator input instead. "Constant" includes a ConstantOfShape
result of a known shape, which the ConstantOfShape importer keeps as a layer
when it is large (:func:`constant_value`): as weights it is filled once, not on
every run, and can be folded further. Normalizations are in ``cnn_norm``,
Resize, Upsample and Pad in ``cnn_resize``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.types import DataType
from ...network.operator_layer import IOperatorLayer
from ...network.standard_layers import IIdentityLayer, IShuffleLayer
from ...network.tensor import ITensor
from ...ops.conv import pack_conv_kernel
from ...ops.deconv import pack_deconv_kernel
from ...ops.gemm import pack_gemm_weights
from .base import ImportContext, register_importer

__all__ = ["constant_value", "uniform"]

_FLOATS = (DataType.FLOAT, DataType.HALF)


def _optional(inputs: list[Any], index: int) -> ITensor | None:
    return inputs[index] if len(inputs) > index else None


def constant_value(ctx: ImportContext, tensor: ITensor | None) -> np.ndarray | None:
    """The build-time value of ``tensor``: ``ctx.value_of``, else the fill of a ConstantOfShape layer of
    known shape, seen through reshapes, transposes and copies (which keep a uniform fill uniform)."""
    if tensor is None:
        return None
    value = ctx.value_of(tensor)
    if value is not None:
        return value
    layer = tensor.producer
    if isinstance(layer, IOperatorLayer) and layer.kind == "constant_of_shape" and "value" in layer.weights:
        shape = ctx.value_of(layer._inputs[0])
        if shape is not None:
            fill = np.asarray(layer.weights["value"]).reshape(-1)[0]
            return np.full([int(d) for d in np.asarray(shape).reshape(-1)], fill)
    if isinstance(layer, (IShuffleLayer, IIdentityLayer)) and layer._inputs and layer._inputs[0] is not None:
        source = constant_value(ctx, layer._inputs[0])
        dims = ctx.dims_of(tensor)
        if source is not None and source.size and uniform(source) and all(d >= 0 for d in dims):
            return np.full(dims, source.reshape(-1)[0])
    return None


def uniform(value: np.ndarray) -> bool:
    """Whether every element is the same (constant-filled weights, as ONNX's light test models have).

    Equal filters must give equal outputs -- those models' expected outputs are softmaxes of
    logits that are equal only then -- but BLAS kernels may round equal rows differently
    (OpenBLAS does, depending on its thread count); the operators copy one row to the others.
    """
    flat = np.asarray(value).reshape(-1)
    return flat.size > 1 and bool(np.all(flat == flat[0]))


def _float_input(ctx: ImportContext, tensor: ITensor, what: str) -> None:
    dtype = ctx.dtype_of(tensor)
    if dtype not in _FLOATS:
        ctx.fail(f"{what} must be float or float16 (plugrt has no double tensors), got {dtype.name}")


def _static_dims(ctx: ImportContext, tensor: ITensor, what: str) -> list[int]:
    dims = ctx.dims_of(tensor)
    if any(d < 0 for d in dims):
        ctx.fail(f"{what} must have a static shape, got {dims}")
    return dims


def _window_params(ctx: ImportContext, kernel: list[int], spatial: int) -> dict[str, Any]:
    """kernel_shape, strides, dilations, pads and auto_pad, checked against ``spatial`` axes."""
    if len(kernel) != spatial:
        ctx.fail(f"kernel_shape {kernel} must have one value per spatial axis ({spatial})")
    params: dict[str, Any] = {"kernel_shape": kernel}
    for name, count in (("strides", spatial), ("pads", 2 * spatial), ("dilations", spatial)):
        value = [int(v) for v in ctx.attr(name, [])]
        if value and len(value) != count:
            ctx.fail(f"{name} {value} must have {count} values")
        if value:
            params[name] = value
    auto_pad = ctx.attr("auto_pad", "NOTSET") or "NOTSET"
    if auto_pad not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        ctx.fail(f"unknown auto_pad {auto_pad!r}; valid: NOTSET, SAME_UPPER, SAME_LOWER, VALID")
    params["auto_pad"] = auto_pad
    return params


# --- convolution ------------------------------------------------------------------------
def _conv_like(ctx: ImportContext, inputs: list[Any], transposed: bool) -> list[Any]:
    x = ctx.input(inputs, 0, "X")
    w = ctx.input(inputs, 1, "W")
    bias = _optional(inputs, 2)
    _float_input(ctx, x, "X")
    kernel_value = constant_value(ctx, w)
    w_dims = list(kernel_value.shape) if kernel_value is not None else _static_dims(ctx, w, "a run-time kernel W")
    rank = ctx.rank_of(x)
    if len(w_dims) != rank or rank < 3:
        ctx.fail(f"X of rank {rank} and W of shape {w_dims}: both need rank >= 3 and equal ranks")
    if not ctx.has_attr("kernel_shape"):
        kernel = w_dims[2:]
    else:
        kernel = [int(k) for k in ctx.attr("kernel_shape")]
        if kernel != w_dims[2:]:
            ctx.fail(f"kernel_shape {kernel} does not match W's spatial dims {w_dims[2:]}")
    params = _window_params(ctx, kernel, rank - 2)
    group = int(ctx.attr("group", 1))
    if group < 1 or w_dims[0] % group:
        what = "input channels" if transposed else "output maps"
        ctx.fail(f"group {group} does not divide the kernel's {w_dims[0]} {what}")
    channels = w_dims[0] if transposed else w_dims[1] * group
    given = ctx.dims_of(x)[1]
    if given >= 0 and given != channels:
        ctx.fail(f"input has {given} channels, the kernel expects {channels} (W of shape {w_dims}, group {group})")
    params["group"] = group
    params["num_output_maps"] = w_dims[1] * group if transposed else w_dims[0]
    if transposed:
        for name in ("output_padding", "output_shape"):
            if ctx.has_attr(name):
                params[name] = [int(v) for v in ctx.attr(name)]
    weights: dict[str, np.ndarray] = {}
    op_inputs = [x]
    if kernel_value is not None:
        pack = pack_deconv_kernel if transposed else pack_conv_kernel
        weights["kernel"] = pack(kernel_value, group)
        if not transposed and uniform(kernel_value):
            params["uniform_kernel"] = True
    else:
        _float_input(ctx, w, "W")
        op_inputs.append(w)
    if bias is not None:
        params["has_bias"] = True
        bias_value = constant_value(ctx, bias)
        if bias_value is not None:
            weights["bias"] = np.ascontiguousarray(bias_value, dtype=np.float32).reshape(-1)
        else:
            _float_input(ctx, bias, "B")
            op_inputs.append(bias)
    return ctx.op("deconvolution" if transposed else "convolution", op_inputs, params, weights)


@register_importer("Conv")
def import_conv(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    return _conv_like(ctx, inputs, transposed=False)


@register_importer("ConvTranspose")
def import_conv_transpose(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    return _conv_like(ctx, inputs, transposed=True)


# --- Gemm -----------------------------------------------------------------------------------
@register_importer("Gemm")
def import_gemm(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    a = ctx.input(inputs, 0, "A")
    b = ctx.input(inputs, 1, "B")
    c = _optional(inputs, 2)
    alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
    for tensor, name in ((a, "A"), (b, "B")) + (((c, "C"),) if c is not None else ()):
        _float_input(ctx, tensor, name)
        if name != "C" and ctx.rank_of(tensor) != 2:
            ctx.fail(f"{name} must be a matrix (rank 2), got rank {ctx.rank_of(tensor)}")
    if c is not None and beta == 0.0:
        c = None
    params = {
        "trans_a": bool(ctx.attr("transA", 0)),
        "trans_b": bool(ctx.attr("transB", 0)),
        "alpha": alpha,
        "beta": beta,
        "has_c": c is not None,
    }
    b_value, c_value = constant_value(ctx, b), constant_value(ctx, c)
    weights = pack_gemm_weights(b_value, c_value, alpha, beta)
    if b_value is not None and uniform(b_value):
        params["uniform_b"] = True
    op_inputs = [a] + ([b] if b_value is None else []) + ([c] if c is not None and c_value is None else [])
    return ctx.op("gemm", op_inputs, params, weights)


# --- pooling --------------------------------------------------------------------------------
def _pool(ctx: ImportContext, inputs: list[Any], mode: str) -> list[Any]:
    x = ctx.input(inputs, 0, "X")
    rank = ctx.rank_of(x)
    if rank < 3:
        ctx.fail(f"pooling takes [N, C, spatial...], got rank {rank}")
    allowed = (*_FLOATS, DataType.INT8, DataType.UINT8) if mode == "MAX" else _FLOATS
    if ctx.dtype_of(x) not in allowed:
        ctx.fail(f"{mode} pooling takes {', '.join(t.name for t in allowed)}, got {ctx.dtype_of(x).name}")
    kernel = [int(k) for k in ctx.required_attr("kernel_shape")]
    params = _window_params(ctx, kernel, rank - 2)
    params["mode"] = mode
    params["ceil_mode"] = bool(ctx.attr("ceil_mode", 0))
    outputs = 1
    if mode == "AVERAGE":
        params["count_include_pad"] = bool(ctx.attr("count_include_pad", 0))
    elif mode == "LP":
        params["p"] = float(ctx.attr("p", 2))
    elif len(ctx.node.output) > 1 and ctx.node.output[1]:
        params["with_indices"] = True
        params["storage_order"] = int(ctx.attr("storage_order", 0))
        outputs = 2
    return ctx.op("pooling", [x], params, num_outputs=outputs)


@register_importer("MaxPool")
def import_max_pool(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    return _pool(ctx, inputs, "MAX")


@register_importer("AveragePool")
def import_average_pool(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    return _pool(ctx, inputs, "AVERAGE")


@register_importer("LpPool")
def import_lp_pool(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    return _pool(ctx, inputs, "LP")


def _global_pool(ctx: ImportContext, inputs: list[Any], mode: str) -> list[Any]:
    x = ctx.input(inputs, 0, "X")
    if ctx.rank_of(x) < 3:
        ctx.fail(f"global pooling takes [N, C, spatial...], got rank {ctx.rank_of(x)}")
    return ctx.op("global_pooling", [x], {"mode": mode, "p": float(ctx.attr("p", 2))})


@register_importer("GlobalMaxPool")
def import_global_max_pool(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    return _global_pool(ctx, inputs, "MAX")


@register_importer("GlobalAveragePool")
def import_global_average_pool(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    return _global_pool(ctx, inputs, "AVERAGE")


@register_importer("GlobalLpPool")
def import_global_lp_pool(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    return _global_pool(ctx, inputs, "LP")


# --- LRN and PRelu ----------------------------------------------------------------------------
@register_importer("LRN")
def import_lrn(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    x = ctx.input(inputs, 0, "X")
    _float_input(ctx, x, "X")
    params = {
        "size": int(ctx.required_attr("size")),
        "alpha": float(ctx.attr("alpha", 1e-4)),
        "beta": float(ctx.attr("beta", 0.75)),
        "bias": float(ctx.attr("bias", 1.0)),
    }
    return ctx.op("lrn", [x], params)


@register_importer("PRelu")
def import_prelu(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    x = ctx.input(inputs, 0, "X")
    slope = ctx.input(inputs, 1, "slope")
    rank = ctx.rank_of(x)
    value = constant_value(ctx, slope)
    # Before opset 7 a 1-D slope of C values applies along the channel axis.
    channel_slope = ctx.opset < 7 and ctx.rank_of(slope) == 1 and rank > 2 and ctx.dims_of(slope)[0] != 1
    if value is not None:
        value = np.asarray(value, dtype=ctx.dtype_of(x).nptype())
        if channel_slope:
            value = value.reshape((-1,) + (1,) * (rank - 2))
        if value.ndim > rank:
            ctx.fail(f"slope of shape {list(value.shape)} does not broadcast to X of rank {rank}")
        return ctx.op("prelu", [x], {}, {"slope": np.ascontiguousarray(value)})
    if channel_slope:
        slope = ctx.reshape(slope, [-1] + [1] * (rank - 2))
    return ctx.op("prelu", [x, ctx.cast(slope, ctx.dtype_of(x))])
