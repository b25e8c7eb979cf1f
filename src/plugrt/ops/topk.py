"""Selection along an axis: ``topk`` (ONNX TopK) and ``arg_reduce`` (ONNX ArgMax / ArgMin).

Ties go to the lower index, as ONNX asks (``select_last_index`` flips that for
arg_reduce). Indices are INT64.
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
from .tensor_common import constant_ints, expect_index_type, expect_input_count, normalize_axis, values_of

__all__ = ["ArgReduceOperator", "TopKOperator", "sort_order"]


def sort_order(xp: Any, x: Any, axis: int, descending: bool) -> Any:
    """Indices that sort ``x`` along ``axis``; equal values keep their order (lower index first)."""
    if not descending:
        return xp.argsort(x, axis=axis, kind="stable")
    flipped = xp.flip(x, axis=axis)
    order = xp.flip(xp.argsort(flipped, axis=axis, kind="stable"), axis=axis)
    return x.shape[axis] - 1 - order


@register_operator
class TopKOperator(Operator):
    """The ``k`` largest (or smallest) elements along ``axis`` and their indices.

    params: ``axis`` (default -1), ``largest`` (default True), ``sorted`` (default True; results are
    always sorted), and ``k`` unless it is given as input 1.
    """

    kind = "topk"
    axis: int = param(int, default=-1)
    largest: bool = param(bool, default=True)
    k: int | None = param(int, default=None)

    @property
    def num_outputs(self) -> int:
        return 2

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_input_count(self, len(input_types), 1 if self.k is not None else 2)
        if len(input_types) == 2:
            expect_index_type(self, input_types[1], "k")
        return [input_types[0], DataType.INT64]

    def _k(self, input_values: Sequence[ShapeExprs | None]) -> IDimensionExpr:
        if self.k is not None:
            return constant(self.k)
        k = values_of(self, input_values, 1, "k")
        if len(k) != 1:
            raise ShapeError(f"{label(self)}: k must hold one value, got {len(k)}")
        return k[0]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_input_count(self, len(input_shapes), 1 if self.k is not None else 2)
        shape = list(input_shapes[0])
        axis = normalize_axis(self, self.axis, len(shape))
        k = self._k(input_values)
        known = constant_ints([k, shape[axis]])
        if known is not None and not 0 <= known[0] <= known[1]:
            raise ShapeError(f"{label(self)}: k = {known[0]} must be in [0, {known[1]}] (axis {axis} of {shape})")
        shape[axis] = k
        return [shape, list(shape)]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x = inputs[0]
        values, indices = outputs
        axis = self.axis + x.ndim if self.axis < 0 else self.axis
        k = values.shape[axis]
        if len(inputs) == 2 and (given := self.input_ints(1, inputs[1])[0]) != k:
            raise ValueError(f"k = {given} differs from the planned {k}")
        order = sort_order(xp, x, axis, self.largest)
        picked = xp.take(order, xp.arange(k), axis=axis)
        indices[...] = picked
        values[...] = xp.take_along_axis(x, picked, axis=axis)


@register_operator
class ArgReduceOperator(Operator):
    """Index of the maximum (``op="max"``) or minimum (``op="min"``) along ``axis`` (INT64).

    params: ``op``, ``axis`` (default 0), ``keepdims`` (default True), ``select_last_index`` (default False).
    """

    kind = "arg_reduce"
    op: str = param(choices=("max", "min"))
    axis: int = param(int, default=0)
    keepdims: bool = param(bool, default=True)
    last: bool = param(bool, key="select_last_index", default=False)

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_input_count(self, len(input_types), 1)
        return [DataType.INT64]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_input_count(self, len(input_shapes), 1)
        shape = list(input_shapes[0])
        axis = normalize_axis(self, self.axis, len(shape))
        if self.keepdims:
            return [[constant(1) if k == axis else d for k, d in enumerate(shape)]]
        return [[d for k, d in enumerate(shape) if k != axis]]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x, out = inputs[0], outputs[0]
        axis = self.axis + x.ndim if self.axis < 0 else self.axis
        function = xp.argmax if self.op == "max" else xp.argmin
        if self.last:
            found = x.shape[axis] - 1 - function(xp.flip(x, axis=axis), axis=axis, keepdims=True)
        else:
            found = function(x, axis=axis, keepdims=True)
        out[...] = found.reshape(out.shape)

    def direct_launch(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any) -> Any:
        """``x.argmax(axis, out)`` into a view of the output without the reduced axis (NumPy, first index)."""
        x, out = inputs[0], outputs[0]
        if xp is not np or self.last or not out.flags.c_contiguous or out.dtype != np.intp or x.ndim == 0:
            return None
        axis = self.axis + x.ndim if self.axis < 0 else self.axis
        if x.shape[axis] == 0:
            return None
        target = out.reshape(x.shape[:axis] + x.shape[axis + 1 :])
        return (x.argmax if self.op == "max" else x.argmin), (axis, target)
