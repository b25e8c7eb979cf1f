"""``quantize`` and ``dequantize`` (ONNX QuantizeLinear / DequantizeLinear, TensorRT's explicit quantization).

As in TensorRT the zero point is 0: ``quantize`` computes ``saturate(round(x / scale))`` (round half
to even) and ``dequantize`` computes ``x * scale``. The scale is one value (per tensor), one value
per index of ``axis`` (per channel), or, with ``block_size``, one value per block of that many
elements along ``axis``. The quantized type is a :data:`QUANTIZED` name: the integer types are held
in INT8, UINT8 or INT32, the FP8/FP4 ones in FLOAT (see :mod:`plugrt.ops.storage_cast`).

``dynamic_quantize`` (ONNX DynamicQuantizeLinear) is the asymmetric UINT8 quantization whose
scale and zero point come from the data, computed on the device (no value leaves it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import NetworkError, ShapeError, TypeMismatchError
from ..core.types import DataType
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .elementwise import expect_inputs, label
from .storage_cast import round_to_narrow

__all__ = ["QUANTIZED", "DequantizeOperator", "DynamicQuantizeOperator", "QuantizeOperator"]

#: quantized type -> (plugrt type holding it, lowest, highest; None for the float types)
QUANTIZED: dict[str, tuple[DataType, int | None, int | None]] = {
    "int8": (DataType.INT8, -128, 127),
    "uint8": (DataType.UINT8, 0, 255),
    "int16": (DataType.INT32, -32768, 32767),
    "uint16": (DataType.INT32, 0, 65535),
    "int4": (DataType.INT8, -8, 7),
    "uint4": (DataType.UINT8, 0, 15),
    "int2": (DataType.INT8, -2, 1),
    "uint2": (DataType.UINT8, 0, 3),
    "float8_e4m3fn": (DataType.FLOAT, None, None),
    "float8_e4m3fnuz": (DataType.FLOAT, None, None),
    "float8_e5m2": (DataType.FLOAT, None, None),
    "float8_e5m2fnuz": (DataType.FLOAT, None, None),
    "float4_e2m1fn": (DataType.FLOAT, None, None),
}
_FLOATS = (DataType.FLOAT, DataType.HALF)


def _scale_for(op: Operator, xp: Any, scale: Any, shape: tuple[int, ...]) -> Any:
    """``scale`` broadcastable against a tensor of ``shape`` (per tensor, per axis or per block)."""
    if scale.size == 1 and op.params.get("block_size", 0) == 0:
        return scale.reshape(())
    axis = int(op.params.get("axis", 1)) % len(shape)
    block = int(op.params.get("block_size", 0))
    if block:
        full = xp.repeat(scale, block, axis=axis)
        return full[tuple(slice(0, n) for n in shape)]
    view = [1] * len(shape)
    view[axis] = shape[axis]
    return scale.reshape(view)


def _check_scale(op: Operator, x: ShapeExprs, scale: ShapeExprs) -> None:
    block = int(op.params.get("block_size", 0))
    if not block and len(scale) == 0:
        return
    if not block:
        if len(scale) != 1:
            raise ShapeError(f"{label(op)}: a per-axis scale must be 1-D, got rank {len(scale)}")
        return
    if len(scale) != len(x):
        raise ShapeError(f"{label(op)}: a blocked scale must have the input's rank {len(x)}, got {len(scale)}")


class _Scaled(Operator):
    """What quantize and dequantize share: inputs ``x, scale`` and an output of ``x``'s shape."""

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 2)
        _check_scale(self, input_shapes[0], input_shapes[1])
        return [list(input_shapes[0])]


@register_operator
class QuantizeOperator(_Scaled):
    """Inputs ``x, scale``; params ``to`` (a :data:`QUANTIZED` name), ``axis``, ``block_size``, ``saturate``."""

    kind = "quantize"

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 2)
        name = self.param("to")
        if name not in QUANTIZED:
            raise NetworkError(f"{label(self)}: unknown quantized type {name!r}; known: {sorted(QUANTIZED)}")
        if input_types[0] not in _FLOATS or input_types[1] not in _FLOATS:
            raise TypeMismatchError(
                f"{label(self)}: quantize takes a FLOAT or HALF input and scale, got {input_types[0].name} and "
                f"{input_types[1].name}"
            )
        return [QUANTIZED[name][0]]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x, scale = inputs
        name = self.param("to")
        _, low, high = QUANTIZED[name]
        scaled = x.astype(np.float32) / _scale_for(self, xp, scale.astype(np.float32), tuple(x.shape))
        if low is None:  # FP8 / FP4: the type's own rounding
            host = scaled if xp is np else xp.asnumpy(scaled)
            narrow = round_to_narrow(np.asarray(host), name, bool(self.params.get("saturate", True)))
            outputs[0][...] = xp.asarray(narrow.astype(np.float32))
            return
        outputs[0][...] = xp.clip(xp.rint(scaled), low, high).astype(outputs[0].dtype)


@register_operator
class DequantizeOperator(_Scaled):
    """Inputs ``x, scale``; params ``axis`` and ``block_size``; the result has the scale's type."""

    kind = "dequantize"

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 2)
        if input_types[1] not in _FLOATS:
            raise TypeMismatchError(f"{label(self)}: the scale must be FLOAT or HALF, got {input_types[1].name}")
        return [input_types[1]]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x, scale = inputs
        expanded = _scale_for(self, xp, scale.astype(np.float32), tuple(x.shape))
        outputs[0][...] = (x.astype(np.float32) * expanded).astype(outputs[0].dtype)


@register_operator
class DynamicQuantizeOperator(Operator):
    """ONNX DynamicQuantizeLinear: input ``x`` (FLOAT); outputs ``y`` (UINT8), ``y_scale`` (FLOAT, 0-d)
    and ``y_zero_point`` (UINT8, 0-d).

    With ``low = min(0, min(x))`` and ``high = max(0, max(x))``: ``y_scale = (high - low) / 255``
    (1 when ``high == low``, where ONNX's formula divides by zero: as onnxruntime does), ``y_zero_point =
    rint(clip(-low / y_scale, 0, 255))`` and ``y = clip(rint(x / y_scale) + y_zero_point, 0, 255)``,
    float32 arithmetic rounded half to even.
    """

    kind = "dynamic_quantize"

    @property
    def num_outputs(self) -> int:
        return 3

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 1)
        if input_types[0] != DataType.FLOAT:
            raise TypeMismatchError(f"{label(self)}: DynamicQuantizeLinear takes FLOAT, got {input_types[0].name}")
        return [DataType.UINT8, DataType.FLOAT, DataType.UINT8]

    def output_shapes(
        self, input_shapes: Sequence[ShapeExprs], input_values: Sequence[ShapeExprs | None]
    ) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 1)
        return [list(input_shapes[0]), [], []]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x = inputs[0]
        f32 = np.float32
        zero = xp.zeros((), dtype=f32)
        high = xp.maximum(x.max(), zero) if x.size else zero
        low = xp.minimum(x.min(), zero) if x.size else zero
        scale = xp.where(high == low, f32(255), high - low).astype(f32) / f32(255)
        zero_point = xp.rint(xp.clip(f32(0) - low / scale, 0, 255))
        outputs[0][...] = xp.clip(xp.rint(x / scale) + zero_point, 0, 255).astype(np.uint8)
        outputs[1][...] = scale
        outputs[2][...] = zero_point.astype(np.uint8)
