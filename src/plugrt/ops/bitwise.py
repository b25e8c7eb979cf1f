"""Bitwise operations on integers: AND, OR, XOR, NOT and the shifts (ONNX ``Bitwise*``, ``BitShift``).

Binary forms broadcast as ONNX does (multidirectional, shapes right-aligned). A shift by a negative amount or by at
least the bit width saturates, as NumPy's and ONNX's reference do: 0, or -1 for a
right shift of a negative value (C leaves it undefined).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import TypeMismatchError
from ..core.types import DataType
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .elementwise import expect_inputs, label
from .params import param
from .tensor_common import broadcast_shapes

__all__ = ["BitwiseOperator"]

_UFUNCS = {
    "AND": "bitwise_and",
    "OR": "bitwise_or",
    "XOR": "bitwise_xor",
    "NOT": "invert",
    "LEFT_SHIFT": "left_shift",
    "RIGHT_SHIFT": "right_shift",
}
_INT_TYPES = frozenset({DataType.INT8, DataType.UINT8, DataType.INT32, DataType.INT64})


@register_operator
class BitwiseOperator(Operator):
    """``out = op(a, b)`` (``op(a)`` for NOT); params: ``op`` (AND, OR, XOR, NOT, LEFT_SHIFT, RIGHT_SHIFT)."""

    kind = "bitwise"
    op: str = param(choices=_UFUNCS)

    @property
    def arity(self) -> int:
        """How many inputs the operation takes (NOT one, the others two)."""
        return 1 if self.op == "NOT" else 2

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), self.arity)
        if any(t != input_types[0] for t in input_types) or input_types[0] not in _INT_TYPES:
            names = ", ".join(t.name for t in input_types)
            raise TypeMismatchError(f"{label(self)}: bitwise {self.op} needs integer inputs of one type, got {names}")
        return [input_types[0]]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), self.arity)
        return [broadcast_shapes(self, input_shapes)]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        out = outputs[0]
        if self.op in ("LEFT_SHIFT", "RIGHT_SHIFT"):
            a, b = inputs
            bits = out.dtype.itemsize * 8
            shift = xp.asarray(b)
            too_far = (shift >= bits) | (shift < 0)
            getattr(xp, _UFUNCS[self.op])(a, xp.where(too_far, 0, shift).astype(out.dtype), out=out)
            filled = xp.where(xp.asarray(a) < 0, -1, 0) if self.op == "RIGHT_SHIFT" else 0
            out[...] = xp.where(too_far, filled, out)
            return
        getattr(xp, _UFUNCS[self.op])(*inputs, out=out)
