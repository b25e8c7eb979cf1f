"""ONNX importers: shapes, indexing and reshaping (Shape, Gather*, Scatter*, Slice, Split, Squeeze …).

Nodes whose inputs are all known at import time are folded into constants.
Otherwise they become operator layers whose shape rules read shape-tensor
values as expressions, so chains such as ``Shape → Gather → Concat → Reshape``
or ``Shape → Slice → ConstantOfShape`` work with dynamic input shapes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.types import DataType
from ..types import to_supported_array
from .base import ImportContext, register_importer

__all__ = ["add_op", "fold_small", "int_values", "present"]

#: Constant results larger than this many elements stay layers (they would bloat the plan).
_FOLD_LIMIT = 1 << 16


def present(*tensors: Any) -> list[Any]:
    """The given tensors, without the omitted (None) ones."""
    return [t for t in tensors if t is not None]


def add_op(
    ctx: ImportContext,
    kind: str,
    inputs: list[Any],
    params: dict[str, Any] | None = None,
    weights: dict[str, np.ndarray] | None = None,
    num_outputs: int = 1,
) -> list[Any]:
    """``ctx.op``, with the layer's rules run at once: a bad node fails at import, naming itself."""
    outputs = ctx.op(kind, inputs, params, weights, num_outputs)
    ctx.info(outputs[0])
    return outputs


def int_values(ctx: ImportContext, tensor: Any) -> list[int] | None:
    """The values of ``tensor`` as Python ints when known at import time, else None."""
    value = ctx.value_of(tensor)
    return None if value is None else [int(v) for v in np.asarray(value).reshape(-1)]


def _need_values(ctx: ImportContext, tensor: Any, what: str) -> None:
    """Fail at import when a tensor that sets a shape has no values known before the build."""
    if ctx.value_of(tensor) is None and ctx.values_of(tensor) is None:
        ctx.fail(
            f"the {what} ({tensor.name!r}) must be known when the network is built: an initializer, a Constant, or "
            "computed from shapes; it is computed from runtime data here"
        )


def fold_small(ctx: ImportContext, outputs: list[Any]) -> list[Any]:
    """``ctx.folded`` for nodes whose known inputs are small (computed from large ones, results stay layers)."""
    return ctx.folded(outputs, limit=_FOLD_LIMIT)


# --- shapes --------------------------------------------------------------------------------------
@register_importer("Shape")
def import_shape(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    start, end = int(ctx.attr("start", 0)), ctx.attr("end")
    dims = ctx.dims_of(inputs[0])
    selected = dims[slice(start, None if end is None else int(end))]
    if all(d >= 0 for d in selected):
        return [ctx.constant(np.array(selected, dtype=np.int64))]
    return add_op(ctx, "shape", [inputs[0]], {"start": start, "end": None if end is None else int(end)})


@register_importer("Size")
def import_size(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    dims = ctx.dims_of(inputs[0])
    if all(d >= 0 for d in dims):
        return [ctx.constant(np.array(int(np.prod(dims, dtype=np.int64)), dtype=np.int64))]
    return add_op(ctx, "size", [inputs[0]])


# --- gather / scatter ---------------------------------------------------------------------------
@register_importer("Gather")
def import_gather(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    data, indices = inputs
    axis = ctx.axis(ctx.attr("axis", 0), ctx.rank_of(data))
    return fold_small(ctx, add_op(ctx, "gather", [data, indices], {"axis": axis}))


@register_importer("GatherElements")
def import_gather_elements(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    return add_op(ctx, "gather_elements", inputs, {"axis": int(ctx.attr("axis", 0))})


@register_importer("GatherND")
def import_gather_nd(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    return add_op(ctx, "gather_nd", inputs, {"batch_dims": int(ctx.attr("batch_dims", 0))})


@register_importer("ScatterND")
def import_scatter_nd(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    return add_op(ctx, "scatter_nd", inputs, {"reduction": ctx.attr("reduction", "none")})


@register_importer("ScatterElements")
@register_importer("Scatter")
def import_scatter_elements(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    params = {"axis": int(ctx.attr("axis", 0)), "reduction": ctx.attr("reduction", "none")}
    return add_op(ctx, "scatter_elements", inputs, params)


# --- slicing -------------------------------------------------------------------------------------
@register_importer("Slice")
def import_slice(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    data = inputs[0]
    params: dict[str, Any] = {}
    tensors: list[Any] = []
    if ctx.opset < 10:
        params["starts"] = [int(v) for v in ctx.required_attr("starts")]
        params["ends"] = [int(v) for v in ctx.required_attr("ends")]
        if ctx.has_attr("axes"):
            params["axes"] = [int(v) for v in ctx.attr("axes")]
    else:
        if len(inputs) < 3:
            ctx.fail("Slice needs data, starts and ends inputs")
        names = ("starts", "ends", "axes", "steps")
        for name, tensor in zip(names, inputs[1:]):
            if tensor is None:
                continue
            known = int_values(ctx, tensor)
            if known is not None:
                params[name] = known
            else:
                _need_values(ctx, tensor, name)
                params.setdefault("tensor_inputs", []).append(name)
                tensors.append(tensor)
    return fold_small(ctx, add_op(ctx, "slice", [data, *tensors], params))


@register_importer("Split")
def import_split(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    data = inputs[0]
    count = len(ctx.node.output)
    params: dict[str, Any] = {"axis": int(ctx.attr("axis", 0)), "num_outputs": count}
    tensors = [data]
    split_input = inputs[1] if len(inputs) > 1 else None
    if ctx.has_attr("num_outputs") and int(ctx.attr("num_outputs")) != count:
        ctx.fail(f"num_outputs is {ctx.attr('num_outputs')} but the node has {count} outputs")
    if ctx.has_attr("split"):
        params["split"] = [int(s) for s in ctx.attr("split")]
    elif split_input is not None:
        known = int_values(ctx, split_input)
        if known is not None:
            params["split"] = known
        else:
            _need_values(ctx, split_input, "split sizes")
            tensors.append(split_input)
    return add_op(ctx, "split", tensors, params, num_outputs=count)


# --- reshaping -----------------------------------------------------------------------------------
def _axes(ctx: ImportContext, inputs: list[Any]) -> tuple[list[int] | None, list[Any]]:
    """Squeeze/Unsqueeze axes: an attribute before opset 13, an optional input from 13 on."""
    if ctx.opset < 13:
        axes = ctx.attr("axes")
        return (None if axes is None else [int(a) for a in axes]), []
    tensor = inputs[1] if len(inputs) > 1 else None
    if tensor is None:
        return None, []
    known = int_values(ctx, tensor)
    if known is not None:
        return known, []
    _need_values(ctx, tensor, "axes")
    return None, [tensor]


@register_importer("Squeeze")
def import_squeeze(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    axes, tensors = _axes(ctx, inputs)
    params = {} if axes is None else {"axes": axes}
    return fold_small(ctx, add_op(ctx, "squeeze", [inputs[0], *tensors], params))


@register_importer("Unsqueeze")
def import_unsqueeze(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    axes, tensors = _axes(ctx, inputs)
    if axes is None and not tensors:
        ctx.fail("Unsqueeze needs axes")
    params = {} if axes is None else {"axes": axes}
    return fold_small(ctx, add_op(ctx, "unsqueeze", [inputs[0], *tensors], params))


@register_importer("Flatten")
def import_flatten(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    return add_op(ctx, "flatten", [inputs[0]], {"axis": int(ctx.attr("axis", 1))})


@register_importer("Expand")
def import_expand(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    _need_values(ctx, inputs[1], "shape")
    return add_op(ctx, "expand", inputs)


@register_importer("Tile")
def import_tile(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    _need_values(ctx, inputs[1], "repeats")
    return add_op(ctx, "tile", inputs)


# --- generators ----------------------------------------------------------------------------------
@register_importer("Range")
def import_range(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    known = [ctx.value_of(t) for t in inputs]
    if ctx.dtype_of(inputs[0]) not in (DataType.INT32, DataType.INT64):
        # No engine operator computes a floating-point range (its length depends on the values).
        if any(v is None for v in known):
            ctx.fail("a floating-point Range must be known at import time: start, limit and delta must be constants")
        scalars = [np.asarray(v).reshape(-1)[0] for v in known if v is not None]
        return [ctx.constant(np.arange(*scalars, dtype=np.result_type(*known)))]
    for name, tensor in zip(("start", "limit", "delta"), inputs):
        _need_values(ctx, tensor, name)
    outputs = add_op(ctx, "range", inputs)
    length = ctx.dims_of(outputs[0])[0]
    return ctx.folded(outputs) if 0 <= length <= _FOLD_LIMIT else outputs


@register_importer("ConstantOfShape")
def import_constant_of_shape(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    value = ctx.attr("value")
    fill = np.zeros(1, np.float32) if value is None else to_supported_array(np.asarray(value).reshape(-1))
    if fill is None or fill.size != 1:
        ctx.fail(f"the value attribute must hold one element of a supported type, got {value!r}")
    shape = int_values(ctx, inputs[0])
    if shape is not None and int(np.prod(shape, dtype=np.int64)) <= _FOLD_LIMIT:
        return [ctx.constant(np.full(shape, fill[0], dtype=fill.dtype))]
    _need_values(ctx, inputs[0], "shape")
    return add_op(ctx, "constant_of_shape", inputs, weights={"value": fill})
