"""Reshapes that keep the element order: ``squeeze``, ``unsqueeze`` and ``flatten`` (ONNX semantics).

Squeeze and unsqueeze take their axes from the ``axes`` parameter or from a
second input known at build time. They keep shape-tensor values, so a 0-d
dimension picked by ``Gather`` can be unsqueezed and concatenated into a shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import ShapeError
from ..core.types import DataType
from ..shape import constant
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .elementwise import expect_inputs, label
from .params import ints, param
from .tensor_common import constant_ints, expect_index_type, expect_input_count, normalize_axis, values_of, volume

__all__ = ["FlattenOperator", "SqueezeOperator", "UnsqueezeOperator"]


class _AxesReshape(Operator):
    """Shared by squeeze and unsqueeze: axes as a parameter or a second input; values pass through."""

    axes: list[int] | None = param(ints, default=None)

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_input_count(self, len(input_types), 1, 2)
        if len(input_types) == 2:
            expect_index_type(self, input_types[1], "the axes")
        return [input_types[0]]

    def _shape_and_axes(
        self, input_shapes: Sequence[ShapeExprs], input_values: Sequence[ShapeExprs | None]
    ) -> tuple[ShapeExprs, list[int] | None]:
        """Input 0's shape and the axes (None when neither the parameter nor input 1 gives them)."""
        expect_input_count(self, len(input_shapes), 1, 2)
        if len(input_values) < 2:
            return input_shapes[0], self.axes
        axes = constant_ints(values_of(self, input_values, 1, "axes"))
        if axes is None:
            raise ShapeError(f"{label(self)}: the axes must be build-time constants")
        return input_shapes[0], axes

    def output_values(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs | None]:
        value = input_values[0]
        out = self.output_shapes(input_shapes, input_values)[0]
        return [list(value) if value is not None and len(out) <= 1 else None]

    def views_input(self) -> bool:
        """A reshape: the input's elements in the same order."""
        return True

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        out = outputs[0]
        out[...] = inputs[0].reshape(out.shape)


@register_operator
class SqueezeOperator(_AxesReshape):
    """Removes size-1 dimensions: the given ``axes``, or every constant 1 when there are none."""

    kind = "squeeze"

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        shape, axes = self._shape_and_axes(input_shapes, input_values)
        if axes is None:
            if any(not d.is_constant() for d in shape):
                raise ShapeError(
                    f"{label(self)}: squeeze without axes needs every dimension known at build time, got {shape}; "
                    "give the axes"
                )
            return [[d for d in shape if d.get_constant_value() != 1]]
        dropped = {normalize_axis(self, a, len(shape), "squeeze axis") for a in axes}
        for axis in dropped:
            if shape[axis].is_constant() and shape[axis].get_constant_value() != 1:
                raise ShapeError(f"{label(self)}: cannot squeeze axis {axis} of size {shape[axis]} (shape {shape})")
        return [[d for k, d in enumerate(shape) if k not in dropped]]


@register_operator
class UnsqueezeOperator(_AxesReshape):
    """Inserts size-1 dimensions at ``axes`` (positions in the output)."""

    kind = "unsqueeze"

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        shape, axes = self._shape_and_axes(input_shapes, input_values)
        if axes is None:
            raise ShapeError(f"{label(self)}: unsqueeze needs axes")
        rank = len(shape) + len(axes)
        inserted = {normalize_axis(self, a, rank, "unsqueeze axis") for a in axes}
        if len(inserted) != len(axes):
            raise ShapeError(f"{label(self)}: unsqueeze axes {axes} repeat an axis")
        rest = iter(shape)
        return [[constant(1) if k in inserted else next(rest) for k in range(rank)]]


@register_operator
class FlattenOperator(Operator):
    """``out`` is 2-D: ``[prod(shape[:axis]), prod(shape[axis:])]``; params: ``axis`` (default 1)."""

    kind = "flatten"
    axis: int = param(int, default=1)

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 1)
        shape = input_shapes[0]
        rank = len(shape)
        axis = self.axis + rank if self.axis < 0 else self.axis
        if not 0 <= axis <= rank:
            raise ShapeError(f"{label(self)}: flatten axis {self.axis} is out of range for rank {rank}")
        return [[volume(shape[:axis]), volume(shape[axis:])]]

    def views_input(self) -> bool:
        """A reshape: the input's elements in the same order."""
        return True

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        out = outputs[0]
        out[...] = inputs[0].reshape(out.shape)
