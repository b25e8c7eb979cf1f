"""ONNX importers: QuantizeLinear and DequantizeLinear (explicit quantization, TensorRT's way).

TensorRT takes Q/DQ pairs with a zero point of 0 only (symmetric quantization); so does plugrt,
and a non-zero zero point is an import error naming it. Scales are per tensor, per axis or (opset
21 on) per block; the quantized type is the zero point's, else ``output_dtype``, else UINT8.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto

from ...ops.quantize import QUANTIZED
from ..types import NARROW, onnx_type_name
from .base import ImportContext, register_importer

__all__: list[str] = []

_INTEGER_NAMES: dict[int, str] = {
    TensorProto.INT8: "int8",
    TensorProto.UINT8: "uint8",
    TensorProto.INT16: "int16",
    TensorProto.UINT16: "uint16",
}


def _quantized_name(ctx: ImportContext, elem_type: int) -> str:
    name = _INTEGER_NAMES.get(elem_type) or NARROW.get(elem_type)
    if name is None or name not in QUANTIZED:
        ctx.fail(f"quantizing to {onnx_type_name(elem_type)} is not supported")
    return name


def _check_zero_point(ctx: ImportContext, inputs: list[Any]) -> int | None:
    """The zero point's ONNX type (None without one); a zero point that is not all 0 fails."""
    if len(inputs) < 3 or inputs[2] is None:
        return None
    value = ctx.value_of(inputs[2])
    if value is None:
        ctx.fail("the zero point is computed at run time; plugrt, like TensorRT, needs a zero point of 0")
    values = np.asarray(value, dtype=np.float64)
    if np.any(values != 0):
        shown = values.reshape(-1)[:4].tolist()
        ctx.fail(
            f"zero point {shown}{' ...' if values.size > 4 else ''} is not 0; plugrt, like TensorRT, quantizes "
            "symmetrically (zero point 0): requantize the model with symmetric scales"
        )
    declared = ctx.declared_type(ctx.node.input[2])
    return declared


def _params(ctx: ImportContext, x: Any, scale: Any) -> dict[str, Any]:
    rank = ctx.rank_of(x)
    params: dict[str, Any] = {"block_size": int(ctx.attr("block_size", 0))}
    if params["block_size"] < 0:
        ctx.fail(f"block_size must be >= 0, got {params['block_size']}")
    if ctx.rank_of(scale) > 0 and rank > 0:
        params["axis"] = ctx.axis(int(ctx.attr("axis", 1)), rank)
    return params


def _operands(ctx: ImportContext, inputs: list[Any]) -> tuple[Any, Any]:
    if len(inputs) < 2 or inputs[0] is None or inputs[1] is None:
        ctx.fail("the input and the scale are required")
    return inputs[0], inputs[1]


@register_importer("QuantizeLinear")
def import_quantize_linear(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    x, scale = _operands(ctx, inputs)
    declared = _check_zero_point(ctx, inputs)
    if declared is None:
        declared = int(ctx.attr("output_dtype", 0)) or TensorProto.UINT8
    params = _params(ctx, x, scale)
    params.update(to=_quantized_name(ctx, declared), saturate=bool(ctx.attr("saturate", 1)))
    return ctx.op("quantize", [x, scale], params)


@register_importer("DequantizeLinear")
def import_dequantize_linear(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    x, scale = _operands(ctx, inputs)
    _check_zero_point(ctx, inputs)
    return ctx.op("dequantize", [x, scale], _params(ctx, x, scale))
