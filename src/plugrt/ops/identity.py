"""The identity operator: copies its input (converting when the output type differs)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.types import DataType
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .elementwise import expect_inputs
from .shared_rules import SameShape

__all__ = ["IdentityOperator"]


@register_operator
class IdentityOperator(SameShape, Operator):
    """``out = x``; shape tensors pass their values through."""

    kind = "identity"

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 1)
        return [input_types[0]]

    def output_values(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs | None]:
        value = input_values[0] if input_values else None
        return [None if value is None else list(value)]

    def views_input(self) -> bool:
        """The copy is its input, element for element."""
        return True

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        outputs[0][...] = inputs[0]
