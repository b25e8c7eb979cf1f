"""``IExprBuilder`` and ``DimsExprs``: what shape hooks build expressions with."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..core.checked_list import CheckedList
from ..core.errors import ShapeError
from .expr import DimensionOperation, IDimensionExpr
from .simplify import simplified

__all__ = ["DimsExprs", "IExprBuilder", "constant", "operation", "symbol"]


def constant(value: int) -> IDimensionExpr:
    """A constant dimension."""
    return IDimensionExpr("const", value=int(value))


def symbol(name: str) -> IDimensionExpr:
    """A named dynamic dimension (one per dynamic axis of a network input)."""
    return IDimensionExpr("sym", name=name)


def operation(op: DimensionOperation, a: IDimensionExpr, b: IDimensionExpr) -> IDimensionExpr:
    """``op(a, b)`` in canonical form: folded, like terms collected, common factors cancelled.

    See :mod:`plugrt.shape.simplify` for the rewrites.
    """
    op = DimensionOperation(op)
    if not isinstance(a, IDimensionExpr) or not isinstance(b, IDimensionExpr):
        raise ShapeError(
            f"DimensionOperation.{op.name} takes two IDimensionExpr, got {type(a).__name__} and {type(b).__name__}"
        )
    return simplified(op, a, b)


class IExprBuilder:
    """Builds dimension expressions inside shape hooks (TensorRT's ``IExprBuilder``).

    >>> eb = IExprBuilder()
    >>> eb.operation(DimensionOperation.SUM, eb.constant(2), eb.constant(3)).get_constant_value()
    5
    """

    def __init__(self, owner: str = "") -> None:
        self._owner = owner
        self.declared_size_tensors: dict[int, IDimensionExpr] = {}

    def constant(self, value: int) -> IDimensionExpr:
        """A constant dimension."""
        if not isinstance(value, (int,)) and not hasattr(value, "__index__"):
            raise ShapeError(f"IExprBuilder.constant takes an int, got {value!r}")
        return constant(int(value))

    def operation(self, op: DimensionOperation, first: IDimensionExpr, second: IDimensionExpr) -> IDimensionExpr:
        """``op(first, second)``, constant-folded."""
        return operation(op, first, second)

    def declare_size_tensor(self, output_index: int, opt: IDimensionExpr, upper: IDimensionExpr) -> IDimensionExpr:
        """Declare output ``output_index`` as a size tensor (a 0-d int tensor holding a size).

        Returns an expression for the (data-dependent) size, to be used in another
        output's dimensions. ``opt`` is the expected value and ``upper`` a bound
        used to size buffers.
        """
        for name, value in (("opt", opt), ("upper", upper)):
            if not isinstance(value, IDimensionExpr):
                raise ShapeError(f"declare_size_tensor: {name} must be an IDimensionExpr, got {value!r}")
        name = f"{self._owner}:size{int(output_index)}"
        expr = IDimensionExpr("size", name=name, args=(opt, upper))
        self.declared_size_tensors[int(output_index)] = expr
        return expr


class DimsExprs(CheckedList[IDimensionExpr]):
    """A list-like sequence of :class:`IDimensionExpr` (an output shape).

    ``DimsExprs(n)`` makes ``n`` unset entries, ``DimsExprs(other)`` copies.
    """

    def __init__(self, init: int | Iterable[IDimensionExpr] | None = None) -> None:
        if init is None:
            self._items = []
        elif isinstance(init, int):
            if init < 0:
                raise ShapeError(f"DimsExprs length must be >= 0, got {init}")
            self._items = [None] * init  # type: ignore[list-item]  # unset until a shape hook sets them
        elif isinstance(init, DimsExprs):
            self._items = list(init._items)  # a copy keeps unset entries unset
        else:
            self._items = list(init)
            for item in self._items:
                _check_expr(item)

    @property
    def nbDims(self) -> int:
        """Number of dimensions."""
        return len(self._items)

    def _checked(self, value: Any) -> IDimensionExpr:
        return _check_expr(value)

    def append(self, value: IDimensionExpr) -> None:
        """Add a dimension at the end."""
        self._items.append(_check_expr(value))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DimsExprs):
            return self._items == other._items
        if isinstance(other, (list, tuple)):
            return self._items == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"DimsExprs({self._items!r})"

    def unset_positions(self) -> list[int]:
        """Indices of entries that were never set."""
        return [i for i, item in enumerate(self._items) if item is None]


def _check_expr(value: object) -> IDimensionExpr:
    if not isinstance(value, IDimensionExpr):
        raise ShapeError(f"a DimsExprs entry must be an IDimensionExpr, got {type(value).__name__}")
    return value
