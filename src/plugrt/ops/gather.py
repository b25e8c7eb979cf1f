"""Gather operators: ``gather`` (along an axis), ``gather_elements`` and ``gather_nd`` (ONNX semantics).

Indices may be negative (counted from the end of the indexed dimension); an
index out of range fails the run with an error naming the layer. ``gather``
propagates shape-tensor values, so ``Shape → Gather`` picks dimensions symbolically.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..core.errors import ShapeError
from ..core.types import DataType
from .base import InputShapes, InputValues, Operator, ShapeExprs, assign, register_operator
from .elementwise import expect_inputs, label, merge_dim
from .params import param
from .tensor_common import constant_ints, expect_index_type, normalize_axis

__all__ = ["GatherElementsOperator", "GatherNdOperator", "GatherOperator"]


def _wrap(xp: Any, indices: Any, size: Any) -> Any:
    """Negative indices counted from the end, for kernels that do not wrap them themselves."""
    return xp.where(indices < 0, indices + size, indices)


class _Gather(Operator):
    """What the gathers share: data and integer indices in, the data's type out; ``axis`` (default 0)."""

    axis: int = param(int, default=0)

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 2)
        expect_index_type(self, input_types[1], "the indices")
        return [input_types[0]]


@register_operator
class GatherOperator(_Gather):
    """``out = take(data, indices, axis)``; params: ``axis`` (int, default 0)."""

    kind = "gather"

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 2)
        data, indices = input_shapes
        if not data:
            raise ShapeError(f"{label(self)}: gather needs data of rank >= 1, got a 0-d tensor")
        axis = normalize_axis(self, self.axis, len(data))
        return [list(data[:axis]) + list(indices) + list(data[axis + 1 :])]

    def output_values(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs | None]:
        data, indices = input_values
        picks = constant_ints(indices)
        if data is None or picks is None or len(input_shapes[0]) != 1:
            return [None]
        count = len(data)
        if any(not -count <= i < count for i in picks):
            raise ShapeError(f"{label(self)}: gather indices {picks} are out of range for {count} values")
        return [[data[i] for i in picks]]

    def prepare(self, input_shapes: Sequence[tuple[int, ...]], output_shapes: Sequence[tuple[int, ...]]) -> None:
        known = self.bound_values[1] if len(self.bound_values) > 1 else None
        if known is not None:  # indices that are a shape tensor: checked once, on the host
            self._check_range(list(known), len(input_shapes[0]), input_shapes[0])

    def _check_range(self, indices: Any, rank: int, shape: Sequence[int]) -> None:
        axis = self.axis + rank if self.axis < 0 else self.axis
        size = shape[axis]
        if len(indices) and (min(indices) < -size or max(indices) >= size):
            raise IndexError(f"gather indices must be in [{-size}, {size - 1}] for axis {axis} of size {size}")

    def direct_launch(
        self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any
    ) -> tuple[Callable[..., Any], tuple[Any, ...]] | None:
        """Where the indices are known at bind (a constant or a shape tensor, range-checked by :meth:`prepare`):
        one index, or a run of consecutive ones, as a copy of a view of the data; other known indices as one
        take with a table made now. On a device this replaces the take and the three kernels that count
        negative indices from the end at every run."""
        known = self.bound_values[1] if len(self.bound_values) > 1 else None
        data, indices, out = inputs[0], inputs[1], outputs[0]
        if known is None or data.ndim == 0 or len(known) != indices.size:
            return None
        axis = self.axis + data.ndim if self.axis < 0 else self.axis
        size = data.shape[axis]
        picks = [int(i) + size if int(i) < 0 else int(i) for i in known]
        before = [slice(None)] * axis
        if indices.ndim == 0:
            return assign(out, data[tuple([*before, picks[0]])])
        if indices.ndim == 1 and picks and picks == list(range(picks[0], picks[0] + len(picks))):
            return assign(out, data[tuple([*before, slice(picks[0], picks[0] + len(picks))])])
        table = xp.asarray(np.asarray(picks, dtype=np.int64).reshape(indices.shape))
        return functools.partial(xp.take, data, table, axis=axis, out=out), ()

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        data, indices = inputs
        axis = self.axis + data.ndim if self.axis < 0 else self.axis
        if xp is np:  # NumPy's take counts negative indices from the end and refuses those out of range
            try:
                data.take(indices, axis, outputs[0])
            except IndexError:
                self._check_range([int(indices.min()), int(indices.max())], data.ndim, data.shape)
                raise
            return
        # on a device the range check would read back every run: out of range is undefined there
        xp.take(data, _wrap(xp, indices, data.shape[axis]), axis=axis, out=outputs[0])


@register_operator
class GatherElementsOperator(_Gather):
    """``out[i][j][k] = data[index][j][k]`` along ``axis`` (params: ``axis``, default 0); out has the indices' shape."""

    kind = "gather_elements"

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 2)
        data, indices = input_shapes
        if len(data) != len(indices) or not data:
            raise ShapeError(
                f"{label(self)}: data and indices must have the same rank >= 1, got {len(data)} and {len(indices)}"
            )
        normalize_axis(self, self.axis, len(data))
        return [list(indices)]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        data, indices = inputs
        axis = self.axis + data.ndim if self.axis < 0 else self.axis
        outputs[0][...] = xp.take_along_axis(data, _wrap(xp, indices, data.shape[axis]), axis=axis)


@register_operator
class GatherNdOperator(_Gather):
    """ONNX GatherND: the last indices dimension addresses the leading data dimensions.

    params: ``batch_dims`` (int, default 0): that many leading dimensions are shared by data and indices.
    """

    kind = "gather_nd"
    batch_dims: int = param(int, default=0)

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 2)
        data, indices = input_shapes
        b = self.batch_dims
        if not indices or not indices[-1].is_constant():
            raise ShapeError(f"{label(self)}: the last dimension of the indices must be a build-time constant")
        depth = indices[-1].get_constant_value()
        if b < 0 or b >= min(len(data), len(indices)) or b + depth > len(data):
            raise ShapeError(
                f"{label(self)}: batch_dims {b} and index depth {depth} do not fit data of rank {len(data)} "
                f"and indices of rank {len(indices)}"
            )
        batch = [merge_dim(self, d, i, f"batch dimension {k}") for k, (d, i) in enumerate(zip(data[:b], indices[:b]))]
        return [batch + list(indices[b:-1]) + list(data[b + depth :])]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        data, indices = inputs
        b, depth = self.batch_dims, indices.shape[-1]
        batch = int(np.prod(data.shape[:b], dtype=np.int64))
        flat_data = data.reshape((batch, *data.shape[b:]))
        flat_indices = indices.reshape(batch, -1, depth)
        picks = [xp.arange(batch).reshape(batch, 1)]
        for k in range(depth):
            picks.append(_wrap(xp, flat_indices[..., k], data.shape[b + k]))
        outputs[0][...] = flat_data[tuple(picks)].reshape(outputs[0].shape)
