"""Parametric ReLU (ONNX PRelu, TensorRT's IParametricReLULayer): ``x if x >= 0 else slope * x``.

The slope broadcasts to the input (right-aligned, as NumPy). A constant slope is
a weight, shaped for broadcasting at build time; otherwise it is input 1. The
kernel needs no mask: ``out = max(x, 0) + slope * min(x, 0)``, with one work
buffer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import NetworkError, ShapeError, TypeMismatchError
from ..core.types import DataType
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .elementwise import FLOAT_TYPES, label

__all__ = ["PReluOperator"]

_TYPES = FLOAT_TYPES | {DataType.INT32, DataType.INT64}


@register_operator
class PReluOperator(Operator):
    """weights: ``slope`` (optional; else input 1), broadcastable to the input."""

    kind = "prelu"

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        self._inputs = 1 if "slope" in self.weights else 2

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        if len(input_types) != self._inputs:
            raise NetworkError(f"{label(self)}: expected {self._inputs} input(s), got {len(input_types)}")
        if input_types[0] not in _TYPES:
            valid = ", ".join(sorted(t.name for t in _TYPES))
            raise TypeMismatchError(f"{label(self)}: PRelu takes {valid}, got {input_types[0].name}")
        if len(input_types) == 2 and input_types[1] != input_types[0]:
            raise TypeMismatchError(
                f"{label(self)}: slope type {input_types[1].name} differs from the input's {input_types[0].name}"
            )
        return [input_types[0]]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        x = input_shapes[0]
        slope = list(self.weights["slope"].shape) if "slope" in self.weights else input_shapes[1]
        if len(slope) > len(x):
            raise ShapeError(f"{label(self)}: slope of rank {len(slope)} does not broadcast to input of rank {len(x)}")
        for dim, target in zip(reversed(slope), reversed(x)):
            value = dim if isinstance(dim, int) else (dim.get_constant_value() if dim.is_constant() else None)
            if value not in (None, 1) and target.is_constant() and target.get_constant_value() != value:
                raise ShapeError(f"{label(self)}: slope of shape {slope} does not broadcast to input {x}")
        return [list(x)]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x, out = inputs[0], outputs[0]
        slope = self.weight("slope", xp) if "slope" in self.weights else inputs[1]
        work = self.scratch("work", out.shape, out.dtype, xp)
        xp.minimum(x, 0, out=work)
        xp.multiply(work, slope, out=work, casting="unsafe")
        xp.maximum(x, 0, out=out)
        xp.add(out, work, out=out)
