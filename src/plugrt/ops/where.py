"""The where operator (ONNX Where): ``out = condition ? x : y`` with NumPy broadcasting of all three."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import TypeMismatchError
from ..core.types import DataType
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .elementwise import expect_inputs, label
from .tensor_common import broadcast_shapes, select

__all__ = ["WhereOperator"]


@register_operator
class WhereOperator(Operator):
    """Inputs: condition (BOOL), x, y (one type). Shape values are chosen when all three are known."""

    kind = "where"

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 3)
        condition, x, y = input_types
        if condition != DataType.BOOL:
            raise TypeMismatchError(f"{label(self)}: the condition must be BOOL, got {condition.name}")
        if x != y:
            raise TypeMismatchError(f"{label(self)}: x is {x.name} but y is {y.name}; they must match")
        return [x]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 3)
        return [broadcast_shapes(self, input_shapes)]

    def output_values(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs | None]:
        out = self.output_shapes(input_shapes, input_values)[0]
        if any(v is None for v in input_values) or len(out) > 1 or not all(d.is_constant() for d in out):
            return [None]
        count = out[0].get_constant_value() if out else 1
        condition, x, y = (list(v) * count if len(v) == 1 else list(v) for v in input_values if v is not None)
        return [[select(c, a, b) for c, a, b in zip(condition, x, y)]]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        condition, x, y = inputs
        outputs[0][...] = xp.where(condition, x, y)
