"""ONNX importers: ops that map onto TensorRT's basic layers.

This module holds the layout and value ops (Identity, Constant, Cast,
CastLike, Reshape, Transpose, Concat, Dropout) and imports its siblings:
``basic_math`` (elementwise, MatMul, Clip), ``basic_unary`` (unary ops and
activations) and ``basic_reduce`` (reductions and the softmax family).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import numpy_helper

from ...core.logger import Severity
from ...core.types import DataType
from ...network.tensor import ITensor
from ..types import NARROW, WIDENED, onnx_type_name, to_datatype
from . import basic_math, basic_reduce, basic_unary  # noqa: F401  (imported for registration)
from .base import ImportContext, register_importer

__all__: list[str] = []


@register_importer("Identity")
def import_identity(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    return [ctx.input(inputs)]


@register_importer("Constant")
def import_constant(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    given = [a.name for a in ctx.node.attribute]
    if len(given) != 1:
        ctx.fail(f"Constant needs exactly one value attribute, got {given or 'none'}")
    name = given[0]
    if name == "value":
        value = ctx.attr("value")
    elif name == "value_float":
        value = np.float32(ctx.attr(name))
    elif name == "value_floats":
        value = np.asarray(ctx.attr(name), dtype=np.float32)
    elif name == "value_int":
        value = np.int64(ctx.attr(name))
    elif name == "value_ints":
        value = np.asarray(ctx.attr(name), dtype=np.int64)
    elif name == "sparse_value":
        value = _dense(ctx, ctx._attrs[name].sparse_tensor)
    elif name in ("value_string", "value_strings"):
        ctx.fail("string constants are not supported (plugrt, like TensorRT, has no string tensors)")
    else:
        ctx.fail(f"unknown Constant attribute {name!r}")
    array = np.asarray(value)
    if array.dtype.kind in "OSU":
        ctx.fail("string constants are not supported (plugrt, like TensorRT, has no string tensors)")
    return [ctx.constant(array)]


def _dense(ctx: ImportContext, sparse: Any) -> np.ndarray:
    values = numpy_helper.to_array(sparse.values)
    indices = numpy_helper.to_array(sparse.indices).astype(np.int64)
    shape = tuple(int(d) for d in sparse.dims)
    dense = np.zeros(shape, dtype=values.dtype)
    if indices.ndim == 1:
        dense.reshape(-1)[indices] = values
    elif indices.ndim == 2:
        dense[tuple(indices.T)] = values
    else:
        ctx.fail(f"sparse_value indices have rank {indices.ndim}; ONNX allows 1 or 2")
    return dense


def _target_type(ctx: ImportContext, elem_type: int) -> DataType:
    dtype = to_datatype(elem_type)
    if dtype is None:
        ctx.fail(f"casting to {onnx_type_name(elem_type)} is not supported")
    if elem_type in WIDENED:
        ctx.log(Severity.INFO, f"plugrt has no {onnx_type_name(elem_type)} tensors; the cast gives {dtype.name}")
    return dtype


def _cast(ctx: ImportContext, x: ITensor, dtype: DataType, elem_type: int | None = None) -> list[Any]:
    narrow = NARROW.get(elem_type) if elem_type is not None else None
    if narrow is not None:  # held in a wider type: the values are rounded to the narrow type's
        saturate = bool(ctx.attr("saturate", 1))
        return ctx.folded(ctx.op("storage_cast", [x], {"narrow": narrow, "saturate": saturate}))
    if ctx.dtype_of(x) == dtype:
        return ctx.folded([ctx.identity(x)])
    return [ctx.cast(x, dtype)]


@register_importer("Cast")
def import_cast(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    x = ctx.input(inputs)
    elem_type = int(ctx.required_attr("to"))
    return _cast(ctx, x, _target_type(ctx, elem_type), elem_type)


@register_importer("CastLike")
def import_cast_like(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    x = ctx.input(inputs)
    if len(inputs) < 2 or inputs[1] is None:
        ctx.fail("CastLike needs the target_type input")
    return _cast(ctx, x, ctx.dtype_of(inputs[1]), ctx.declared_type(ctx.node.input[1]))


@register_importer("Reshape")
def import_reshape(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    data = ctx.input(inputs)
    if len(inputs) < 2 or inputs[1] is None:
        ctx.fail("Reshape needs the shape input")
    shape = inputs[1]
    allow_zero = bool(ctx.attr("allowzero", 0))
    value = ctx.value_of(shape)
    if value is not None:
        dims = [int(d) for d in np.asarray(value).reshape(-1)]
        return ctx.folded([ctx.reshape(data, dims, zero_is_placeholder=not allow_zero)])
    if ctx.values_of(shape) is None:
        ctx.fail(
            "the shape input is computed at run time from data; plugrt needs Reshape's shape known when the "
            "network is built (a constant, or computed from input shapes)"
        )
    return [ctx.reshape(data, shape, zero_is_placeholder=not allow_zero)]


@register_importer("Transpose")
def import_transpose(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    x = ctx.input(inputs)
    rank = ctx.rank_of(x)
    perm = [int(p) for p in ctx.attr("perm", list(range(rank))[::-1])]
    if sorted(ctx.axis(p, rank, "perm entry") for p in perm) != list(range(rank)):
        ctx.fail(f"perm {perm} is not a permutation of the {rank} axes")
    perm = [ctx.axis(p, rank) for p in perm]
    return ctx.folded([ctx.transpose(x, perm)])


@register_importer("Concat")
def import_concat(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    tensors = [t for t in inputs if t is not None]
    if not tensors:
        ctx.fail("Concat needs at least one input")
    rank = ctx.rank_of(tensors[0])
    if rank == 0:
        ctx.fail("Concat inputs must have rank >= 1")
    axis = ctx.axis(ctx.required_attr("axis"), rank)
    types = {ctx.dtype_of(t) for t in tensors}
    if len(types) != 1:
        ctx.fail(f"Concat inputs must have one type, got {', '.join(sorted(t.name for t in types))}")
    layer = ctx.named(ctx.network.add_concatenation(tensors), "concat")
    layer.axis = axis
    return ctx.folded([layer.get_output(0)])


@register_importer("Dropout")
def import_dropout(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    # Inference: the output is the input; the mask is all ones (True from opset 10).
    x = ctx.input(inputs)
    training = inputs[2] if len(inputs) > 2 else None
    if training is not None:
        mode = ctx.value_of(training)
        if mode is None:
            ctx.fail("training_mode is computed at run time; plugrt runs Dropout in inference mode only")
        ratio_tensor = inputs[1] if len(inputs) > 1 else None
        ratio = ctx.value_of(ratio_tensor) if ratio_tensor is not None else np.float32(0.5)
        if bool(np.asarray(mode).reshape(-1)[0]) and (ratio is None or float(np.asarray(ratio).reshape(-1)[0]) != 0):
            ctx.fail("training_mode is true with a non-zero ratio: random dropout is not supported (inference only)")
    outputs: list[Any] = [ctx.identity(x)]
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        mask_type = DataType.BOOL if ctx.opset >= 10 else ctx.dtype_of(x)
        outputs += ctx.op("fill_like", [x], {"value": 1, "to_type": mask_type.name})
    return outputs
