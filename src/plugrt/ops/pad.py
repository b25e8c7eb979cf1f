"""Padding (ONNX Pad, TensorRT's IPaddingLayer): constant, reflect, edge and wrap modes.

``pads`` is ``[begin..., end...]`` over every axis; a negative pad crops. The
kernel copies the (cropped) input into the interior of the output, then fills
the borders: with the constant, or axis after axis by copying from the output
itself (the positions each border element comes from are NumPy's ``np.pad``
rule applied to index ranges, worked out in ``prepare`` and merged into runs
of slices, so a border of any width costs a few slice copies). The pads are a
param, or input 1 whose values are known at build time (a shape tensor); the
constant is a one-element weight (any value, infinities included, survives the
plan) or the last input.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import NetworkError, ShapeError, TypeMismatchError
from ..core.types import DataType
from ..shape import DimensionOperation, IDimensionExpr, constant, operation
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .elementwise import label
from .params import ints, param

__all__ = ["PadOperator"]

_MODES = ("constant", "reflect", "edge", "wrap")
Index = tuple[Any, ...]


@register_operator
class PadOperator(Operator):
    """params: ``mode``, ``pads`` (or input 1 with ``axes``, the axes those pads are for),
    ``value_input`` (the constant is the last input); weights: ``value`` (one element, default 0)."""

    kind = "pad"
    mode: str = param(default="constant", choices=_MODES)
    pads: list[int] | None = param(ints, default=None)
    axes: list[int] | None = param(ints, default=None)
    value_input: bool = param(bool, default=False)

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        self.value = np.asarray(self.weights.get("value", np.zeros(1))).reshape(-1)[0]
        self._inputs = 1 + (self.pads is None) + self.value_input
        self._key: tuple[Any, ...] | None = None
        self._interior: tuple[Index, Index] = ((), ())
        self._fills: list[Index] = []
        self._copies: list[tuple[Index, Index]] = []

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        if len(input_types) != self._inputs:
            raise NetworkError(f"{label(self)}: expected {self._inputs} input(s), got {len(input_types)}")
        if self.pads is None and input_types[1] not in (DataType.INT32, DataType.INT64):
            raise TypeMismatchError(f"{label(self)}: pads must be INT32 or INT64, got {input_types[1].name}")
        return [input_types[0]]

    def _full_pads(self, pads: Sequence[Any], rank: int, zero: Any) -> list[Any]:
        """``pads`` for ``axes`` (or all axes) as ``[begin..., end...]`` over all ``rank`` axes."""
        axes = list(range(rank)) if self.axes is None else [a + rank if a < 0 else a for a in self.axes]
        if len(pads) != 2 * len(axes):
            raise ShapeError(f"{label(self)}: {len(pads)} pads for {len(axes)} axes; expected {2 * len(axes)}")
        full = [zero] * (2 * rank)
        for i, axis in enumerate(axes):
            if not 0 <= axis < rank:
                raise ShapeError(f"{label(self)}: pad axis {axis} is outside the input's {rank} dimensions")
            full[axis], full[rank + axis] = pads[i], pads[len(axes) + i]
        return full

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        x = input_shapes[0]
        rank = len(x)
        if self.pads is not None:
            pads: list[IDimensionExpr] = [constant(p) for p in self._full_pads(self.pads, rank, 0)]
        else:
            values = input_values[1]
            if values is None:
                raise ShapeError(
                    f"{label(self)}: the pads input must be known at build time (a constant or computed from shapes)"
                )
            pads = self._full_pads(values, rank, constant(0))
        return [
            [
                operation(DimensionOperation.SUM, operation(DimensionOperation.SUM, dim, pads[a]), pads[rank + a])
                for a, dim in enumerate(x)
            ]
        ]

    def _plan(self, shape: tuple[int, ...], pads: list[int]) -> None:
        rank = len(shape)
        begins, ends = pads[:rank], pads[rank:]
        kept = [shape[a] - max(0, -begins[a]) - max(0, -ends[a]) for a in range(rank)]
        starts = [max(0, b) for b in begins]
        src = tuple(slice(max(0, -begins[a]), max(0, -begins[a]) + kept[a]) for a in range(rank))
        dst = tuple(slice(starts[a], starts[a] + kept[a]) for a in range(rank))
        self._interior = (dst, src)
        self._fills, self._copies = [], []
        for axis in range(rank):
            before, after = max(0, begins[axis]), max(0, ends[axis])
            if not before and not after:
                continue
            if self.mode != "constant" and kept[axis] == 0:
                raise ShapeError(f"{label(self)}: {self.mode} padding of axis {axis}, which has no elements left")
            lead = tuple(slice(None) for _ in range(axis))
            tail = tuple(slice(starts[a], starts[a] + kept[a]) for a in range(axis + 1, rank))
            if self.mode == "constant":
                for region in (slice(0, before), slice(before + kept[axis], before + kept[axis] + after)):
                    if region.stop > region.start:
                        self._fills.append((*(slice(None) for _ in range(axis)), region))
                continue
            sources = np.pad(np.arange(kept[axis]), (before, after), mode=self.mode) + before  # type: ignore[call-overload]
            positions = [*range(before), *range(before + kept[axis], before + kept[axis] + after)]
            for target, source in _runs(positions, [int(sources[p]) for p in positions]):
                self._copies.append(((*lead, target, *tail), (*lead, source, *tail)))

    def _pads_of(self, inputs: Sequence[Any], rank: int) -> list[int]:
        if self.pads is not None:
            return self._full_pads(self.pads, rank, 0)
        return self._full_pads(self.input_ints(1, inputs[1]), rank, 0)  # a device read unless a shape tensor

    def direct_launch(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any) -> Any:
        """Where the pads are known at bind (a parameter, or a shape tensor's bound values) and so is the fill
        value: :meth:`run`'s copies and fills on views made now."""
        if xp is not np or self.value_input:
            return None
        if self.pads is None and (len(self.bound_values) < 2 or self.bound_values[1] is None):
            return None
        x, out = inputs[0], outputs[0]
        try:
            pads = self._pads_of(inputs, x.ndim)
            self._plan(x.shape, pads)
        except ShapeError:
            return None  # the run raises it
        self._key = (x.shape, out.shape, *pads)
        dst, src = self._interior
        writes: list[tuple[Any, Any]] = [(out[dst].__setitem__, x[src])]
        if self.mode == "constant":
            writes += [(out[region].__setitem__, self.value) for region in self._fills]
        writes += [(out[target].__setitem__, out[source]) for target, source in self._copies]

        def pad() -> None:
            for write, value in writes:
                write(Ellipsis, value)

        return pad, ()

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x, out = inputs[0], outputs[0]
        pads = self._pads_of(inputs, x.ndim)
        key = (x.shape, out.shape, *pads)
        if key != self._key:
            self._plan(x.shape, pads)
            self._key = key
        dst, src = self._interior
        xp.copyto(out[dst], x[src])
        if self.mode == "constant":
            value = inputs[-1].reshape(-1)[0] if self.value_input else self.value
            for region in self._fills:
                out[region] = value
        for target, source in self._copies:
            out[target] = out[source]


def _runs(targets: Sequence[int], sources: Sequence[int]) -> list[tuple[slice, slice]]:
    """Merge position pairs into (target slice, source slice) runs: targets step 1, sources step 1, -1 or 0."""
    runs: list[tuple[slice, slice]] = []
    i = 0
    while i < len(targets):
        j = i + 1
        step = sources[j] - sources[i] if j < len(targets) and targets[j] == targets[i] + 1 else 0
        if step not in (-1, 0, 1):
            step = 0
        while j < len(targets) and targets[j] == targets[j - 1] + 1 and sources[j] - sources[j - 1] == step:
            j += 1
        if step == 0 and j - i > 1:
            source = slice(sources[i], sources[i] + 1)  # broadcast one position over the run
        elif step == -1:
            stop = sources[j - 1] - 1
            source = slice(sources[i], None if stop < 0 else stop, -1)
        else:
            source = slice(sources[i], sources[j - 1] + 1)
        runs.append((slice(targets[i], targets[j - 1] + 1), source))
        i = j
    return runs
