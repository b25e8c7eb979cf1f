"""The cast operator: converts elements to another type.

Floating-point to integer conversion truncates toward zero, and any non-zero
value becomes True in BOOL, as TensorRT's ICastLayer does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.types import DataType, nptype
from .base import InputShapes, InputValues, Operator, ShapeExprs, assign, register_operator
from .elementwise import expect_inputs
from .params import param
from .shared_rules import SameShape

__all__ = ["CastOperator", "ToTypeOperator"]

_INT_TYPES = frozenset({DataType.INT8, DataType.INT32, DataType.INT64, DataType.UINT8})


class ToTypeOperator(SameShape, Operator):
    """One input, and an output of its shape and of type ``to_type`` (a DataType name with a NumPy type)."""

    to_type: DataType = param(choices=DataType.__members__, lookup=True)

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        nptype(self.to_type)  # only types with a NumPy equivalent can be computed

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 1)
        return [self.to_type]


@register_operator
class CastOperator(ToTypeOperator):
    """``out = x`` converted to ``to_type``; params: ``to_type`` (a DataType name)."""

    kind = "cast"

    def output_values(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs | None]:
        value = input_values[0] if input_values else None
        # Values only describe int tensors, so an int result keeps them.
        return [list(value) if value is not None and self.to_type in _INT_TYPES else None]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        outputs[0][...] = inputs[0]

    def direct_launch(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any) -> Any:
        return assign(outputs[0], inputs[0])
