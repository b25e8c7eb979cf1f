"""The one-hot operator (ONNX OneHot): a new axis of length ``depth`` with ``on`` at each index, ``off`` elsewhere.

Negative indices count from ``depth``; indices outside ``[-depth, depth)``
give a row of ``off`` values. Float indices are truncated to integers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import ShapeError
from ..core.types import DataType
from ..shape import IDimensionExpr, constant
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .elementwise import label
from .params import param
from .tensor_common import expect_index_type, expect_input_count, values_of

__all__ = ["OneHotOperator"]


@register_operator
class OneHotOperator(Operator):
    """Inputs: indices, values (``[off, on]``) and, unless ``depth`` is a parameter, depth (0-d or 1-element int).

    params: ``axis`` (default -1: the new last axis), ``depth`` (int, optional).
    """

    kind = "one_hot"
    axis: int = param(int, default=-1)
    depth: int | None = param(int, default=None)

    def _count(self) -> int:
        return 2 if self.depth is not None else 3

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_input_count(self, len(input_types), self._count())
        if len(input_types) == 3:
            expect_index_type(self, input_types[2], "the depth")
        return [input_types[1]]

    def _axis(self, rank: int) -> int:
        axis = self.axis + rank + 1 if self.axis < 0 else self.axis
        if not 0 <= axis <= rank:
            raise ShapeError(f"{label(self)}: one-hot axis {self.axis} is out of range for indices of rank {rank}")
        return axis

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_input_count(self, len(input_shapes), self._count())
        depth: IDimensionExpr
        if self.depth is not None:
            depth = constant(self.depth)
        else:
            values = values_of(self, input_values, 2, "depth")
            if len(values) != 1:
                raise ShapeError(f"{label(self)}: depth must hold one value, got {len(values)}")
            depth = values[0]
        shape = list(input_shapes[0])
        axis = self._axis(len(shape))
        return [[*shape[:axis], depth, *shape[axis:]]]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        indices, values = inputs[0], inputs[1]
        out = outputs[0]
        axis = self._axis(indices.ndim)
        depth = out.shape[axis]
        index = indices.astype(xp.int64)
        index = xp.where(index < 0, index + depth, index)
        positions = xp.arange(depth).reshape((depth,) + (1,) * (indices.ndim - axis))
        hot = xp.expand_dims(index, axis) == positions
        flat = values.reshape(-1)
        out[...] = xp.where(hot, flat[1], flat[0])
