"""The reduce operator (SUM, PROD, MAX, MIN, AVG over a bitmask of axes).

HALF sums and averages accumulate in FLOAT, as TensorRT does, and are rounded
once into the HALF output. AVG takes FLOAT or HALF.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import ShapeError
from ..core.types import DataType
from ..shape import constant
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .elementwise import FLOAT_TYPES, expect_inputs, label
from .params import param
from .shared_rules import expect_type

__all__ = ["ReduceOperator", "axes_from_mask"]

_FUNCTIONS = {"SUM": "sum", "PROD": "prod", "MAX": "max", "MIN": "min", "AVG": "mean"}
_TYPES = FLOAT_TYPES | {DataType.INT32, DataType.INT64}
#: the ufuncs whose reduce ``np.sum``, ``np.prod``, ``np.max`` and ``np.min`` call
_UFUNCS = {"SUM": np.add, "PROD": np.multiply, "MAX": np.maximum, "MIN": np.minimum}


def axes_from_mask(op: Operator, mask: int, rank: int) -> tuple[int, ...]:
    """The axes whose bits are set in ``mask``; a bit at or above ``rank`` raises :class:`ShapeError`."""
    if mask < 0 or mask >> rank:
        raise ShapeError(f"{label(op)}: axes bitmask {mask:#b} names an axis outside the input's {rank} dimensions")
    return tuple(axis for axis in range(rank) if mask >> axis & 1)


@register_operator
class ReduceOperator(Operator):
    """params: ``op`` (a ReduceOperation name), ``axes`` (bitmask), ``keep_dims`` (bool)."""

    kind = "reduce"
    op: str = param(choices=_FUNCTIONS)
    mask: int = param(int, key="axes")
    keep_dims: bool = param(bool)
    _axes: tuple[int, ...] = ()
    _rank = -1

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 1)
        expect_type(self, input_types[0], FLOAT_TYPES if self.op == "AVG" else _TYPES, f"reduce {self.op}")
        return [input_types[0]]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 1)
        shape = input_shapes[0]
        axes = axes_from_mask(self, self.mask, len(shape))
        if self.keep_dims:
            return [[constant(1) if axis in axes else dim for axis, dim in enumerate(shape)]]
        return [[dim for axis, dim in enumerate(shape) if axis not in axes]]

    def prepare(self, input_shapes: Sequence[tuple[int, ...]], output_shapes: Sequence[tuple[int, ...]]) -> None:
        self._rank = len(input_shapes[0])
        self._axes = axes_from_mask(self, self.mask, self._rank)

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x, out = inputs[0], outputs[0]
        if x.ndim != self._rank:
            self.prepare([x.shape], [out.shape])
        function = getattr(xp, _FUNCTIONS[self.op])
        if x.size == 0 and self.op == "AVG":
            # a mean over nothing: ONNX leaves it undefined; 0 as onnxruntime gives (and no NumPy warning)
            out[...] = 0
        elif x.dtype == np.float16 and self.op in ("SUM", "AVG"):
            out[...] = function(x, axis=self._axes, keepdims=self.keep_dims, dtype=xp.float32)
        elif x.size == 0 and self.op in ("MAX", "MIN"):
            # the identity of max/min over nothing: the type's lowest/highest value (TensorRT's -inf/+inf)
            info = xp.finfo(out.dtype) if out.dtype.kind == "f" else xp.iinfo(out.dtype)
            low = -xp.inf if out.dtype.kind == "f" else info.min
            high = xp.inf if out.dtype.kind == "f" else info.max
            out[...] = low if self.op == "MAX" else high
        else:
            function(x, axis=self._axes, keepdims=self.keep_dims, out=out)

    def direct_launch(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any) -> Any:
        """NumPy's reduction ufunc itself (what ``np.sum``/``max``/``min``/``prod`` call), where :meth:`run`
        has no special case."""
        x, out = inputs[0], outputs[0]
        if xp is np and self.op == "AVG" and x.size and x.dtype != np.float16:
            return _mean(x, self._axes, out, self.keep_dims)
        ufunc = _UFUNCS.get(self.op)
        if xp is not np or ufunc is None or x.size == 0 or (x.dtype == np.float16 and self.op == "SUM"):
            return None
        return ufunc.reduce, (x, self._axes, None, out, self.keep_dims)


def _mean(x: np.ndarray, axes: tuple[int, ...], out: np.ndarray, keep: bool) -> tuple[Any, tuple[Any, ...]]:
    """``np.mean(x, axes, out=out)`` as the two calls it makes: the sum, then the division by the count (an
    ``intp``, as NumPy's, so the quotient is rounded as NumPy's is)."""
    count = np.intp(math.prod(x.shape[a] for a in axes))

    def mean() -> None:
        np.add.reduce(x, axes, None, out, keep)  # type: ignore[call-overload]
        np.true_divide(out, count, out=out, casting="unsafe")

    return mean, ()
