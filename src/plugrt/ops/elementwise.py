"""Elementwise binary operations, and the broadcasting helpers other operators share.

Integer DIV truncates toward zero (C semantics, as TensorRT); FLOOR_DIV rounds
toward negative infinity. Comparisons give BOOL; AND/OR/XOR take BOOL inputs.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..backends.cuda_matmul import torch_for_graphs
from ..core.errors import NetworkError, ShapeError, TypeMismatchError
from ..core.types import DataType
from ..shape import DimensionOperation, IDimensionExpr, constant, operation
from ..shape.simplify import nonnegative
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .params import param
from .torch_cpu import view

__all__ = ["ARITHMETIC_UFUNCS", "FLOAT_TYPES", "NUMERIC_TYPES", "ElementwiseOperator", "broadcast_dim", "expect_inputs", "label"]
__all__ += ["floor_div_value", "merge_dim", "quiet", "truncating_div"]

FLOAT_TYPES = frozenset({DataType.FLOAT, DataType.HALF})
NUMERIC_TYPES = FLOAT_TYPES | {DataType.INT8, DataType.INT32, DataType.INT64, DataType.UINT8}


def label(op: Operator) -> str:
    """How messages name an operator: its layer name, else its kind."""
    return op.name or op.kind


def expect_inputs(op: Operator, given: int, expected: int) -> None:
    """Raise :class:`NetworkError` unless the operator got ``expected`` inputs."""
    if given != expected:
        raise NetworkError(f"{label(op)}: expected {expected} input(s), got {given}")


def broadcast_dim(op: Operator, a: IDimensionExpr, b: IDimensionExpr, axis: int) -> IDimensionExpr:
    """One broadcast dimension: equal, or one of them 1; two different constants raise."""
    if a == b:
        return a
    a_const = a.get_constant_value() if a.is_constant() else None
    b_const = b.get_constant_value() if b.is_constant() else None
    if a_const == 1:
        return b
    if b_const == 1:
        return a
    if a_const is not None and b_const is not None:
        raise ShapeError(
            f"{label(op)}: dimension {axis} is {a_const} and {b_const}; they must be equal or one of them 1"
        )
    op.broadcast_pairs.append((axis, a, b))  # checked at each profile's shapes and at shape change
    if a_const is not None:
        return a
    if b_const is not None:
        return b
    return operation(DimensionOperation.MAX, a, b)


def merge_dim(op: Operator, a: IDimensionExpr, b: IDimensionExpr, what: str) -> IDimensionExpr:
    """Two dimensions that must be equal; two different constants raise."""
    if a.is_constant() and b.is_constant() and a != b:
        raise ShapeError(f"{label(op)}: {what} must match, got {a} and {b}")
    return b if b.is_constant() and not a.is_constant() else a


def quiet(xp: Any) -> contextlib.AbstractContextManager[Any]:
    """Silence NumPy's floating-point warnings: inf/nan results are the answer, as on a GPU.

    Kernels do not enter it on every run (it costs microseconds); wrap a whole
    inference in it instead.
    """
    return np.errstate(all="ignore") if xp is np else contextlib.nullcontext()


#: ElementWiseOperation names of the arithmetic operations and their ufuncs
ARITHMETIC_UFUNCS = {
    "SUM": "add",
    "PROD": "multiply",
    "MAX": "maximum",
    "MIN": "minimum",
    "SUB": "subtract",
    "DIV": "divide",
    "POW": "power",
    "FLOOR_DIV": "floor_divide",
}
_LOGICAL = {"AND": "logical_and", "OR": "logical_or", "XOR": "logical_xor"}
_COMPARISON = {"EQUAL": "equal", "GREATER": "greater", "LESS": "less"}
_UFUNCS = ARITHMETIC_UFUNCS | _LOGICAL | _COMPARISON
_VALUE_OPS = {
    "SUM": DimensionOperation.SUM,
    "SUB": DimensionOperation.SUB,
    "PROD": DimensionOperation.PROD,
    "FLOOR_DIV": DimensionOperation.FLOOR_DIV,
    "MAX": DimensionOperation.MAX,
    "MIN": DimensionOperation.MIN,
}


@register_operator
class ElementwiseOperator(Operator):
    """``out = op(a, b)`` with broadcasting; params: ``op`` (an ElementWiseOperation name)."""

    kind = "elementwise"
    op: str = param(choices=_UFUNCS)

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 2)
        a, b = input_types
        if a != b:
            raise TypeMismatchError(f"{label(self)}: {self.op} needs inputs of one type, got {a.name} and {b.name}")
        if self.op in _LOGICAL and a != DataType.BOOL:
            raise TypeMismatchError(f"{label(self)}: {self.op} needs BOOL inputs, got {a.name}")
        if self.op in ARITHMETIC_UFUNCS or self.op in ("GREATER", "LESS"):
            if a not in NUMERIC_TYPES:
                valid = ", ".join(sorted(t.name for t in NUMERIC_TYPES))
                raise TypeMismatchError(f"{label(self)}: {self.op} needs numeric inputs ({valid}), got {a.name}")
        return [DataType.BOOL if self.op in _COMPARISON else a]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 2)
        a, b = input_shapes
        if len(a) != len(b):
            raise ShapeError(
                f"{label(self)}: inputs must have the same rank, got {len(a)} and {len(b)} "
                "(insert a shuffle to add size-1 dimensions)"
            )
        return [[broadcast_dim(self, x, y, axis) for axis, (x, y) in enumerate(zip(a, b))]]

    def output_values(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs | None]:
        a, b = [*input_values, None, None][:2]
        if a is None or b is None or (len(a) != len(b) and 1 not in (len(a), len(b))):
            return [None]
        n = max(len(a), len(b))
        a, b = (a * n if len(a) == 1 else a), (b * n if len(b) == 1 else b)
        if self.op in _VALUE_OPS:
            return [[operation(_VALUE_OPS[self.op], x, y) for x, y in zip(a, b)]]
        # comparisons of shape values stay symbolic too (0/1 values), e.g. Where(Equal(shape, 0), ...)
        if self.op == "EQUAL":
            return [[operation(DimensionOperation.EQUAL, x, y) for x, y in zip(a, b)]]
        if self.op == "LESS":
            return [[operation(DimensionOperation.LESS, x, y) for x, y in zip(a, b)]]
        if self.op == "GREATER":
            return [[operation(DimensionOperation.LESS, y, x) for x, y in zip(a, b)]]
        if self.op == "DIV":
            quotients = [truncating_div(x, y) for x, y in zip(a, b)]
            return [None if any(q is None for q in quotients) else quotients]  # type: ignore[list-item]
        return [None]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        a, b = inputs
        out = outputs[0]
        if self.op == "DIV" and out.dtype.kind in "iu":
            _int_divide(xp, a, b, out)
            return
        getattr(xp, _UFUNCS[self.op])(a, b, out=out)

    def direct_launch(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any) -> Any:
        """The ufunc itself on NumPy, its output passed by position (integer DIV rounds toward zero through
        :meth:`run`; MAX and MIN too: NumPy 2.4 deprecates their output by position). On a GPU, FLOAT and HALF
        ``SUM``, ``SUB``, ``PROD`` and ``DIV`` are PyTorch's kernel where torch has CUDA (:data:`_TORCH_OPS`): the
        same IEEE operation, launched in ~6 us of host time against CuPy's ~20 (an eager run's residual add)."""
        if xp is not np:
            return _torch_launch(self.op, inputs, outputs[0])
        if self.op in ("MAX", "MIN") or (self.op == "DIV" and outputs[0].dtype.kind in "iu"):
            return None
        return getattr(np, _UFUNCS[self.op]), (inputs[0], inputs[1], outputs[0])


#: the operations a GPU's elementwise layer runs as PyTorch's kernel (FLOAT and HALF)
_TORCH_OPS = {"SUM": "add", "SUB": "sub", "PROD": "mul", "DIV": "div"}


def _torch_launch(op: str, inputs: Sequence[Any], out: Any) -> Any:
    """``torch.<op>(a, b, out=out)`` over views of the device arrays made now, or None (another operation or type,
    or no torch with CUDA)."""
    name = _TORCH_OPS.get(op)
    if name is None or out.dtype not in (np.float32, np.float16) or any(a.dtype != out.dtype for a in inputs):
        return None
    torch = torch_for_graphs()
    if torch is None:
        return None
    a, b, target = (view(x) for x in (*inputs, out))
    return functools.partial(getattr(torch, name), out=target), (a, b)


def _int_divide(xp: Any, a: Any, b: Any, out: Any) -> None:
    """Integer division rounded toward zero: floor division, plus one where it rounded down.

    The correction is computed before ``out`` is written, so ``out`` may alias an input.
    """
    with quiet(xp):
        rounded_down = xp.not_equal(xp.remainder(a, b), 0) & xp.not_equal(xp.less(a, 0), xp.less(b, 0))
        xp.floor_divide(a, b, out=out)
    out += rounded_down


def floor_div_value(a: IDimensionExpr, b: IDimensionExpr) -> IDimensionExpr | None:
    """``a // b`` (rounded down) as an expression; None where ``b``'s sign is unknown (then 0 is possible too)."""
    if not b.is_constant() and not nonnegative(b):
        return None
    return operation(DimensionOperation.FLOOR_DIV, a, b)


def truncating_div(a: IDimensionExpr, b: IDimensionExpr) -> IDimensionExpr | None:
    """``a / b`` rounded toward zero (integer DIV) as an expression; None where ``b``'s sign is unknown.

    Dimensions are never negative, so a quotient of two of them is a floor
    division. Otherwise, for ``b > 0``, ``trunc(a / b) = max(a // b, 0) + min(ceil(a / b), 0)``
    (one term is zero for either sign of ``a``); a negative constant ``b`` flips the sign.
    """
    if b.is_constant():
        divisor = b.get_constant_value()
        if divisor == 0:
            raise ShapeError(f"elementwise DIV of shape values divides {a} by zero")
        if divisor < 0:
            positive = truncating_div(a, constant(-divisor))
            return None if positive is None else operation(DimensionOperation.SUB, constant(0), positive)
    elif not nonnegative(b):
        return None
    if nonnegative(a):
        return operation(DimensionOperation.FLOOR_DIV, a, b)
    down = operation(DimensionOperation.MAX, operation(DimensionOperation.FLOOR_DIV, a, b), constant(0))
    up = operation(DimensionOperation.MIN, operation(DimensionOperation.CEIL_DIV, a, b), constant(0))
    return operation(DimensionOperation.SUM, down, up)
