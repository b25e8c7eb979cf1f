"""ONNX importers: reductions and the softmax family.

Reduce ops take their axes from an attribute up to opset 17 (ReduceSum: 12)
and from an optional input after; no axes reduce everything unless
``noop_with_empty_axes`` is set. Softmax, LogSoftmax and Hardmax before opset 13
flatten the input to 2-D at ``axis`` (i.e. normalise over every axis from
``axis`` on); from opset 13 they normalise over the one ``axis``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...core.types import DataType
from ...network.layer_enums import ElementWiseOperation as Ew
from ...network.layer_enums import ReduceOperation as R
from ...network.layer_enums import UnaryOperation as U
from ...network.tensor import ITensor
from .base import ImportContext, register_importer

__all__: list[str] = []

_FLOATS = (DataType.FLOAT, DataType.HALF)
_REDUCIBLE = (DataType.FLOAT, DataType.HALF, DataType.INT32, DataType.INT64)


def _axes(ctx: ImportContext, inputs: list[Any], input_since: int) -> tuple[ITensor, tuple[int, ...] | None]:
    """The data input and the normalised axes (None: pass the input through)."""
    x: ITensor = ctx.input(inputs)
    rank = ctx.rank_of(x)
    if ctx.opset >= input_since:
        given = inputs[1] if len(inputs) > 1 else None
        axes_value = None
        if given is not None:
            axes_value = ctx.value_of(given)
            if axes_value is None:
                ctx.fail("the axes input is computed at run time; plugrt needs reduction axes known when importing")
        axes = [] if axes_value is None else [int(a) for a in np.asarray(axes_value).reshape(-1)]
    else:
        axes = [int(a) for a in ctx.attr("axes", [])]
    if not axes:
        if ctx.attr("noop_with_empty_axes", 0):
            return x, None
        return x, tuple(range(rank))
    return x, tuple(sorted({ctx.axis(a, rank) for a in axes}))


def _mask(axes: tuple[int, ...]) -> int:
    mask = 0
    for axis in axes:
        mask |= 1 << axis
    return mask


def _reduce(ctx: ImportContext, x: ITensor, op: R, axes: tuple[int, ...], keep: bool) -> ITensor:
    """A reduce layer, converting types TensorRT's reduce does not take (through INT32 or FLOAT)."""
    dtype = ctx.dtype_of(x)
    work = dtype
    if op == R.AVG and dtype not in _FLOATS:
        work = DataType.FLOAT
    elif dtype not in _REDUCIBLE:
        work = DataType.INT32
    source = ctx.cast(x, work)
    empty = op in (R.MAX, R.MIN) and any(ctx.dims_of(x)[a] == 0 for a in axes)
    layer = ctx.named(
        ctx.network.add_reduce(source, R.SUM if empty else op, _mask(axes), keep), f"reduce_{op.name.lower()}"
    )
    out = layer.get_output(0)
    if empty:
        # The maximum of nothing is the type's lowest value (ONNX's rule); NumPy has no identity for it.
        out = ctx.elementwise(out, ctx.scalar(_identity(dtype, op), out), Ew.SUM)
    return ctx.cast(out, dtype)


def _identity(dtype: DataType, op: R) -> float | int:
    """The value a MAX (MIN) reduction of no elements gives for ``dtype``."""
    numpy_type = np.dtype(dtype.nptype())
    if numpy_type.kind == "f":
        return -np.inf if op == R.MAX else np.inf
    if numpy_type.kind == "b":
        return 0 if op == R.MAX else 1
    info = np.iinfo(numpy_type)
    return int(info.min) if op == R.MAX else int(info.max)


def _reduction(op_type: str, build: Callable[[ImportContext, ITensor, tuple[int, ...], bool], ITensor]) -> None:
    input_since = 13 if op_type == "ReduceSum" else 18

    @register_importer(op_type)
    def importer(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
        x, axes = _axes(ctx, inputs, input_since)
        if axes is None:
            return [ctx.identity(x)]
        keep = bool(ctx.attr("keepdims", 1))
        if ctx.dtype_of(x) == DataType.BOOL and op_type not in ("ReduceMax", "ReduceMin"):
            ctx.fail(f"{op_type} takes numbers, got BOOL")
        return ctx.folded([build(ctx, x, axes, keep)])


def _simple(op: R) -> Callable[[ImportContext, ITensor, tuple[int, ...], bool], ITensor]:
    return lambda ctx, x, axes, keep: _reduce(ctx, x, op, axes, keep)


def _through_float(
    body: Callable[[ImportContext, ITensor, tuple[int, ...], bool], ITensor],
) -> Callable[[ImportContext, ITensor, tuple[int, ...], bool], ITensor]:
    """Run ``body`` in FLOAT for integer inputs and convert back (ONNX's reference does the same)."""

    def run(ctx: ImportContext, x: ITensor, axes: tuple[int, ...], keep: bool) -> ITensor:
        dtype = ctx.dtype_of(x)
        if dtype in _FLOATS:
            return body(ctx, x, axes, keep)
        return ctx.cast(body(ctx, ctx.cast(x, DataType.FLOAT), axes, keep), dtype)

    return run


def _l1(ctx: ImportContext, x: ITensor, axes: tuple[int, ...], keep: bool) -> ITensor:
    return _reduce(ctx, ctx.unary(x, U.ABS), R.SUM, axes, keep)


def _sum_square(ctx: ImportContext, x: ITensor, axes: tuple[int, ...], keep: bool) -> ITensor:
    return _reduce(ctx, ctx.elementwise(x, x, Ew.PROD), R.SUM, axes, keep)


def _l2(ctx: ImportContext, x: ITensor, axes: tuple[int, ...], keep: bool) -> ITensor:
    return ctx.unary(_sum_square(ctx, x, axes, keep), U.SQRT)


def _log_sum(ctx: ImportContext, x: ITensor, axes: tuple[int, ...], keep: bool) -> ITensor:
    return ctx.unary(_reduce(ctx, x, R.SUM, axes, keep), U.LOG)


def _log_sum_exp(ctx: ImportContext, x: ITensor, axes: tuple[int, ...], keep: bool) -> ITensor:
    # max + log(sum(exp(x - max))): no overflow for large inputs.
    peak = _reduce(ctx, x, R.MAX, axes, True)
    shifted = ctx.unary(ctx.elementwise(x, peak, Ew.SUB), U.EXP)
    total = ctx.elementwise(ctx.unary(_reduce(ctx, shifted, R.SUM, axes, True), U.LOG), peak, Ew.SUM)
    return total if keep else _reduce(ctx, total, R.SUM, axes, False)


_reduction("ReduceSum", _simple(R.SUM))
_reduction("ReduceMean", _simple(R.AVG))
_reduction("ReduceMax", _simple(R.MAX))
_reduction("ReduceMin", _simple(R.MIN))
_reduction("ReduceProd", _simple(R.PROD))
_reduction("ReduceL1", _l1)
_reduction("ReduceL2", _through_float(_l2))
_reduction("ReduceSumSquare", _sum_square)
_reduction("ReduceLogSum", _through_float(_log_sum))
_reduction("ReduceLogSumExp", _through_float(_log_sum_exp))


# --- the softmax family ---------------------------------------------------------------
def _softmax_axes(ctx: ImportContext, x: ITensor) -> tuple[int, ...]:
    rank = ctx.rank_of(x)
    if rank == 0:
        ctx.fail(f"{ctx.node.op_type} needs an input of rank >= 1")
    if ctx.dtype_of(x) not in _FLOATS:
        ctx.fail(f"{ctx.node.op_type} takes FLOAT or FLOAT16, got {ctx.dtype_of(x).name}")
    if ctx.opset < 13:
        axis = ctx.axis(ctx.attr("axis", 1), rank)
        return tuple(range(axis, rank))
    return (ctx.axis(ctx.attr("axis", -1), rank),)


@register_importer("Softmax")
def import_softmax(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    x = ctx.input(inputs)
    axes = _softmax_axes(ctx, x)
    if len(axes) == 1:
        layer = ctx.named(ctx.network.add_softmax(x), "softmax")
        layer.axes = 1 << axes[0]
        return [layer.get_output(0)]
    return ctx.op("softmax", [x], {"axes": _mask(axes)})


@register_importer("LogSoftmax")
def import_log_softmax(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    # x - max - log(sum(exp(x - max))): finite wherever the result is.
    x = ctx.input(inputs)
    axes = _softmax_axes(ctx, x)
    shifted = ctx.elementwise(x, _reduce(ctx, x, R.MAX, axes, True), Ew.SUB)
    total = _reduce(ctx, ctx.unary(shifted, U.EXP), R.SUM, axes, True)
    return [ctx.elementwise(shifted, ctx.unary(total, U.LOG), Ew.SUB)]


@register_importer("Hardmax")
def import_hardmax(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    x = ctx.input(inputs)
    return ctx.op("hardmax", [x], {"axes": _mask(_softmax_axes(ctx, x))})
