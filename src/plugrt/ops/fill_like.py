"""The fill_like operator: a tensor of one value, shaped like its input.

Used where ONNX wants a tensor of known contents but data-dependent shape (the
all-True mask of an inference-mode Dropout, for example).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import NetworkError
from ..core.types import DataType, nptype
from .base import Operator, ShapeExprs, register_operator
from .elementwise import expect_inputs

__all__ = ["FillLikeOperator"]


@register_operator
class FillLikeOperator(Operator):
    """``out = full(x.shape, value)``; params: ``value`` (number or bool), ``to_type`` (a DataType name)."""

    kind = "fill_like"

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        name = self.param("to_type")
        if name not in DataType.__members__:
            raise NetworkError(f"fill_like: unknown to_type {name!r}; valid: {', '.join(DataType.__members__)}")
        self.to_type = DataType[name]
        self.value = np.asarray(self.param("value")).astype(nptype(self.to_type))

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 1)
        return [self.to_type]

    def output_shapes(
        self, input_shapes: Sequence[ShapeExprs], input_values: Sequence[ShapeExprs | None]
    ) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 1)
        return [list(input_shapes[0])]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        outputs[0][...] = self.value
