"""The einsum operator (ONNX Einsum): Einstein summation over labelled dimensions.

The equation uses letters for dimensions and ``...`` for broadcast dimensions;
without ``->`` the output holds the broadcast dimensions, then the letters that
appear once, in alphabetical order (NumPy's and ONNX's implicit mode).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import NetworkError, ShapeError, TypeMismatchError
from ..core.types import DataType
from ..shape import IDimensionExpr
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .elementwise import NUMERIC_TYPES, label, merge_dim
from .params import param
from .tensor_common import broadcast_shapes

__all__ = ["EinsumOperator", "parse_equation"]


def parse_equation(equation: str, count: int | None = None) -> tuple[list[str], str]:
    """The input terms and the output term of ``equation`` (spaces removed, implicit output made explicit)."""
    text = equation.replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    terms = lhs.split(",")
    for term in [*terms, rhs]:
        letters = term.replace("...", "")
        if not all(ch.isalpha() for ch in letters) or "." in letters:
            raise NetworkError(f"einsum: equation {equation!r} has an invalid term {term!r}")
    if count is not None and len(terms) != count:
        raise NetworkError(f"einsum: equation {equation!r} has {len(terms)} input terms for {count} inputs")
    if not arrow:
        letters = "".join(t.replace("...", "") for t in terms)
        once = sorted(ch for ch in set(letters) if letters.count(ch) == 1)
        rhs = ("..." if any("..." in t for t in terms) else "") + "".join(once)
    return terms, rhs


@register_operator
class EinsumOperator(Operator):
    """params: ``equation`` (str)."""

    kind = "einsum"
    equation: str = param()

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        self.terms, self.output = parse_equation(self.equation)
        self._np_equation = ",".join(self.terms) + "->" + self.output

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        if len(input_types) != len(self.terms):
            raise NetworkError(f"{label(self)}: equation {self.equation!r} needs {len(self.terms)} inputs")
        for dtype in input_types:
            if dtype != input_types[0] or dtype not in NUMERIC_TYPES:
                raise TypeMismatchError(f"{label(self)}: einsum needs numeric inputs of one type, got {input_types}")
        return [input_types[0]]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        if len(input_shapes) != len(self.terms):
            raise NetworkError(f"{label(self)}: equation {self.equation!r} needs {len(self.terms)} inputs")
        sizes: dict[str, IDimensionExpr] = {}
        ellipses: list[ShapeExprs] = []
        for index, (term, shape) in enumerate(zip(self.terms, input_shapes)):
            head, dots, tail = term.partition("...")
            if len(head) + len(tail) > len(shape) or (not dots and len(head) != len(shape)):
                raise ShapeError(f"{label(self)}: term {term!r} does not fit input {index} of rank {len(shape)}")
            extra = len(shape) - len(head) - len(tail)
            ellipses.append(list(shape[len(head) : len(head) + extra]))
            for letter, dim in zip(head + tail, list(shape[: len(head)]) + list(shape[len(head) + extra :])):
                sizes[letter] = merge_dim(self, sizes[letter], dim, f"dimension {letter!r}") if letter in sizes else dim
        broadcast = broadcast_shapes(self, ellipses)
        head, _, tail = self.output.partition("...")
        missing = [ch for ch in head + tail if ch not in sizes]
        if missing:
            raise ShapeError(f"{label(self)}: output letters {missing} appear in no input of {self.equation!r}")
        rest = broadcast if "..." in self.output else []
        return [[sizes[ch] for ch in head] + rest + [sizes[ch] for ch in tail]]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        out = outputs[0]
        out[...] = xp.einsum(self._np_equation, *inputs)
