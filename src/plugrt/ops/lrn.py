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

from ..core.errors import ShapeError
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .elementwise import expect_inputs, label
from .params import param
from .shared_rules import FloatInput

__all__ = ["LRNOperator"]


@register_operator
class LRNOperator(FloatInput, Operator):
    """params: ``size`` (odd or even window, >= 1), ``alpha``, ``beta``, ``bias``."""

    kind = "lrn"
    title = "LRN"
    size: int = param(int, minimum=1)
    alpha: float = param(float, default=1e-4)
    beta: float = param(float, default=0.75)
    bias: float = param(float, default=1.0)

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        self._shape: tuple[int, ...] | None = None
        self._shifts: list[tuple[slice, slice]] = []
        #: (array module, squares, window sums): FLOAT work buffers of the input's shape
        self._work: tuple[Any, Any, Any] | None = None

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
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
