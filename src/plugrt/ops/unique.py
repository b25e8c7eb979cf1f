"""``unique`` (ONNX Unique): the distinct elements (or slices along ``axis``), with where each first
occurs, where each input element went and how often each occurs.

The count of distinct values depends on the data: output 4 is that size (a 0-d INT64 tensor),
bounded by the input's length, and every other output is sized by it (as NonZero's is).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.types import DataType
from ..shape import DimensionOperation, constant, operation
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .elementwise import expect_inputs
from .tensor_common import normalize_axis, volume

__all__ = ["UniqueOperator"]


@register_operator
class UniqueOperator(Operator):
    """Outputs: values, first indices, inverse indices, counts, and the count of distinct values.

    params: ``sorted`` (ascending order, else the order of first occurrence) and ``axis`` (None:
    the flattened input).
    """

    kind = "unique"

    @property
    def num_outputs(self) -> int:
        return 5

    def _axis(self, rank: int) -> int | None:
        axis = self.params.get("axis")
        return None if axis is None else normalize_axis(self, int(axis), rank)

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 1)
        return [input_types[0], DataType.INT64, DataType.INT64, DataType.INT64, DataType.INT64]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 1)
        shape = list(input_shapes[0])
        axis = self._axis(len(shape))
        length = volume(shape) if axis is None else shape[axis]
        count = self.declare_size(4, operation(DimensionOperation.CEIL_DIV, length, constant(2)), length)
        values = [count] if axis is None else [count if k == axis else d for k, d in enumerate(shape)]
        return [values, [count], [length], [count], []]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x = inputs[0] if xp is np else xp.asnumpy(inputs[0])
        axis = self._axis(x.ndim)
        source = x.reshape(-1) if axis is None else x
        values, first, inverse, counts = np.unique(
            source, return_index=True, return_inverse=True, return_counts=True, axis=axis
        )
        inverse = inverse.reshape(-1)
        if not self.params.get("sorted", True):  # the order in which values first occur
            order = np.argsort(first, kind="stable")
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size)
            values = np.take(values, order, axis=0 if axis is None else axis)
            first, counts, inverse = first[order], counts[order], rank[inverse]
        results = [values, first, inverse, counts]
        for out, result in zip(outputs, results):
            flat = np.ascontiguousarray(result).reshape(-1).astype(out.dtype, copy=False)
            out.reshape(-1)[: flat.size] = flat if xp is np else xp.asarray(flat)
        outputs[4][...] = int(first.size)
