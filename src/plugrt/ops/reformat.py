"""The reformat operator: converts a tensor's type and/or layout (inserted by the builder)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.layouts import from_storage, to_storage
from ..core.types import DataType, TensorFormat
from .base import Operator, ShapeExprs, register_operator

__all__ = ["Reformat"]


@register_operator
class Reformat(Operator):
    """Copy a tensor into another type and/or format.

    Params: ``dst_type`` (DataType name), ``src_format`` and ``dst_format``
    (TensorFormat names).
    """

    kind = "reformat"

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        return [DataType[self.param("dst_type")]]

    def output_shapes(
        self, input_shapes: Sequence[ShapeExprs], input_values: Sequence[ShapeExprs | None]
    ) -> list[ShapeExprs]:
        return [list(input_shapes[0])]

    def output_values(
        self, input_shapes: Sequence[ShapeExprs], input_values: Sequence[ShapeExprs | None]
    ) -> list[ShapeExprs | None]:
        return [input_values[0]]

    def prepare(self, input_shapes: Sequence[tuple[int, ...]], output_shapes: Sequence[tuple[int, ...]]) -> None:
        # Shapes here are logical; the arrays run() gets are laid out per format.
        self._src_format = TensorFormat[self.param("src_format")]
        self._dst_format = TensorFormat[self.param("dst_format")]
        self._linear: Any = None
        self._logical = tuple(output_shapes[0])

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        if self._src_format == self._dst_format == TensorFormat.LINEAR:
            outputs[0][...] = inputs[0]
            return
        if self._linear is None or self._linear.dtype != inputs[0].dtype:
            self._linear = xp.empty(self._logical, dtype=inputs[0].dtype)
        from_storage(inputs[0], self._src_format, self._linear)
        to_storage(self._linear, self._dst_format, outputs[0])
