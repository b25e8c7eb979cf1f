"""Data-dependent selection: ``nonzero`` (ONNX NonZero) and ``compress`` (ONNX Compress).

Their output lengths depend on the data: each declares a size output (a 0-d
INT64 tensor, output 1) bounded by the input's size; the engine sizes buffers
by that bound and learns the real shape after the kernel has run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import ShapeError, TypeMismatchError
from ..core.types import DataType
from ..shape import DimensionOperation, constant, operation
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .elementwise import expect_inputs, label
from .params import param
from .tensor_common import normalize_axis, volume

__all__ = ["CompressOperator", "NonZeroOperator"]


def _write_prefix(out: Any, result: Any) -> None:
    """Write ``result`` contiguously at the start of ``out`` (sized for the upper bound)."""
    out.reshape(-1)[: result.size] = result.reshape(-1)


@register_operator
class NonZeroOperator(Operator):
    """Output 0: ``[rank, count]`` INT64 indices of non-zero elements, row-major; output 1: ``count``."""

    kind = "nonzero"

    @property
    def num_outputs(self) -> int:
        return 2

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 1)
        return [DataType.INT64, DataType.INT64]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 1)
        upper = volume(input_shapes[0])
        count = self.declare_size(1, operation(DimensionOperation.CEIL_DIV, upper, constant(2)), upper)
        return [[constant(len(input_shapes[0])), count], []]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x = inputs[0]
        found = xp.stack(xp.nonzero(x)) if x.ndim else xp.zeros((0, int(bool(x))), dtype=xp.int64)
        _write_prefix(outputs[0], found.astype(xp.int64))
        outputs[1][...] = found.shape[1]


@register_operator
class CompressOperator(Operator):
    """Keeps the slices along ``axis`` (the elements of the flattened input when ``axis`` is None)
    whose condition is true; a shorter condition drops the rest. Output 1 is the kept count."""

    kind = "compress"
    axis: int | None = param(int, default=None)

    @property
    def num_outputs(self) -> int:
        return 2

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 2)
        if input_types[1] != DataType.BOOL:
            raise TypeMismatchError(f"{label(self)}: the condition must be BOOL, got {input_types[1].name}")
        return [input_types[0], DataType.INT64]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 2)
        shape, condition = input_shapes
        if len(condition) != 1:
            raise ShapeError(f"{label(self)}: the condition must be 1-D, got rank {len(condition)}")
        if self.axis is None:
            upper = operation(DimensionOperation.MIN, volume(shape), condition[0])
            return [[self.declare_size(1, upper, upper)], []]
        axis = normalize_axis(self, self.axis, len(shape))
        upper = operation(DimensionOperation.MIN, shape[axis], condition[0])
        count = self.declare_size(1, upper, upper)
        return [[count if k == axis else d for k, d in enumerate(shape)], []]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x, condition = inputs
        if self.axis is None:
            kept = xp.compress(condition[: x.size], x.reshape(-1))
        else:
            axis = normalize_axis(self, self.axis, x.ndim)
            kept = xp.compress(condition[: x.shape[axis]], x, axis=axis)
        _write_prefix(outputs[0], kept)
        outputs[1][...] = kept.size if self.axis is None else kept.shape[axis]
