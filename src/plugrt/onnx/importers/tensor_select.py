"""ONNX importers: selection and rearrangement (Where, TopK, ArgMax/ArgMin, CumSum, CumProd, NonZero, Compress,
Einsum, OneHot, Trilu, ReverseSequence, DepthToSpace, SpaceToDepth).

NonZero and Compress have data-dependent output shapes: their operators write
the real length into a size output the engine reads after the step.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import ImportContext, register_importer
from .tensor import add_op, fold_small, int_values, present

__all__: list[str] = []


@register_importer("Where")
def import_where(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    return fold_small(ctx, add_op(ctx, "where", inputs))


@register_importer("TopK")
def import_topk(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    params: dict[str, Any] = {
        "axis": int(ctx.attr("axis", -1)),
        "largest": bool(ctx.attr("largest", 1)),
        "sorted": bool(ctx.attr("sorted", 1)),
    }
    tensors = [inputs[0]]
    if ctx.opset < 10:
        params["k"] = int(ctx.required_attr("k"))
    else:
        if len(inputs) < 2 or inputs[1] is None:
            ctx.fail("TopK needs the K input from opset 10 on")
        known = int_values(ctx, inputs[1])
        if known is not None:
            if len(known) != 1:
                ctx.fail(f"K must hold one value, got {known}")
            params["k"] = known[0]
        elif ctx.values_of(inputs[1]) is None:
            ctx.fail(f"K ({inputs[1].name!r}) must be known when the network is built (a constant or from shapes)")
        else:
            tensors.append(inputs[1])
    return add_op(ctx, "topk", tensors, params, num_outputs=2)


def _arg_reduce(ctx: ImportContext, inputs: list[Any], op: str) -> list[Any]:
    params = {
        "op": op,
        "axis": int(ctx.attr("axis", 0)),
        "keepdims": bool(ctx.attr("keepdims", 1)),
        "select_last_index": bool(ctx.attr("select_last_index", 0)),
    }
    return add_op(ctx, "arg_reduce", [inputs[0]], params)


@register_importer("ArgMax")
def import_argmax(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    return _arg_reduce(ctx, inputs, "max")


@register_importer("ArgMin")
def import_argmin(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    return _arg_reduce(ctx, inputs, "min")


@register_importer("CumSum")
@register_importer("CumProd")
def import_cumsum(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    params: dict[str, Any] = {"exclusive": bool(ctx.attr("exclusive", 0)), "reverse": bool(ctx.attr("reverse", 0))}
    if ctx.node.op_type == "CumProd":
        params["product"] = True
    axis = int_values(ctx, inputs[1])
    if axis is not None:
        params["axis"] = axis[0]
        return add_op(ctx, "cumsum", [inputs[0]], params)
    return add_op(ctx, "cumsum", inputs[:2], params)


@register_importer("NonZero")
def import_nonzero(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    return fold_small(ctx, add_op(ctx, "nonzero", inputs, num_outputs=2)[:1])


@register_importer("Compress")
def import_compress(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    axis = ctx.attr("axis")
    params = {} if axis is None else {"axis": int(axis)}
    return add_op(ctx, "compress", inputs, params, num_outputs=2)[:1]


@register_importer("Einsum")
def import_einsum(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    return add_op(ctx, "einsum", inputs, {"equation": str(ctx.required_attr("equation"))})


@register_importer("OneHot")
def import_one_hot(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    indices, depth, values = inputs
    params: dict[str, Any] = {"axis": int(ctx.attr("axis", -1))}
    known = ctx.value_of(depth)
    if known is not None:
        if known.size != 1:
            ctx.fail(f"depth must hold one value, got {known.size}")
        params["depth"] = int(np.asarray(known).reshape(-1)[0])
        return add_op(ctx, "one_hot", [indices, values], params)
    if ctx.values_of(depth) is None:
        ctx.fail(f"depth ({depth.name!r}) must be known when the network is built (a constant or from shapes)")
    return add_op(ctx, "one_hot", [indices, values, depth], params)


@register_importer("Trilu")
def import_trilu(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    params: dict[str, Any] = {"upper": bool(ctx.attr("upper", 1))}
    k = inputs[1] if len(inputs) > 1 else None
    known = None if k is None else int_values(ctx, k)
    if known is not None:
        params["k"] = known[0]
        k = None
    return add_op(ctx, "trilu", present(inputs[0], k), params)


@register_importer("ReverseSequence")
def import_reverse_sequence(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    params = {"time_axis": int(ctx.attr("time_axis", 0)), "batch_axis": int(ctx.attr("batch_axis", 1))}
    return add_op(ctx, "reverse_sequence", inputs, params)


@register_importer("DepthToSpace")
def import_depth_to_space(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    params = {"blocksize": int(ctx.required_attr("blocksize")), "mode": str(ctx.attr("mode", "DCR"))}
    return add_op(ctx, "depth_to_space", [inputs[0]], params)


@register_importer("SpaceToDepth")
def import_space_to_depth(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    params = {"blocksize": int(ctx.required_attr("blocksize")), "mode": str(ctx.attr("mode", "DCR"))}
    return add_op(ctx, "space_to_depth", [inputs[0]], params)
