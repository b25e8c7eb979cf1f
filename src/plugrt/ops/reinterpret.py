"""``bitcast`` (ONNX BitCast: the same bytes read as another type of the same size) and ``eye_like``
(ONNX EyeLike: ones on one diagonal of a 2-D tensor shaped like the input)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import ShapeError, TypeMismatchError
from ..core.types import DataType
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .elementwise import expect_inputs, label
from .shared_rules import SameShape

__all__ = ["BitCastOperator", "EyeLikeOperator"]


def _target(op: Operator) -> DataType:
    name = op.param("to_type")
    try:
        return DataType[name]
    except KeyError:
        raise TypeMismatchError(f"{label(op)}: unknown to_type {name!r}") from None


@register_operator
class BitCastOperator(SameShape, Operator):
    """params: ``to_type`` (a DataType name of the input's element size)."""

    kind = "bitcast"

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 1)
        target = _target(self)
        if target.itemsize != input_types[0].itemsize:
            raise TypeMismatchError(
                f"{label(self)}: a bitcast keeps the bytes, so {input_types[0].name} ({input_types[0].itemsize} "
                f"bytes) cannot become {target.name} ({target.itemsize} bytes)"
            )
        return [target]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        outputs[0][...] = xp.ascontiguousarray(inputs[0]).view(outputs[0].dtype)


@register_operator
class EyeLikeOperator(Operator):
    """params: ``to_type`` (a DataType name) and ``k`` (0: the main diagonal, > 0 above it, < 0 below)."""

    kind = "eye_like"

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 1)
        return [_target(self)]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 1)
        if len(input_shapes[0]) != 2:
            raise ShapeError(f"{label(self)}: EyeLike needs a 2-D input, got rank {len(input_shapes[0])}")
        return [list(input_shapes[0])]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        out = outputs[0]
        rows, cols = out.shape
        out[...] = xp.eye(rows, cols, k=int(self.params.get("k", 0)), dtype=out.dtype)
