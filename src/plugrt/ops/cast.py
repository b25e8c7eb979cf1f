"""The cast operator: converts elements to another type.

Floating-point to integer conversion truncates toward zero, and any non-zero
value becomes True in BOOL, as TensorRT's ICastLayer does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import NetworkError
from ..core.types import DataType, nptype
from .base import Operator, ShapeExprs, register_operator
from .elementwise import expect_inputs

__all__ = ["CastOperator"]

_INT_TYPES = frozenset({DataType.INT8, DataType.INT32, DataType.INT64, DataType.UINT8})


@register_operator
class CastOperator(Operator):
    """``out = x`` converted to ``to_type``; params: ``to_type`` (a DataType name)."""

    kind = "cast"

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        name = self.param("to_type")
        if name not in DataType.__members__:
            raise NetworkError(f"cast: unknown to_type {name!r}; valid: {', '.join(DataType.__members__)}")
        self.to_type = DataType[name]
        nptype(self.to_type)  # only types with a NumPy equivalent can be computed

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 1)
        return [self.to_type]

    def output_shapes(
        self, input_shapes: Sequence[ShapeExprs], input_values: Sequence[ShapeExprs | None]
    ) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 1)
        return [list(input_shapes[0])]

    def output_values(
        self, input_shapes: Sequence[ShapeExprs], input_values: Sequence[ShapeExprs | None]
    ) -> list[ShapeExprs | None]:
        value = input_values[0] if input_values else None
        # Values only describe int tensors, so an int result keeps them.
        return [list(value) if value is not None and self.to_type in _INT_TYPES else None]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        outputs[0][...] = inputs[0]
