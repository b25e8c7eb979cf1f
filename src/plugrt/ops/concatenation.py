"""The concatenation operator: joins its inputs along one axis.

The axis is in ``[0, rank)`` (TensorRT takes no negative axis); unset, it is
TensorRT's default, ``max(0, rank - 3)`` (C for NCHW).

On the CPU with PyTorch installed, a concatenation of 4-D FLOAT tensors along their channels has a channels-last
kernel (tactic ``torch-nhwc``, ``builder/layouts.py``): ``torch.cat`` of the inputs' ``[N, C, H, W]`` views,
channels-last where they are stored ``HWC``, into the output's buffer. It lets a channels-last run pass through
the concatenations of SqueezeNet's fire modules, Inception's and DenseNet's blocks instead of ending at each one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import NetworkError, ShapeError, TypeMismatchError
from ..core.types import DataType
from ..shape import DimensionOperation, operation
from .base import InputShapes, InputValues, ShapeExprs, register_operator
from .elementwise import label, merge_dim
from .onednn_concat import concatenation_onednn
from .params import param
from .torch_channels_last import concatenation_channels_last
from .torch_cpu import CHANNELS_LAST_TACTIC, NUMPY_TACTIC, TORCH_TACTIC, Kernel, TorchOperator

__all__ = ["ConcatenationOperator", "default_axis"]


def default_axis(rank: int) -> int:
    """TensorRT's default axis of concatenation and softmax for a tensor of ``rank``."""
    return max(0, rank - 3)


@register_operator
class ConcatenationOperator(TorchOperator):
    """``out = concatenate(inputs, axis)``; params: ``axis`` (int; absent: the default)."""

    kind = "concatenation"
    channels_last = True
    axis: int | None = param(int, default=None)

    def _resolve_axis(self, rank: int) -> int:
        axis = default_axis(rank) if self.axis is None else self.axis
        if rank == 0 or not 0 <= axis < rank:
            raise ShapeError(
                f"{label(self)}: concatenation axis {axis} is out of range for inputs of rank {rank} "
                f"(valid: 0..{rank - 1})"
            )
        return axis

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        if not input_types:
            raise NetworkError(f"{label(self)}: concatenation needs at least one input")
        for index, dtype in enumerate(input_types):
            if dtype != input_types[0]:
                raise TypeMismatchError(
                    f"{label(self)}: input {index} is {dtype.name} but input 0 is {input_types[0].name}; "
                    "concatenated inputs must have one type"
                )
        return [input_types[0]]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        if not input_shapes:
            raise NetworkError(f"{label(self)}: concatenation needs at least one input")
        first = input_shapes[0]
        axis = self._resolve_axis(len(first))
        out = list(first)
        for index, shape in enumerate(input_shapes[1:], start=1):
            if len(shape) != len(first):
                raise ShapeError(
                    f"{label(self)}: input {index} has rank {len(shape)} but input 0 has rank {len(first)}"
                )
            for dim, (a, b) in enumerate(zip(out, shape)):
                if dim == axis:
                    out[dim] = operation(DimensionOperation.SUM, a, b)
                else:
                    out[dim] = merge_dim(self, a, b, f"dimension {dim} of input 0 and input {index} (axis is {axis})")
        return [out]

    def output_values(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs | None]:
        if not input_values or any(v is None or len(s) != 1 for v, s in zip(input_values, input_shapes)):
            return [None]
        return [[dim for value in input_values if value is not None for dim in value]]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        out = outputs[0]
        axis = default_axis(out.ndim) if self.axis is None else self.axis
        xp.concatenate(list(inputs), axis=axis, out=out)

    def direct_launch(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any) -> Any:
        if xp is not np:
            return None
        out = outputs[0]
        return np.concatenate, (tuple(inputs), default_axis(out.ndim) if self.axis is None else self.axis, out)

    # --- kernel -------------------------------------------------------------------------
    def tactics(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> list[int]:
        """The own kernel, and the channels-last one where it applies; no PyTorch kernel on linear tensors (NumPy's
        concatenate copies as fast)."""
        return [t for t in super().tactics(types, shapes, constant) if t != TORCH_TACTIC] or [NUMPY_TACTIC]

    def torch_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """Where the channels-last kernel applies (its only PyTorch kernel; torch is not imported for the rest)."""
        return super().torch_supports(types, shapes, constant) and self.channels_last_supports(types, shapes, constant)

    def channels_last_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """4-D tensors joined along their channels, on the CPU."""
        if self.xp is not np or not shapes or any(len(shape) != 4 for shape in shapes):
            return False
        return self._resolve_axis(4) == 1

    def channels_last_positions(self, inputs: int, outputs: int) -> list[int]:
        """Every input and the output."""
        return [*range(inputs), inputs]

    def direct_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """Where the channels-last kernel applies (``ops/onednn_concat.py``)."""
        return self.channels_last_supports(types, shapes, constant)

    def direct_kernel(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> Kernel | None:
        """oneDNN's concat primitive called directly, for the channels-last tactic (``ops/onednn_concat.py``)."""
        if self.tactic != CHANNELS_LAST_TACTIC:
            return None
        return concatenation_onednn(inputs, outputs[0], self.formats)

    def torch_kernel(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> Kernel | None:
        if self.tactic != CHANNELS_LAST_TACTIC:
            return None
        return concatenation_channels_last(inputs, outputs[0], self.formats)
