"""The shape and size operators: a tensor's dimensions (or element count) as an INT64 tensor.

Their outputs are shape tensors: the values are the input's dimension
expressions, so a chain such as Shape → Gather → Concat → Reshape stays
symbolic when the network has dynamic shapes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.types import DataType
from ..shape import constant
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .elementwise import expect_inputs
from .params import param
from .tensor_common import volume

__all__ = ["ShapeOperator", "SizeOperator"]


class _ShapeInfo(Operator):
    """What shape and size share: one input, an INT64 output whose values are known at build time."""

    reads_data = False

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 1)
        return [DataType.INT64]


@register_operator
class ShapeOperator(_ShapeInfo):
    """``out = shape(x)[start:end]`` (INT64); params: ``start`` (int, default 0), ``end`` (int or None).

    Negative ``start``/``end`` count from the end; both are clamped to ``[0, rank]`` (ONNX's rule).
    """

    kind = "shape"
    start: int = param(int, default=0)
    end: int | None = param(int, default=None)

    def _range(self, rank: int) -> tuple[int, int]:
        start = self.start + rank if self.start < 0 else self.start
        end = rank if self.end is None else (self.end + rank if self.end < 0 else self.end)
        start, end = min(max(start, 0), rank), min(max(end, 0), rank)
        return start, max(start, end)

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 1)
        start, end = self._range(len(input_shapes[0]))
        return [[constant(end - start)]]

    def output_values(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs | None]:
        start, end = self._range(len(input_shapes[0]))
        return [list(input_shapes[0][start:end])]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        shape = inputs[0].shape
        start, end = self._range(len(shape))
        outputs[0][...] = xp.asarray(shape[start:end], dtype=xp.int64)


@register_operator
class SizeOperator(_ShapeInfo):
    """``out = number of elements of x`` (0-d INT64)."""

    kind = "size"

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 1)
        return [[]]

    def output_values(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs | None]:
        return [[volume(input_shapes[0])]]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        outputs[0][...] = inputs[0].size
