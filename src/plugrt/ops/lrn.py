"""Local response normalization across channels (ONNX LRN, TensorRT's ILRNLayer).

``out = x / (bias + alpha / size * sum(x[c']**2))**beta`` where ``c'`` runs over
``[c - floor((size - 1) / 2), c + ceil((size - 1) / 2)]`` clipped to the channels.
The window sum adds ``size`` shifted slices of the squares (no prefix sums, so
no cancellation); everything is computed in FLOAT in two work buffers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import NetworkError, ShapeError, TypeMismatchError
from ..core.types import DataType
from .base import Operator, ShapeExprs, register_operator
from .elementwise import FLOAT_TYPES, expect_inputs, label

__all__ = ["LRNOperator"]


@register_operator
class LRNOperator(Operator):
    """params: ``size`` (odd or even window, >= 1), ``alpha``, ``beta``, ``bias``."""

    kind = "lrn"

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        self.size = int(self.param("size"))
        if self.size < 1:
            raise NetworkError(f"lrn: size must be >= 1, got {self.size}")
        self.alpha = float(self.params.get("alpha", 1e-4))
        self.beta = float(self.params.get("beta", 0.75))
        self.bias = float(self.params.get("bias", 1.0))
        self._shape: tuple[int, ...] | None = None
        self._shifts: list[tuple[slice, slice]] = []
        #: (array module, squares, window sums): FLOAT work buffers of the input's shape
        self._work: tuple[Any, Any, Any] | None = None

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 1)
        if input_types[0] not in FLOAT_TYPES:
            raise TypeMismatchError(f"{label(self)}: LRN takes FLOAT or HALF, got {input_types[0].name}")
        return [input_types[0]]

    def output_shapes(
        self, input_shapes: Sequence[ShapeExprs], input_values: Sequence[ShapeExprs | None]
    ) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 1)
        if len(input_shapes[0]) < 2:
            raise ShapeError(f"{label(self)}: LRN takes [N, C, ...], got rank {len(input_shapes[0])}")
        return [list(input_shapes[0])]

    def prepare(self, input_shapes: Sequence[tuple[int, ...]], output_shapes: Sequence[tuple[int, ...]]) -> None:
        shape = tuple(input_shapes[0])
        self._shape = shape
        self._work = None
        channels = shape[1]
        before, after = (self.size - 1) // 2, self.size // 2
        self._shifts = []
        for shift in range(-before, after + 1):
            if shift == 0 or abs(shift) >= channels:
                continue
            if shift > 0:  # channel c adds channel c + shift
                self._shifts.append((slice(0, channels - shift), slice(shift, channels)))
            else:
                self._shifts.append((slice(-shift, channels), slice(0, channels + shift)))

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x, out = inputs[0], outputs[0]
        if self._shape != x.shape:
            self.prepare([x.shape], [out.shape])
        work = self._work
        if work is None or work[0] is not xp:
            work = self._work = (xp, xp.empty(x.shape, dtype=np.float32), xp.empty(x.shape, dtype=np.float32))
        _, squares, sums = work
        xp.multiply(x, x, out=squares)
        xp.copyto(sums, squares)
        for dst, src in self._shifts:
            region = sums[:, dst]
            xp.add(region, squares[:, src], out=region)
        xp.multiply(sums, np.float32(self.alpha / self.size), out=sums)
        xp.add(sums, np.float32(self.bias), out=sums)
        if self.beta == 0.75:  # s**0.75 = sqrt(s) * sqrt(sqrt(s)), far cheaper than power
            xp.sqrt(sums, out=squares)
            xp.sqrt(squares, out=sums)
            xp.multiply(squares, sums, out=sums)
        else:
            xp.power(sums, np.float32(self.beta), out=sums)
        xp.divide(x, sums, out=out)
