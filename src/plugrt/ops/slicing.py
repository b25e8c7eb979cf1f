"""The slice operator (ONNX Slice): starts, ends, axes and steps per sliced axis.

Each of them is either a parameter (a list of ints) or an input tensor whose
values are known when the network is built (a constant, or computed from
shapes: ``Shape → Gather → Slice`` stays symbolic). Negative starts and ends
count from the end of the axis; both are clamped to the axis (``[0, d]`` for
positive steps, ``[-1, d - 1]`` for negative ones), so ``ends = INT64_MAX``
means "to the end". Steps must be build-time constants.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import NetworkError, ShapeError
from ..core.types import DataType
from ..shape import DimensionOperation, IDimensionExpr, constant, operation
from .base import InputShapes, InputValues, Operator, ShapeExprs, assign, register_operator
from .elementwise import label
from .tensor_common import (
    clamp,
    constant_ints,
    expect_index_type,
    expect_input_count,
    normalize_axis,
    select,
    values_of,
)

__all__ = ["SliceOperator", "onnx_slice"]

_FIELDS = ("starts", "ends", "axes", "steps")
#: A start or end at least this large means "the end of the axis" (dimensions are smaller).
_HUGE = 1 << 62


@register_operator
class SliceOperator(Operator):
    """params: ``starts``, ``ends``, ``axes``, ``steps`` (lists, each optional) and ``tensor_inputs``:
    the names of the fields given as input tensors after the data, in order.

    ``axes`` defaults to ``0..len(starts)-1`` and ``steps`` to ones.
    """

    kind = "slice"

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        self.tensor_inputs = [str(name) for name in self.params.get("tensor_inputs", [])]
        for name in self.tensor_inputs:
            if name not in _FIELDS or self.tensor_inputs.count(name) > 1 or name in self.params:
                raise NetworkError(
                    f"slice: tensor_inputs {self.tensor_inputs} must name each of {_FIELDS} at most once, "
                    "and not also as a parameter"
                )
        self.static = {name: [int(v) for v in self.params[name]] for name in _FIELDS if name in self.params}
        if not {"starts", "ends"} <= set(self.static) | set(self.tensor_inputs):
            raise NetworkError("slice: starts and ends are required (as parameters or tensor_inputs)")
        self._slices: tuple[slice, ...] | None = None

    # --- rules -----------------------------------------------------------------------
    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_input_count(self, len(input_types), 1 + len(self.tensor_inputs))
        for name, dtype in zip(self.tensor_inputs, input_types[1:]):
            expect_index_type(self, dtype, f"the {name}")
        return [input_types[0]]

    def _fields(self, input_values: Sequence[ShapeExprs | None]) -> dict[str, ShapeExprs]:
        fields = {name: [constant(v) for v in values] for name, values in self.static.items()}
        for position, name in enumerate(self.tensor_inputs, start=1):
            fields[name] = values_of(self, input_values, position, name)
        return self._complete(fields)

    def _complete(self, fields: dict[str, ShapeExprs]) -> dict[str, ShapeExprs]:
        count = len(fields["starts"])
        fields.setdefault("axes", [constant(a) for a in range(count)])
        fields.setdefault("steps", [constant(1)] * count)
        lengths = {name: len(v) for name, v in fields.items()}
        if len(set(lengths.values())) != 1:
            raise ShapeError(f"{label(self)}: starts, ends, axes and steps must have one length, got {lengths}")
        return fields

    def _plan(self, rank: int, fields: dict[str, ShapeExprs]) -> dict[int, tuple[Any, Any, int]]:
        axes, steps = constant_ints(fields["axes"]), constant_ints(fields["steps"])
        if axes is None or steps is None:
            raise ShapeError(f"{label(self)}: axes and steps must be build-time constants")
        plan: dict[int, tuple[Any, Any, int]] = {}
        for axis, start, end, step in zip(axes, fields["starts"], fields["ends"], steps):
            axis = normalize_axis(self, axis, rank)
            if axis in plan:
                raise ShapeError(f"{label(self)}: axis {axis} is sliced twice (axes {axes})")
            if step == 0:
                raise ShapeError(f"{label(self)}: steps must not be 0 (axis {axis})")
            plan[axis] = (start, end, step)
        return plan

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_input_count(self, len(input_shapes), 1 + len(self.tensor_inputs))
        shape = list(input_shapes[0])
        for axis, (start, end, step) in self._plan(len(shape), self._fields(input_values)).items():
            shape[axis] = _sliced_length(shape[axis], start, end, step)
        return [shape]

    def output_values(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs | None]:
        data = input_values[0]
        if data is None or len(input_shapes[0]) != 1:
            return [None]
        plan = self._plan(1, self._fields(input_values))
        if not plan:
            return [list(data)]
        start, end, step = plan[0]
        bounds = constant_ints([start, end])
        return [None] if bounds is None else [list(data[onnx_slice(len(data), bounds[0], bounds[1], step)])]

    # --- kernel ------------------------------------------------------------------------
    def prepare(self, input_shapes: Sequence[tuple[int, ...]], output_shapes: Sequence[tuple[int, ...]]) -> None:
        self._slices = None
        bound = self.bound_values[1 : 1 + len(self.tensor_inputs)]
        if not self.tensor_inputs or (len(bound) == len(self.tensor_inputs) and all(v is not None for v in bound)):
            fields = {name: [constant(v) for v in values] for name, values in self.static.items()}
            for name, known in zip(self.tensor_inputs, bound):  # shape tensors: their values are bound
                fields[name] = [constant(v) for v in known or ()]
            self._slices = self._concrete(tuple(input_shapes[0]), self._complete(fields))

    def _concrete(self, shape: tuple[int, ...], fields: dict[str, ShapeExprs]) -> tuple[slice, ...]:
        slices = [slice(None)] * len(shape)
        for axis, (start, end, step) in self._plan(len(shape), fields).items():
            slices[axis] = onnx_slice(shape[axis], start.get_constant_value(), end.get_constant_value(), step)
        return tuple(slices)

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x = inputs[0]
        slices = self._slices
        if slices is None:
            fields = {name: [constant(v) for v in values] for name, values in self.static.items()}
            for position, (name, array) in enumerate(zip(self.tensor_inputs, inputs[1:]), start=1):
                fields[name] = [constant(v) for v in self.input_ints(position, array)]
            slices = self._concrete(x.shape, self._complete(fields))
        outputs[0][...] = x[slices]

    def direct_launch(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any) -> Any:
        """The slice known at bind as a view, copied per run."""
        if xp is not np or self._slices is None:
            return None
        return assign(outputs[0], inputs[0][self._slices])


def onnx_slice(dim: int, start: int, end: int, step: int) -> slice:
    """The Python slice selecting what ONNX's Slice selects on an axis of length ``dim``.

    ONNX clamps a negative-step start into ``[0, dim - 1]`` where Python would
    select nothing (``x[-9::-1]`` of 5 elements is ``[x[0]]`` in ONNX).
    """
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        return slice(min(max(start, 0), dim), min(max(end, 0), dim), step)
    first, stop = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
    if first < 0:
        return slice(0, 0, 1)
    return slice(first, None if stop < 0 else stop, step)


def _normalized(value: IDimensionExpr, dim: IDimensionExpr) -> IDimensionExpr:
    """``value + dim`` where ``value`` is negative."""
    if value.is_constant():
        v = value.get_constant_value()
        if v <= -_HUGE:
            return constant(-_HUGE)
        return operation(DimensionOperation.SUM, value, dim) if v < 0 else value
    wrapped = operation(DimensionOperation.SUM, value, dim)
    return select(operation(DimensionOperation.LESS, value, constant(0)), wrapped, value)


def _clamped(value: IDimensionExpr, low: int, high: IDimensionExpr) -> IDimensionExpr:
    """``value`` clamped to ``[low, high]``, knowing ``high >= low`` (a dimension, or a dimension - 1)."""
    if value.is_constant():
        v = value.get_constant_value()
        if v <= low:
            return operation(DimensionOperation.MIN, constant(low), high)
        if v >= _HUGE:
            return high
    return clamp(value, constant(low), high)


def _sliced_length(dim: IDimensionExpr, start: IDimensionExpr, end: IDimensionExpr, step: int) -> IDimensionExpr:
    """ONNX's output length of one sliced axis."""
    start, end = _normalized(start, dim), _normalized(end, dim)
    if step > 0:
        first, stop = _clamped(start, 0, dim), _clamped(end, 0, dim)
        span = operation(DimensionOperation.SUB, stop, first)
    else:
        last = operation(DimensionOperation.SUB, dim, constant(1))
        first, stop = _clamped(start, 0, last), _clamped(end, -1, last)
        span = operation(DimensionOperation.SUB, first, stop)
    length = operation(DimensionOperation.CEIL_DIV, span, constant(abs(step)))
    return operation(DimensionOperation.MAX, length, constant(0))
