"""The split operator (ONNX Split): cuts a tensor into consecutive parts along one axis.

The part sizes come from the ``split`` parameter, from a second input whose
values are known at build time, or, with neither, from ``num_outputs`` equal
parts: each ``ceil(d / n)`` long, the last one taking what is left (ONNX 18's
rule, which is the even split when ``n`` divides ``d``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import ShapeError
from ..core.types import DataType
from ..shape import DimensionOperation, IDimensionExpr, constant, operation
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .elementwise import label
from .params import ints, param
from .tensor_common import along, constant_ints, expect_index_type, expect_input_count, normalize_axis, values_of

__all__ = ["SplitOperator"]


@register_operator
class SplitOperator(Operator):
    """params: ``axis`` (default 0), ``num_outputs`` (int) and optionally ``split`` (list of sizes).

    With two inputs, the second holds the sizes.
    """

    kind = "split"
    axis: int = param(int, default=0)
    count: int = param(int, key="num_outputs", minimum=1)
    split: list[int] | None = param(ints, default=None)

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        self._offsets: list[int] = []

    @property
    def num_outputs(self) -> int:
        return self.count

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_input_count(self, len(input_types), 1, 2)
        if len(input_types) == 2:
            expect_index_type(self, input_types[1], "the split sizes")
        return [input_types[0]] * self.count

    def _sizes(self, dim: IDimensionExpr, input_values: Sequence[ShapeExprs | None]) -> list[IDimensionExpr]:
        if len(input_values) == 2:
            sizes = values_of(self, input_values, 1, "split sizes")
        elif self.split is not None:
            sizes = [constant(s) for s in self.split]
        else:
            chunk = operation(DimensionOperation.CEIL_DIV, dim, constant(self.count))
            used = operation(DimensionOperation.PROD, chunk, constant(self.count - 1))
            return [chunk] * (self.count - 1) + [operation(DimensionOperation.SUB, dim, used)]
        if len(sizes) != self.count:
            raise ShapeError(f"{label(self)}: {len(sizes)} split sizes for {self.count} outputs")
        known = constant_ints(sizes)
        if known is not None and (
            any(s < 0 for s in known) or (dim.is_constant() and sum(known) != dim.get_constant_value())
        ):
            raise ShapeError(f"{label(self)}: split sizes {known} must be >= 0 and add up to the axis length {dim}")
        return sizes

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_input_count(self, len(input_shapes), 1, 2)
        shape = input_shapes[0]
        axis = normalize_axis(self, self.axis, len(shape))
        sizes = self._sizes(shape[axis], input_values)
        return [[size if k == axis else d for k, d in enumerate(shape)] for size in sizes]

    def output_values(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs | None]:
        data = input_values[0]
        if data is None or len(input_shapes[0]) != 1:
            return [None] * self.count
        sizes = constant_ints(self._sizes(constant(len(data)), input_values))
        if sizes is None:
            return [None] * self.count
        offsets = np.cumsum([0, *sizes]).tolist()
        return [list(data[offsets[i] : offsets[i + 1]]) for i in range(self.count)]

    def prepare(self, input_shapes: Sequence[tuple[int, ...]], output_shapes: Sequence[tuple[int, ...]]) -> None:
        axis = normalize_axis(self, self.axis, len(input_shapes[0]))
        self._offsets = np.cumsum([0] + [s[axis] for s in output_shapes]).tolist()

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x = inputs[0]
        axis = self.axis + x.ndim if self.axis < 0 else self.axis
        if len(self._offsets) != self.count + 1:
            self.prepare([x.shape], [o.shape for o in outputs])
        for out, start, stop in zip(outputs, self._offsets, self._offsets[1:]):
            out[...] = x[along(axis, slice(start, stop))]
