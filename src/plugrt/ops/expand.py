"""Shape-driven operators: ``expand``, ``tile``, ``constant_of_shape`` and ``range`` (ONNX semantics).

Their output shapes come from the values of an input (a target shape, repeat
counts, a length), which must be known when the network is built: constants,
or expressions computed from the input shapes, so dynamic shapes work.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import NetworkError, ShapeError, TypeMismatchError
from ..core.types import DataType, from_nptype
from ..shape import DimensionOperation, constant, operation
from .base import InputShapes, InputValues, Operator, ShapeExprs, assign, register_operator
from .elementwise import expect_inputs, label
from .tensor_common import INDEX_TYPES, broadcast_shapes, constant_ints, expect_index_type, values_of

__all__ = ["ConstantOfShapeOperator", "ExpandOperator", "RangeOperator", "TileOperator"]


@register_operator
class ExpandOperator(Operator):
    """``out = broadcast(x, shape)``: NumPy broadcasting of ``x`` with the target shape (input 1)."""

    kind = "expand"

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 2)
        expect_index_type(self, input_types[1], "the shape")
        return [input_types[0]]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 2)
        return [broadcast_shapes(self, [input_shapes[0], values_of(self, input_values, 1, "shape")])]

    def output_values(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs | None]:
        value = input_values[0]
        out = self.output_shapes(input_shapes, input_values)[0]
        if value is None or len(out) > 1 or not all(d.is_constant() for d in out):
            return [None]
        count = out[0].get_constant_value() if out else 1
        return [list(value) if len(value) == count else list(value[:1]) * count]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        outputs[0][...] = inputs[0]

    def direct_launch(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any) -> Any:
        return assign(outputs[0], inputs[0])


@register_operator
class TileOperator(Operator):
    """``out = tile(x, repeats)``; the repeats (input 1) hold one count per dimension."""

    kind = "tile"

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 2)
        expect_index_type(self, input_types[1], "the repeats")
        return [input_types[0]]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 2)
        shape, repeats = input_shapes[0], values_of(self, input_values, 1, "repeats")
        if len(repeats) != len(shape):
            raise ShapeError(f"{label(self)}: {len(repeats)} repeats for an input of rank {len(shape)}")
        return [[operation(DimensionOperation.PROD, d, r) for d, r in zip(shape, repeats)]]

    def output_values(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs | None]:
        value, repeats = input_values[0], constant_ints(input_values[1])
        if value is None or repeats is None or len(input_shapes[0]) != 1:
            return [None]
        return [list(value) * repeats[0]]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x, out = inputs[0], outputs[0]
        reps = tuple(o // s if s else 0 for o, s in zip(out.shape, x.shape))
        out[...] = xp.tile(x, reps)


@register_operator
class ConstantOfShapeOperator(Operator):
    """A tensor of the shape given by input 0's values, filled with ``weights["value"]`` (one element)."""

    kind = "constant_of_shape"

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        value = self.weights.get("value", np.zeros(1, np.float32))
        if value.size != 1:
            raise NetworkError(f"constant_of_shape: value must have one element, got {value.size}")
        self.weights["value"] = np.ascontiguousarray(value.reshape(1))

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 1)
        expect_index_type(self, input_types[0], "the shape")
        return [from_nptype(self.weights["value"].dtype)]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 1)
        if len(input_shapes[0]) != 1:
            raise ShapeError(f"{label(self)}: the shape input must be 1-D, got rank {len(input_shapes[0])}")
        return [values_of(self, input_values, 0, "shape")]

    def output_values(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs | None]:
        value = self.weights["value"]
        out = constant_ints(self.output_shapes(input_shapes, input_values)[0])
        if value.dtype.kind not in "iu" or out is None or len(out) > 1:
            return [None]
        return [[constant(int(value[0]))] * (out[0] if out else 1)]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        outputs[0][...] = self.weight("value", xp)[0]


@register_operator
class RangeOperator(Operator):
    """``out = arange(start, limit, delta)`` from three 0-d integer inputs known at build time.

    The length is ``max(ceil((limit - start) / delta), 0)``; ``delta`` must be a
    constant (its sign decides the direction). Floating-point ranges are folded
    by the importer.
    """

    kind = "range"

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 3)
        if len(set(input_types)) != 1 or input_types[0] not in INDEX_TYPES:
            names = ", ".join(t.name for t in input_types)
            raise TypeMismatchError(
                f"{label(self)}: range computed in the engine needs three INT32 or INT64 inputs of one type, "
                f"got {names}"
            )
        return [input_types[0]]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 3)
        start, limit, delta = (values_of(self, input_values, i, n) for i, n in enumerate(("start", "limit", "delta")))
        if not len(start) == len(limit) == len(delta) == 1:
            raise ShapeError(f"{label(self)}: start, limit and delta must be scalars")
        step = constant_ints(delta)
        if step is None or step[0] == 0:
            raise ShapeError(f"{label(self)}: delta must be a non-zero build-time constant, got {delta[0]}")
        span = operation(DimensionOperation.SUB, limit[0], start[0])
        if step[0] < 0:
            span = operation(DimensionOperation.SUB, start[0], limit[0])
        length = operation(DimensionOperation.CEIL_DIV, span, constant(abs(step[0])))
        return [[operation(DimensionOperation.MAX, length, constant(0))]]

    def output_values(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs | None]:
        length = constant_ints(self.output_shapes(input_shapes, input_values)[0])
        start, delta = input_values[0], input_values[2]
        if length is None or start is None or delta is None or length[0] > 64:
            return [None]
        return [
            [
                operation(DimensionOperation.SUM, start[0], operation(DimensionOperation.PROD, constant(i), delta[0]))
                for i in range(length[0])
            ]
        ]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        out = outputs[0]
        start, delta = inputs[0].reshape(()), inputs[2].reshape(())
        out[...] = start + xp.arange(out.shape[0], dtype=out.dtype) * delta
