"""The constant operator: a tensor whose value is stored in the plan."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import NetworkError, ShapeError
from ..core.types import DataType, from_nptype
from ..shape import constant
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .elementwise import expect_inputs, label
from .linear_weights import packed_matrix
from .products import is_rows_first

__all__ = ["ConstantOperator"]

#: Larger int constants are data, not shapes: their values are not propagated.
_MAX_VALUES = 64


@register_operator
class ConstantOperator(Operator):
    """Outputs ``weights["value"]``; params: ``shape`` (list of ints)."""

    kind = "constant"
    is_constant = True

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        self.shape = tuple(int(d) for d in self.param("shape"))
        if any(d < 0 for d in self.shape):
            raise ShapeError(f"constant: shape {list(self.shape)} has a negative dimension")
        if "value" in self.weights:  # params alone are enough to check a plan's parameters
            self.weights["value"] = self._shaped(self.weights["value"])

    def _shaped(self, value: np.ndarray) -> np.ndarray:
        if value.size != int(np.prod(self.shape, dtype=np.int64)):
            raise ShapeError(f"{label(self)}: shape {list(self.shape)} does not match {value.size} weight values")
        if packed_matrix(value) is not None:  # a weight products hold packed: its place, not its values
            return value.reshape(self.shape)
        if value.shape == self.shape and is_rows_first(value):  # as the products reading it take it: kept so
            return value
        return np.ascontiguousarray(value).reshape(self.shape)

    def value(self) -> np.ndarray:
        """The constant, shaped; a missing weight raises :class:`NetworkError`."""
        if "value" not in self.weights:
            raise NetworkError(f"{label(self)}: weight 'value' is missing (weights given: {sorted(self.weights)})")
        return self.weights["value"]

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 0)
        return [from_nptype(self.value().dtype)]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 0)
        return [[constant(d) for d in self.shape]]

    def output_values(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs | None]:
        value = self.value()
        if value.ndim <= 1 and value.dtype.kind in "iu" and value.size <= _MAX_VALUES:
            return [[constant(int(v)) for v in value.reshape(-1)]]
        return [None]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        outputs[0][...] = xp.asarray(self.value())
