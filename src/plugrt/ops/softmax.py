"""The softmax operator, numerically stable (the maximum is subtracted first).

The axis is a bitmask, as in TensorRT; unset, it is TensorRT's default axis
``max(0, rank - 3)``. HALF inputs are summed in FLOAT.

With ``scaled`` (set by the builder's fusion of a ``Mul`` by a one-element tensor, see
:mod:`plugrt.builder.fusion`) a second input ``s`` multiplies ``x`` first:
``softmax(x * s)``. On the GPU a softmax over the last axis is one kernel
(:mod:`plugrt.ops.softmax_cuda`). On the CPU with PyTorch installed, a FLOAT softmax over
one axis has a PyTorch kernel too, timed per layer at build (:mod:`plugrt.ops.torch_cpu`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import ShapeError, TypeMismatchError
from ..core.types import DataType
from .base import InputShapes, InputValues, ShapeExprs, register_operator
from .concatenation import default_axis
from .elementwise import FLOAT_TYPES, expect_inputs, label
from .onednn_elementwise import softmax_onednn
from .params import param
from .reduce import axes_from_mask
from .torch_cpu import Kernel, TorchOperator
from .torch_cpu_kernels import softmax as torch_softmax

__all__ = ["SoftmaxOperator", "softmax_rows"]

#: elements per block of rows: the five passes of a block run in the L2 cache, not memory
_BLOCK = 32768
#: rows whose maximum lies within +-_SAFE are exponentiated without subtracting it
_SAFE = 60.0


def softmax_rows(x: np.ndarray, out: np.ndarray) -> None:
    """Softmax of each row of 2-D ``x`` into ``out`` (may alias), a cache-sized block of rows at a time."""
    rows, width = x.shape
    step = max(1, _BLOCK // max(width, 1))
    for start in range(0, rows, step):
        block, target = x[start : start + step], out[start : start + step]
        peak = block.max(axis=1, keepdims=True)
        if block.dtype == np.float32 and -_SAFE < peak.min() and peak.max() < _SAFE:
            # exp(x) / sum(exp(x)) is exp(x - max) / sum(exp(x - max)); with every row's maximum
            # within +-60 neither overflows nor loses the row's largest terms in FLOAT, so skip the
            # subtraction (not in HALF, whose exp overflows past 11 and loses precision below -9).
            np.exp(block, out=target)
        else:
            np.subtract(block, peak, out=target)
            np.exp(target, out=target)
        total = target.sum(axis=1, keepdims=True, dtype=np.float32)
        np.reciprocal(total, out=total)
        np.multiply(target, total, out=target, casting="same_kind")


@register_operator
class SoftmaxOperator(TorchOperator):
    """``out = exp(x - max) / sum(exp(x - max))`` over the axes.

    params: ``axes`` (bitmask; absent: the default), ``scaled`` (a second input multiplies ``x`` first).
    """

    kind = "softmax"
    mask: int | None = param(int, key="axes", default=None)
    scaled: bool = param(bool, default=False)

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        self._axes: tuple[int, ...] = ()
        self._rank = -1

    def axes_for(self, rank: int) -> tuple[int, ...]:
        """The axes normalised over, for an input of ``rank``."""
        if rank == 0:
            raise ShapeError(f"{label(self)}: softmax needs an input of rank >= 1, got a scalar")
        mask = 1 << default_axis(rank) if self.mask is None else self.mask
        axes = axes_from_mask(self, mask, rank)
        if not axes:
            raise ShapeError(f"{label(self)}: softmax axes bitmask is 0; set one axis")
        return axes

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 1 + self.scaled)
        if input_types[0] not in FLOAT_TYPES:
            raise TypeMismatchError(f"{label(self)}: softmax takes FLOAT or HALF, got {input_types[0].name}")
        if self.scaled and input_types[1] != input_types[0]:
            raise TypeMismatchError(
                f"{label(self)}: the scale must have the input's type {input_types[0].name}, got {input_types[1].name}"
            )
        return [input_types[0]]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 1 + self.scaled)
        self.axes_for(len(input_shapes[0]))
        if self.scaled:
            scale = input_shapes[1]
            if len(scale) > len(input_shapes[0]) or not all(
                d.is_constant() and d.get_constant_value() == 1 for d in scale
            ):
                raise ShapeError(f"{label(self)}: the scale must be a one-element tensor, got dims {scale}")
        return [list(input_shapes[0])]

    def torch_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """FLOAT over one axis."""
        return len(self.axes_for(len(shapes[0]))) == 1 and super().torch_supports(types, shapes, constant)

    def direct_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """Over the last axis (``ops/onednn_elementwise.py``; oneDNN 3.2 has only its reference kernel for another
        axis)."""
        return tuple(self.axes_for(len(shapes[0]))) == (len(shapes[0]) - 1,)

    def direct_kernel(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> Kernel | None:
        """oneDNN's softmax primitive called directly (``ops/onednn_elementwise.py``); with a scale, NumPy's product
        into the output first (the unfused ``Mul``'s float operations), the softmax then in place."""
        axes = self.axes_for(inputs[0].ndim)
        x, out = inputs[0], outputs[0]
        if len(axes) != 1 or (self.scaled and out.shape != x.shape):
            return None
        softmax = softmax_onednn(axes[0], out if self.scaled else x, out)
        if softmax is None or not self.scaled:
            return softmax
        scale = inputs[1]

        def run_scaled() -> None:
            np.multiply(x, scale, out=out)
            softmax()

        return run_scaled

    def torch_kernel(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> Kernel | None:
        axes = self.axes_for(inputs[0].ndim)
        if len(axes) != 1:
            return None
        return torch_softmax(axes[0], inputs[0], inputs[1] if self.scaled else None, outputs[0])

    def prepare(self, input_shapes: Sequence[tuple[int, ...]], output_shapes: Sequence[tuple[int, ...]]) -> None:
        self._rank = len(input_shapes[0])
        self._axes = self.axes_for(self._rank)

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x, out = inputs[0], outputs[0]
        if x.ndim != self._rank:
            self.prepare([a.shape for a in inputs], [out.shape])
        if xp is not np and self._launch_kernel(x, out, inputs[1] if self.scaled else None):
            return
        if self.scaled:
            xp.multiply(x, inputs[1], out=out)
            x = out
        if xp is np and self._axes == (x.ndim - 1,) and x.flags.c_contiguous and out.flags.c_contiguous:
            softmax_rows(x.reshape(-1, x.shape[-1]), out.reshape(-1, x.shape[-1]))
            return
        xp.subtract(x, x.max(axis=self._axes, keepdims=True), out=out)
        xp.exp(out, out=out)
        xp.divide(out, out.sum(axis=self._axes, keepdims=True, dtype=xp.float32), out=out)

    def _launch_kernel(self, x: Any, out: Any, scale: Any) -> bool:
        """The one-pass GPU kernel, when the axis is the last one and the layout suits it."""
        from .softmax_cuda import softmax_last_axis, supports

        last = (x.ndim - 1,)
        if self._axes != last or not supports(x.dtype, x.shape[-1]) or x.dtype != out.dtype:
            return False
        if not (x.flags.c_contiguous and out.flags.c_contiguous):
            return False
        softmax_last_axis(x, out, scale)
        return True
