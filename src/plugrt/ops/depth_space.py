"""Block rearrangements between channels and space: ``depth_to_space`` and ``space_to_depth`` (NCHW).

``mode`` DCR (default) orders the moved channels depth-column-row; CRD
(depth_to_space only) column-row-depth, as ONNX defines them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import ShapeError
from ..shape import DimensionOperation, IDimensionExpr, constant, operation
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .elementwise import expect_inputs, label
from .params import param

__all__ = ["DepthToSpaceOperator", "SpaceToDepthOperator"]


class _Blocks(Operator):
    block: int = param(int, key="blocksize", minimum=1)
    mode: str = param(default="DCR", choices=("DCR", "CRD"))

    def _nchw(self, input_shapes: Sequence[ShapeExprs]) -> ShapeExprs:
        expect_inputs(self, len(input_shapes), 1)
        if len(input_shapes[0]) != 4:
            raise ShapeError(f"{label(self)}: {self.kind} needs a 4-D NCHW input, got rank {len(input_shapes[0])}")
        return list(input_shapes[0])

    def _divided(self, dim: IDimensionExpr, by: int, what: str) -> IDimensionExpr:
        if dim.is_constant() and dim.get_constant_value() % by:
            raise ShapeError(f"{label(self)}: {what} {dim} is not divisible by {by}")
        return operation(DimensionOperation.FLOOR_DIV, dim, constant(by))


@register_operator
class DepthToSpaceOperator(_Blocks):
    """``[N, C, H, W] → [N, C / b², H·b, W·b]``; params: ``blocksize``, ``mode`` (DCR or CRD)."""

    kind = "depth_to_space"

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        n, c, h, w = self._nchw(input_shapes)
        b = constant(self.block)
        channels = self._divided(c, self.block * self.block, "channels")
        return [[n, channels, operation(DimensionOperation.PROD, h, b), operation(DimensionOperation.PROD, w, b)]]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x, out = inputs[0], outputs[0]
        n, c, h, w = x.shape
        b = self.block
        if self.mode == "DCR":
            blocks = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
        else:
            blocks = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
        out.reshape(blocks.shape)[...] = blocks


@register_operator
class SpaceToDepthOperator(_Blocks):
    """``[N, C, H, W] → [N, C·b², H / b, W / b]``; params: ``blocksize``."""

    kind = "space_to_depth"

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        n, c, h, w = self._nchw(input_shapes)
        channels = operation(DimensionOperation.PROD, c, constant(self.block * self.block))
        return [[n, channels, self._divided(h, self.block, "height"), self._divided(w, self.block, "width")]]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x, out = inputs[0], outputs[0]
        n, c, h, w = x.shape
        b = self.block
        if self.mode == "DCR":
            blocks = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
        else:
            blocks = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 1, 3, 5, 2, 4)
        out.reshape(blocks.shape)[...] = blocks
