"""Helpers shared by the tensor-manipulation operators (gather, slice, split, expand …).

Axes follow ONNX: negative axes count from the end. Values of shape tensors
(``input_values``) are lists of dimension expressions; a 0-d tensor's value is
a list of one expression.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.errors import NetworkError, ShapeError, TypeMismatchError
from ..core.types import DataType
from ..shape import DimensionOperation, IDimensionExpr, constant, operation
from .base import Operator, ShapeExprs, host_ints
from .elementwise import broadcast_dim, label

__all__ = [
    "INDEX_TYPES",
    "along",
    "broadcast_shapes",
    "clamp",
    "constant_ints",
    "expect_index_type",
    "expect_input_count",
    "host_ints",
    "normalize_axis",
    "select",
    "values_of",
    "volume",
]

INDEX_TYPES = frozenset({DataType.INT32, DataType.INT64})


def along(axis: int, index: slice) -> tuple[slice, ...]:
    """An indexing key applying ``index`` to ``axis`` and taking every element of the axes before it."""
    key = [slice(None)] * (axis + 1)
    key[axis] = index
    return tuple(key)


def expect_input_count(op: Operator, given: int, low: int, high: int | None = None) -> None:
    """Raise :class:`NetworkError` unless ``low <= given <= high`` (``high`` defaults to ``low``)."""
    high = low if high is None else high
    if not low <= given <= high:
        expected = f"{low}" if low == high else f"{low} to {high}"
        raise NetworkError(f"{label(op)}: expected {expected} input(s), got {given}")


def expect_index_type(op: Operator, dtype: DataType, what: str) -> None:
    """Raise :class:`TypeMismatchError` unless ``dtype`` is INT32 or INT64."""
    if dtype not in INDEX_TYPES:
        raise TypeMismatchError(f"{label(op)}: {what} must be INT32 or INT64, got {dtype.name}")


def normalize_axis(op: Operator, axis: int, rank: int, what: str = "axis") -> int:
    """``axis`` in ``[0, rank)``; negative axes count from the end."""
    if not -rank <= axis < rank:
        raise ShapeError(f"{label(op)}: {what} {axis} is out of range for rank {rank} (valid: {-rank}..{rank - 1})")
    return axis + rank if axis < 0 else axis


def constant_ints(values: Sequence[IDimensionExpr] | None) -> list[int] | None:
    """The integers of ``values`` when every one is a constant, else None."""
    if values is None or not all(v.is_constant() for v in values):
        return None
    return [v.get_constant_value() for v in values]


def values_of(op: Operator, input_values: Sequence[ShapeExprs | None], index: int, what: str) -> ShapeExprs:
    """The build-time values of input ``index``; a clear error when they are not known."""
    value = input_values[index] if index < len(input_values) else None
    if value is None:
        raise NetworkError(
            f"{label(op)}: the {what} (input {index}) must be known when the network is built: a constant, or "
            "computed from shapes and constants; a tensor computed from runtime data cannot set a shape"
        )
    return list(value)


def volume(dims: Sequence[IDimensionExpr]) -> IDimensionExpr:
    """The product of ``dims`` (constants folded)."""
    total = constant(1)
    for dim in dims:
        total = operation(DimensionOperation.PROD, total, dim)
    return total


def clamp(value: IDimensionExpr, low: IDimensionExpr, high: IDimensionExpr) -> IDimensionExpr:
    """``min(max(value, low), high)``."""
    return operation(DimensionOperation.MIN, operation(DimensionOperation.MAX, value, low), high)


def select(condition: IDimensionExpr, if_true: IDimensionExpr, if_false: IDimensionExpr) -> IDimensionExpr:
    """``if_true`` where ``condition`` (0 or 1) is 1, else ``if_false``, as one expression."""
    if condition.is_constant():
        return if_true if condition.get_constant_value() else if_false
    if if_true == if_false:
        return if_true
    chosen = operation(DimensionOperation.PROD, condition, operation(DimensionOperation.SUB, if_true, if_false))
    return operation(DimensionOperation.SUM, if_false, chosen)


def broadcast_shapes(op: Operator, shapes: Sequence[ShapeExprs]) -> ShapeExprs:
    """NumPy/ONNX multidirectional broadcasting: shapes are right-aligned, size-1 dimensions stretch."""
    rank = max((len(s) for s in shapes), default=0)
    out: ShapeExprs = [constant(1)] * rank
    for shape in shapes:
        padded = [constant(1)] * (rank - len(shape)) + list(shape)
        out = [broadcast_dim(op, a, b, axis) for axis, (a, b) in enumerate(zip(out, padded))]
    return out


