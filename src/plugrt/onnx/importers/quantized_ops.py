"""ONNX importers: ConvInteger, MatMulInteger, QLinearConv, QLinearMatMul, DynamicQuantizeLinear.

These are ONNX's own quantized operators, with zero points of any value (unlike the Q/DQ pairs
TensorRT takes, see ``quantize.py``). The integer products lower to ``integer_convolution`` and
``integer_matmul`` (exact INT32 sums of zero-point-shifted INT8/UINT8 values); the QLinear ops
add a ``requantize`` (the bias, the scales' multiplier in float32, round half to even, the output
zero point, saturation); see :mod:`plugrt.ops.integer_linear`. Every input may be computed at run
time; zero points known at build time narrow the exact-sum bound (``product_bound``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.types import DataType
from ...network.tensor import ITensor
from ...ops.integer_linear import QUANTIZED_TYPES
from .base import ImportContext, register_importer
from .basic_math import matmul_operands
from .cnn import _static_dims, _window_params

__all__: list[str] = []

_FLOATS = (DataType.FLOAT, DataType.HALF)


def _described(ctx: ImportContext, index: int, role: str) -> str:
    """How messages name input ``index``: its role, position and tensor name."""
    name = ctx.node.input[index] if index < len(ctx.node.input) else ""
    return f"{role} (input {index}, {name!r})"


def _typed(ctx: ImportContext, inputs: list[Any], index: int, role: str, allowed: tuple[DataType, ...]) -> ITensor:
    tensor = ctx.input(inputs, index, role)
    dtype = ctx.dtype_of(tensor)
    if dtype not in allowed:
        ctx.fail(f"{_described(ctx, index, role)} must be {' or '.join(t.name for t in allowed)}, got {dtype.name}")
    return tensor


def _quantized(ctx: ImportContext, inputs: list[Any], index: int, role: str) -> ITensor:
    return _typed(ctx, inputs, index, role, tuple(QUANTIZED_TYPES))


def _zero_point(ctx: ImportContext, inputs: list[Any], index: int, role: str, operand: ITensor, of: str) -> ITensor:
    """Zero point ``index`` of ``operand`` (named ``of``): its type must be the operand's; absent means 0."""
    dtype = ctx.dtype_of(operand)
    if len(inputs) <= index or inputs[index] is None:
        return ctx.constant(np.zeros(1, dtype=dtype.nptype()))
    zero = ctx.input(inputs, index, role)
    if ctx.dtype_of(zero) != dtype:
        ctx.fail(f"{_described(ctx, index, role)} must have {of}'s type {dtype.name}, got {ctx.dtype_of(zero).name}")
    return zero


def _shift_bound(ctx: ImportContext, operand: ITensor, zero: ITensor) -> int:
    """The largest ``|operand - zero|``: over the operand type's range at the known zero points, else 255."""
    values = ctx.value_of(zero)
    if values is None or values.size == 0:
        return 255
    low, high = QUANTIZED_TYPES[ctx.dtype_of(operand)]
    zeros = np.asarray(values, dtype=np.int64).reshape(-1)
    return int(max(np.abs(low - zeros).max(), np.abs(high - zeros).max()))


def _elements(dims: list[int]) -> int:
    return int(np.prod(dims)) if all(d >= 0 for d in dims) else -1


def _per_channel(ctx: ImportContext, tensor: ITensor, index: int, role: str, count: int, what: str) -> bool:
    """Check that ``tensor`` holds one value or one per ``what`` (``count``); True for the latter."""
    dims = ctx.dims_of(tensor)
    size = _elements(dims)
    if len(dims) > 1 or size not in (1, count):
        ctx.fail(
            f"{_described(ctx, index, role)} has shape {dims}; it takes one value (per tensor) or {count} "
            f"(one per {what}) in a scalar or 1-D tensor"
        )
    return size == count and count != 1


def _along(ctx: ImportContext, tensor: ITensor, index: int, role: str, operand: ITensor, rows: bool) -> ITensor:
    """``tensor`` (a scale or zero point of a matrix product operand) shaped to broadcast against it.

    One value (per tensor); one per row of ``a`` (``rows``) or per column of ``b``, 1-D or of the
    operand's rank (``[..., M, 1]`` / ``[..., 1, N]``).
    """
    dims, shape = ctx.dims_of(tensor), ctx.dims_of(operand)
    if _elements(dims) == 1:
        return tensor if len(dims) <= 1 else ctx.reshape(tensor, [1])
    axis = -2 if rows else -1
    count = shape[axis] if len(shape) >= 2 else 1
    if len(dims) == 1 and dims[0] == count >= 0:
        return ctx.reshape(tensor, [count, 1]) if rows else tensor
    wanted = [1, count] if not rows else [count, 1]
    if len(dims) == len(shape) >= 2 and dims[-2:] == wanted and all(d in (1, s) for d, s in zip(dims, shape)):
        return tensor
    what = "row of a" if rows else "column of b"
    ctx.fail(
        f"{_described(ctx, index, role)} has shape {dims}; for an operand of shape {shape} it takes one value "
        f"(per tensor) or {count} (one per {what}), 1-D or shaped {['...', *wanted]}"
    )


def _integer_convolution(ctx: ImportContext, x: ITensor, w: ITensor, zeros: tuple[Any, Any]) -> tuple[ITensor, int]:
    """The INT32 sums of ConvInteger / QLinearConv, and the number of output maps."""
    w_dims = _static_dims(ctx, w, "the kernel w")
    rank = ctx.rank_of(x)
    if len(w_dims) != rank or rank < 3:
        ctx.fail(f"x of rank {rank} and w of shape {w_dims}: both need rank >= 3 and equal ranks")
    kernel = [int(k) for k in ctx.attr("kernel_shape", w_dims[2:])]
    if kernel != w_dims[2:]:
        ctx.fail(f"kernel_shape {kernel} does not match w's spatial dims {w_dims[2:]}")
    params = _window_params(ctx, kernel, rank - 2)
    group = int(ctx.attr("group", 1))
    if group < 1 or w_dims[0] % group:
        ctx.fail(f"group {group} does not divide the kernel's {w_dims[0]} output maps")
    given = ctx.dims_of(x)[1]
    if given >= 0 and given != w_dims[1] * group:
        ctx.fail(f"x has {given} channels, the kernel expects {w_dims[1] * group} (w of shape {w_dims}, group {group})")
    (x_zero, x_index), (w_zero, w_index) = zeros
    _per_channel(ctx, x_zero, x_index, "x_zero_point", 1, "tensor")
    _per_channel(ctx, w_zero, w_index, "w_zero_point", w_dims[0], "output channel")
    bound = _shift_bound(ctx, x, x_zero) * _shift_bound(ctx, w, w_zero)
    params.update(group=group, num_output_maps=w_dims[0], product_bound=bound)
    return ctx.op("integer_convolution", [x, w, x_zero, w_zero], params)[0], w_dims[0]


def _integer_matmul(
    ctx: ImportContext, inputs: list[Any], positions: tuple[int, int, int, int], names: tuple[str, str]
) -> tuple[ITensor, ITensor, ITensor]:
    """``(a, b, a_sums)``: the operands at ``positions`` (a, a_zero_point, b, b_zero_point), named ``names``,
    and their INT32 product (MatMulInteger / QLinearMatMul), the zero points shaped by :func:`_along`."""
    (a_at, a_zero_at, b_at, b_zero_at), (a_name, b_name) = positions, names
    a = _quantized(ctx, inputs, a_at, a_name)
    b = _quantized(ctx, inputs, b_at, b_name)
    a_zero = _along(
        ctx, _zero_point(ctx, inputs, a_zero_at, "a_zero_point", a, a_name), a_zero_at, "a_zero_point", a, rows=True
    )
    b_zero = _along(
        ctx, _zero_point(ctx, inputs, b_zero_at, "b_zero_point", b, b_name), b_zero_at, "b_zero_point", b, rows=False
    )
    bound = _shift_bound(ctx, a, a_zero) * _shift_bound(ctx, b, b_zero)
    left, op_a, right, op_b = matmul_operands(ctx, a, b)
    params = {"op0": op_a.name, "op1": op_b.name, "product_bound": bound}
    return a, b, ctx.op("integer_matmul", [left, right, a_zero, b_zero], params)[0]


@register_importer("ConvInteger")
def import_conv_integer(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    x = _quantized(ctx, inputs, 0, "x")
    w = _quantized(ctx, inputs, 1, "w")
    zeros = (
        (_zero_point(ctx, inputs, 2, "x_zero_point", x, "x"), 2),
        (_zero_point(ctx, inputs, 3, "w_zero_point", w, "w"), 3),
    )
    return [_integer_convolution(ctx, x, w, zeros)[0]]


@register_importer("MatMulInteger")
def import_matmul_integer(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    return [_integer_matmul(ctx, inputs, (0, 2, 1, 3), ("A", "B"))[2]]


def _requantize(
    ctx: ImportContext, inputs: list[Any], acc: ITensor, scales: list[ITensor], bias: ITensor | None
) -> list[Any]:
    """``requantize`` of ``acc`` with (scale_a, scale_b), the output scale (input 6) and zero point (input 7)."""
    y_scale = _typed(ctx, inputs, 6, "y_scale", _FLOATS)
    _per_channel(ctx, y_scale, 6, "y_scale", 1, "tensor")
    y_zero = _quantized(ctx, inputs, 7, "y_zero_point")
    _per_channel(ctx, y_zero, 7, "y_zero_point", 1, "tensor")
    operands = [acc, *scales, y_scale, y_zero] + ([bias] if bias is not None else [])
    return ctx.op("requantize", operands, {"has_bias": bias is not None})


@register_importer("QLinearConv")
def import_qlinear_conv(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    x = _quantized(ctx, inputs, 0, "x")
    w = _quantized(ctx, inputs, 3, "w")
    x_zero = _zero_point(ctx, inputs, 2, "x_zero_point", x, "x")
    w_zero = _zero_point(ctx, inputs, 5, "w_zero_point", w, "w")
    acc, maps = _integer_convolution(ctx, x, w, ((x_zero, 2), (w_zero, 5)))
    channel_shape = [maps] + [1] * (ctx.rank_of(x) - 2)
    x_scale = _typed(ctx, inputs, 1, "x_scale", _FLOATS)
    _per_channel(ctx, x_scale, 1, "x_scale", 1, "tensor")
    w_scale = _typed(ctx, inputs, 4, "w_scale", _FLOATS)
    if _per_channel(ctx, w_scale, 4, "w_scale", maps, "output channel"):
        w_scale = ctx.reshape(w_scale, channel_shape)
    bias = inputs[8] if len(inputs) > 8 else None
    if bias is not None:
        _typed(ctx, inputs, 8, "B", (DataType.INT32,))
        if ctx.dims_of(bias) != [maps]:
            ctx.fail(
                f"{_described(ctx, 8, 'B')} has shape {ctx.dims_of(bias)}; it takes one value per output channel: [{maps}]"
            )
        bias = ctx.reshape(bias, channel_shape)
    return _requantize(ctx, inputs, acc, [x_scale, w_scale], bias)


@register_importer("QLinearMatMul")
def import_qlinear_matmul(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    a, b, acc = _integer_matmul(ctx, inputs, (0, 2, 3, 5), ("a", "b"))
    a_scale = _along(ctx, _typed(ctx, inputs, 1, "a_scale", _FLOATS), 1, "a_scale", a, rows=True)
    b_scale = _along(ctx, _typed(ctx, inputs, 4, "b_scale", _FLOATS), 4, "b_scale", b, rows=False)
    return _requantize(ctx, inputs, acc, [a_scale, b_scale], None)


@register_importer("DynamicQuantizeLinear")
def import_dynamic_quantize_linear(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    x = _typed(ctx, inputs, 0, "x", (DataType.FLOAT,))
    return ctx.op("dynamic_quantize", [x], num_outputs=3)
