"""The hardmax operator: 1 at the first maximum over a set of axes, 0 elsewhere (ONNX ``Hardmax``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import ShapeError
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .elementwise import expect_inputs, label
from .params import param
from .reduce import axes_from_mask
from .shared_rules import FloatInput

__all__ = ["HardmaxOperator"]


@register_operator
class HardmaxOperator(FloatInput, Operator):
    """One-hot of the (first) maximum over the axes of the ``axes`` bitmask, taken jointly."""

    kind = "hardmax"
    mask: int = param(int, key="axes")

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 1)
        if not axes_from_mask(self, self.mask, len(input_shapes[0])):
            raise ShapeError(f"{label(self)}: hardmax needs at least one axis")
        return [list(input_shapes[0])]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x, out = inputs[0], outputs[0]
        axes = axes_from_mask(self, self.mask, x.ndim)
        kept = [a for a in range(x.ndim) if a not in axes]
        moved = x.transpose(kept + list(axes))
        rows = int(np.prod([x.shape[a] for a in kept], dtype=np.int64))
        flat = moved.reshape(rows, -1)
        out[...] = 0
        if flat.shape[1] == 0 or rows == 0:
            return
        winners = xp.argmax(flat, axis=1)
        hot = xp.zeros(flat.shape, dtype=out.dtype)
        hot[xp.arange(rows), winners] = 1
        inverse = np.argsort(kept + list(axes))
        out[...] = hot.reshape(moved.shape).transpose(tuple(int(i) for i in inverse))
