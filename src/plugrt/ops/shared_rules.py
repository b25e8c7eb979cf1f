"""Type and shape rules many operators share.

Mixins give an operator a whole rule (list them before :class:`Operator`'s
subclasses in the bases); the functions check one thing and raise with the
message form every operator uses.

- :class:`SameShape`: ``input_count`` inputs, one output shaped like input 0.
- :class:`FloatInput`: ``input_count`` inputs, input 0 FLOAT or HALF, the output of its type.
- :func:`expect_type`: one type among those allowed.
- :func:`expect_float_inputs`: a number of inputs, every one FLOAT or HALF.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import ClassVar

from ..core.errors import NetworkError, TypeMismatchError
from ..core.types import DataType
from .base import InputShapes, InputValues, Operator, ShapeExprs
from .elementwise import FLOAT_TYPES, expect_inputs, label

__all__ = ["FloatInput", "SameShape", "expect_float_inputs", "expect_type"]


def expect_type(op: Operator, dtype: DataType, allowed: Collection[DataType], what: str, valid: str = "") -> None:
    """Raise :class:`TypeMismatchError` (``what takes valid, got dtype``) unless ``dtype`` is allowed.

    ``valid`` names the allowed types; by default they are listed by name, in order.
    """
    if dtype not in allowed:
        valid = valid or ", ".join(sorted(t.name for t in allowed))
        raise TypeMismatchError(f"{label(op)}: {what} takes {valid}, got {dtype.name}")


def expect_float_inputs(op: Operator, input_types: Sequence[DataType], count: int) -> None:
    """Raise unless there are ``count`` inputs (:class:`NetworkError`), each FLOAT or HALF (:class:`TypeMismatchError`)."""
    if len(input_types) != count:
        raise NetworkError(f"{label(op)}: expected {count} input(s), got {len(input_types)}")
    for index, dtype in enumerate(input_types):
        if dtype not in FLOAT_TYPES:
            raise TypeMismatchError(f"{label(op)}: input {index} must be FLOAT or HALF, got {dtype.name}")


class SameShape(Operator):
    """Shape rule: ``input_count`` inputs, and one output of input 0's shape."""

    #: how many inputs the operator takes
    input_count: ClassVar[int] = 1

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), self.input_count)
        return [list(input_shapes[0])]


class FloatInput(Operator):
    """Type rule: ``input_count`` inputs, input 0 FLOAT or HALF, and one output of its type.

    A wrong type raises ``<title> takes FLOAT or HALF, got <type>``; ``title``
    defaults to the operator's kind.
    """

    input_count: ClassVar[int] = 1
    #: how type errors name the operation
    title: ClassVar[str] = ""

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), self.input_count)
        expect_type(self, input_types[0], FLOAT_TYPES, self.title or self.kind, "FLOAT or HALF")
        return [input_types[0]]
