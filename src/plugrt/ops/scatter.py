"""Scatter operators: ``scatter_nd`` and ``scatter_elements`` (ONNX semantics, with reductions).

The output is a copy of ``data`` with ``updates`` written (or combined, by
``reduction`` ``add``/``mul``/``max``/``min``) at the positions the indices
name. Negative indices count from the end of their dimension.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import NetworkError, ShapeError, TypeMismatchError
from ..core.types import DataType
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .elementwise import expect_inputs, label, merge_dim
from .params import param
from .tensor_common import expect_index_type, normalize_axis

__all__ = ["ScatterElementsOperator", "ScatterNdOperator"]

_REDUCTIONS = {"none": None, "add": "add", "mul": "multiply", "max": "maximum", "min": "minimum"}


def _host(array: Any) -> Any:
    return array.get() if hasattr(array, "get") else array


class _Scatter(Operator):
    reduction: str = param(default="none")

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        if self.reduction not in _REDUCTIONS:
            raise NetworkError(f"{self.kind}: unknown reduction {self.reduction!r}; valid: {', '.join(_REDUCTIONS)}")

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 3)
        expect_index_type(self, input_types[1], "the indices")
        if input_types[2] != input_types[0]:
            raise TypeMismatchError(
                f"{label(self)}: updates are {input_types[2].name} but data is {input_types[0].name}; they must match"
            )
        return [input_types[0]]

    def _write(self, xp: Any, out: Any, where: tuple[Any, ...], updates: Any) -> None:
        ufunc = _REDUCTIONS[self.reduction]
        if ufunc is None:
            out[where] = updates
            return
        try:
            getattr(xp, ufunc).at(out, where, updates)
        except NotImplementedError:
            # CuPy lacks some unbuffered reductions (multiply.at): combine on the host instead.
            host = out.get()
            getattr(np, ufunc).at(host, tuple(_host(w) for w in where), _host(updates))
            out[...] = xp.asarray(host)


@register_operator
class ScatterNdOperator(_Scatter):
    """ONNX ScatterND; params: ``reduction`` (none, add, mul, max, min)."""

    kind = "scatter_nd"

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 3)
        data, indices, updates = input_shapes
        if not indices or not indices[-1].is_constant():
            raise ShapeError(f"{label(self)}: the last dimension of the indices must be a build-time constant")
        depth = indices[-1].get_constant_value()
        if depth > len(data):
            raise ShapeError(f"{label(self)}: index depth {depth} exceeds the data's rank {len(data)}")
        expected = list(indices[:-1]) + list(data[depth:])
        if len(updates) != len(expected):
            raise ShapeError(
                f"{label(self)}: updates must have rank {len(expected)} (indices[:-1] + data[{depth}:]), "
                f"got {len(updates)}"
            )
        for axis, (u, e) in enumerate(zip(updates, expected)):
            merge_dim(self, u, e, f"updates dimension {axis}")
        return [list(data)]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        data, indices, updates = inputs
        out = outputs[0]
        out[...] = data
        depth = indices.shape[-1]
        flat = indices.reshape(-1, depth)
        updates = updates.reshape((flat.shape[0], *data.shape[depth:]))
        if xp is np and self.reduction == "none":
            # NumPy's indexing counts negative indices from the end and refuses those out of range
            out[tuple(flat.T)] = updates
            return
        where = tuple(xp.where(flat[:, k] < 0, flat[:, k] + data.shape[k], flat[:, k]) for k in range(depth))
        self._write(xp, out, where, updates)

    def direct_launch(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any) -> Any:
        """Without a reduction on NumPy: the index columns and the updates as views made at bind."""
        data, indices, updates = inputs
        if xp is not np or self.reduction != "none" or not (indices.flags.c_contiguous and updates.flags.c_contiguous):
            return None
        flat = indices.reshape(-1, indices.shape[-1])
        return _scatter, (
            outputs[0],
            data,
            tuple(flat.T),
            updates.reshape((flat.shape[0], *data.shape[flat.shape[1] :])),
        )


def _scatter(out: Any, data: Any, where: tuple[Any, ...], updates: Any) -> None:
    out[...] = data
    out[where] = updates


@register_operator
class ScatterElementsOperator(_Scatter):
    """ONNX ScatterElements; params: ``axis`` (default 0), ``reduction`` (none, add, mul, max, min)."""

    kind = "scatter_elements"
    axis: int = param(int, default=0)

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 3)
        data, indices, updates = input_shapes
        if not len(data) == len(indices) == len(updates) or not data:
            raise ShapeError(
                f"{label(self)}: data, indices and updates must have one rank >= 1, "
                f"got {len(data)}, {len(indices)} and {len(updates)}"
            )
        normalize_axis(self, self.axis, len(data))
        for axis, (i, u) in enumerate(zip(indices, updates)):
            merge_dim(self, i, u, f"dimension {axis} of indices and updates")
        return [list(data)]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        data, indices, updates = inputs
        out = outputs[0]
        out[...] = data
        axis = self.axis + data.ndim if self.axis < 0 else self.axis
        rank = indices.ndim
        # One broadcastable position array per axis (what NumPy's indices(sparse=True) gives; CuPy lacks it).
        grid = [xp.arange(n).reshape((1,) * k + (n,) + (1,) * (rank - k - 1)) for k, n in enumerate(indices.shape)]
        grid[axis] = xp.where(indices < 0, indices + data.shape[axis], indices)
        self._write(xp, out, tuple(grid), updates)
