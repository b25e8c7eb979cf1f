"""ONNX importers: LpNormalization, BitCast, EyeLike, Unique."""

from __future__ import annotations

from typing import Any

from ...network.layer_enums import ElementWiseOperation as Ew
from ...network.layer_enums import ReduceOperation as R
from ...network.layer_enums import UnaryOperation as U
from ..types import WIDENED, onnx_type_name, to_datatype
from .base import ImportContext, register_importer

__all__: list[str] = []


@register_importer("LpNormalization")
def import_lp_normalization(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    """``x / ||x||_p`` along ``axis`` (p is 1 or 2); slices whose norm is 0 stay 0."""
    x = ctx.input(inputs)
    p = int(ctx.attr("p", 2))
    if p not in (1, 2):
        ctx.fail(f"p must be 1 or 2, got {p}")
    axis = ctx.axis(int(ctx.attr("axis", -1)), ctx.rank_of(x))
    magnitude = ctx.unary(x, U.ABS) if p == 1 else ctx.elementwise(x, x, Ew.PROD)
    total = ctx.named(ctx.network.add_reduce(magnitude, R.SUM, 1 << axis, True), "norm").get_output(0)
    norm = total if p == 1 else ctx.unary(total, U.SQRT)
    # an all-zero slice stays zero (as in ONNX's reference): divide it by 1, not by 0
    zero = ctx.elementwise(norm, ctx.scalar(0, norm), Ew.EQUAL)
    safe = ctx.elementwise(norm, ctx.cast(zero, ctx.dtype_of(norm)), Ew.SUM)
    return [ctx.elementwise(x, safe, Ew.DIV)]


def _declared_exact(ctx: ImportContext, elem_type: int, what: str) -> Any:
    dtype = to_datatype(elem_type)
    if dtype is None or elem_type in WIDENED:
        held = f", which plugrt holds as {dtype.name}" if dtype is not None else ", which plugrt does not support"
        ctx.fail(f"{what} is {onnx_type_name(elem_type)}{held}: a bitcast needs the type's own bytes")
    return dtype


@register_importer("BitCast")
def import_bitcast(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    x = ctx.input(inputs)
    target = _declared_exact(ctx, int(ctx.required_attr("to")), "the target type")
    declared = ctx.declared_type(ctx.node.input[0])
    if declared is not None:
        _declared_exact(ctx, declared, "the input")
    return ctx.op("bitcast", [x], {"to_type": target.name})


@register_importer("EyeLike")
def import_eye_like(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    x = ctx.input(inputs)
    if ctx.rank_of(x) != 2:
        ctx.fail(f"EyeLike needs a 2-D input, got rank {ctx.rank_of(x)}")
    dtype = ctx.dtype_of(x)
    if ctx.has_attr("dtype"):
        found = to_datatype(int(ctx.attr("dtype")))
        if found is None:
            ctx.fail(f"dtype {onnx_type_name(int(ctx.attr('dtype')))} is not supported")
        dtype = found
    return ctx.op("eye_like", [x], {"to_type": dtype.name, "k": int(ctx.attr("k", 0))})


@register_importer("Unique")
def import_unique(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    """Unique values (sorted by default) with first indices, inverse indices and counts (data-dependent sizes)."""
    x = ctx.input(inputs)
    params: dict[str, Any] = {"sorted": bool(ctx.attr("sorted", 1))}
    if ctx.has_attr("axis"):
        params["axis"] = ctx.axis(int(ctx.attr("axis")), ctx.rank_of(x))
    return ctx.op("unique", [x], params, num_outputs=5)[:4]
