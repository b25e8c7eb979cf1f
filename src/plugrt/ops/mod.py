"""The mod operator: ONNX ``Mod`` with ONNX (NumPy) multidirectional broadcasting.

``fmod=False`` gives the remainder with the divisor's sign (Python's ``%``);
``fmod=True`` the remainder with the dividend's sign (C's ``fmod``). An integer
remainder by zero is 0, as NumPy gives it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import TypeMismatchError
from ..core.types import DataType
from ..shape import DimensionOperation, operation
from .base import Operator, ShapeExprs, register_operator
from .elementwise import NUMERIC_TYPES, expect_inputs, floor_div_value, label, truncating_div
from .tensor_common import broadcast_shapes

__all__ = ["ModOperator"]


@register_operator
class ModOperator(Operator):
    """``out = a mod b``; params: ``fmod`` (bool)."""

    kind = "mod"

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        self.fmod = bool(self.params.get("fmod", False))

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 2)
        a, b = input_types
        if a != b or a not in NUMERIC_TYPES:
            raise TypeMismatchError(
                f"{label(self)}: mod needs two numeric inputs of one type, got {a.name} and {b.name}"
            )
        return [a]

    def output_shapes(
        self, input_shapes: Sequence[ShapeExprs], input_values: Sequence[ShapeExprs | None]
    ) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 2)
        return [broadcast_shapes(self, input_shapes)]

    def output_values(
        self, input_shapes: Sequence[ShapeExprs], input_values: Sequence[ShapeExprs | None]
    ) -> list[ShapeExprs | None]:
        """Shape values stay expressions: ``a - b * q``, ``q`` rounded down (or toward zero for fmod)."""
        a, b = [*input_values, None, None][:2]
        if a is None or b is None or (len(a) != len(b) and 1 not in (len(a), len(b))):
            return [None]
        n = max(len(a), len(b))
        result = []
        for x, y in zip(a * n if len(a) == 1 else a, b * n if len(b) == 1 else b):
            if y.is_constant() and y.get_constant_value() == 0:
                return [None]  # NumPy's 0 for a remainder by zero is left to the kernel
            quotient = truncating_div(x, y) if self.fmod else floor_div_value(x, y)
            if quotient is None:
                return [None]
            result.append(operation(DimensionOperation.SUB, x, operation(DimensionOperation.PROD, y, quotient)))
        return [result]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        a, b = inputs
        if self.fmod:
            xp.fmod(a, b, out=outputs[0])
        else:
            xp.mod(a, b, out=outputs[0])
