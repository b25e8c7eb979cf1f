"""The cumulative-sum operator (ONNX CumSum, and CumProd with ``product``): running sums (products) along an
axis, optionally exclusive or reversed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import TypeMismatchError
from ..core.types import DataType
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .elementwise import NUMERIC_TYPES, label
from .params import param
from .tensor_common import along, expect_index_type, expect_input_count, normalize_axis

__all__ = ["CumSumOperator"]


@register_operator
class CumSumOperator(Operator):
    """params: ``exclusive``, ``reverse``, ``product`` (running products) and ``axis`` unless given as input 1
    (a 0-d int tensor).

    The axis does not change the shape, so as an input it may be computed at run time.
    """

    kind = "cumsum"
    exclusive: bool = param(bool, default=False)
    reverse: bool = param(bool, default=False)
    product: bool = param(bool, default=False)
    axis: int | None = param(int, default=None)

    def _count(self) -> int:
        return 1 if self.axis is not None else 2

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_input_count(self, len(input_types), self._count())
        if input_types[0] not in NUMERIC_TYPES:
            raise TypeMismatchError(f"{label(self)}: cumsum needs a numeric input, got {input_types[0].name}")
        if len(input_types) == 2:
            expect_index_type(self, input_types[1], "the axis")
        return [input_types[0]]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_input_count(self, len(input_shapes), self._count())
        if self.axis is not None:
            normalize_axis(self, self.axis, len(input_shapes[0]))
        return [list(input_shapes[0])]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x, out = inputs[0], outputs[0]
        axis = self.axis if self.axis is not None else self.input_ints(1, inputs[1])[0]
        axis = normalize_axis(self, axis, x.ndim)
        source = xp.flip(x, axis=axis) if self.reverse else x
        target = xp.flip(out, axis=axis) if self.reverse else out
        running = xp.cumprod if self.product else xp.cumsum
        if self.exclusive:
            target[along(axis, slice(0, 1))] = 1 if self.product else 0
            running(
                source[along(axis, slice(0, -1))], axis=axis, dtype=out.dtype, out=target[along(axis, slice(1, None))]
            )
        else:
            running(source, axis=axis, dtype=out.dtype, out=target)
