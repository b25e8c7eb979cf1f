"""The triangle operator (ONNX Trilu): keeps the upper or lower triangle of the last two dimensions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import ShapeError
from ..core.types import DataType
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .elementwise import label
from .params import param
from .tensor_common import expect_index_type, expect_input_count

__all__ = ["TriluOperator"]


@register_operator
class TriluOperator(Operator):
    """params: ``upper`` (default True) and ``k`` (diagonal offset, default 0) unless given as input 1.

    ``k`` does not change the shape, so as an input it may be computed at run time.
    """

    kind = "trilu"
    upper: bool = param(bool, default=True)
    k: int = param(int, default=0)

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_input_count(self, len(input_types), 1, 2)
        if len(input_types) == 2:
            expect_index_type(self, input_types[1], "k")
        return [input_types[0]]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_input_count(self, len(input_shapes), 1, 2)
        if len(input_shapes[0]) < 2:
            raise ShapeError(f"{label(self)}: trilu needs rank >= 2, got {len(input_shapes[0])}")
        return [list(input_shapes[0])]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x, out = inputs[0], outputs[0]
        k = self.input_ints(1, inputs[1])[0] if len(inputs) == 2 else self.k
        rows, cols = x.shape[-2:]
        offset = xp.arange(cols).reshape(1, cols) - xp.arange(rows).reshape(rows, 1)
        keep = offset >= k if self.upper else offset <= k
        out[...] = xp.where(keep, x, xp.zeros((), dtype=x.dtype))
