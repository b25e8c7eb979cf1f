"""The reverse-sequence operator (ONNX ReverseSequence): reverses the first ``lens[b]`` steps of each batch entry."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import ShapeError
from ..core.types import DataType
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .elementwise import expect_inputs, label, merge_dim
from .params import param
from .tensor_common import expect_index_type

__all__ = ["ReverseSequenceOperator"]


@register_operator
class ReverseSequenceOperator(Operator):
    """Inputs: x and sequence lengths (one per batch entry); params: ``time_axis`` (0), ``batch_axis`` (1)."""

    kind = "reverse_sequence"
    time_axis: int = param(int, default=0)
    batch_axis: int = param(int, default=1)

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        if {self.time_axis, self.batch_axis} not in ({0, 1},):
            raise ShapeError(
                f"reverse_sequence: time_axis and batch_axis must be 0 and 1 in some order, "
                f"got {self.time_axis} and {self.batch_axis}"
            )

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 2)
        expect_index_type(self, input_types[1], "the sequence lengths")
        return [input_types[0]]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 2)
        shape, lens = input_shapes
        if len(shape) < 2 or len(lens) != 1:
            raise ShapeError(
                f"{label(self)}: needs x of rank >= 2 and 1-D lengths, got ranks {len(shape)} and {len(lens)}"
            )
        merge_dim(self, shape[self.batch_axis], lens[0], "the batch size and the number of lengths")
        return [list(shape)]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x, lens = inputs
        steps = x.shape[self.time_axis]
        time = xp.arange(steps).reshape(steps, 1)
        length = lens.reshape(1, -1).astype(xp.int64)
        source = xp.where(time < length, length - 1 - time, time)
        if self.time_axis == 1:
            source = source.T
        source = source.reshape(source.shape + (1,) * (x.ndim - 2))
        outputs[0][...] = xp.take_along_axis(x, xp.broadcast_to(source, x.shape), axis=self.time_axis)
