"""Dimension expressions: symbolic shapes that fold, evaluate and bound.

A tensor's shape inside a network is a list of :class:`IDimensionExpr`. Leaves are
constants, symbols (one per dynamic dimension of a network input, named
``"input_name[axis]"``) and size tensors (data-dependent sizes declared by plugins).
Shape rules combine them with :class:`DimensionOperation`; the result is
evaluated for concrete input shapes at run time, and bounded over an
optimization profile at build time (interval arithmetic) for memory planning.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..core.enums import TrtEnum
from ..core.errors import ShapeError

__all__ = ["DimensionOperation", "IDimensionExpr", "Interval"]

Interval = tuple[int, int]


class DimensionOperation(TrtEnum):
    """Operations of :meth:`IExprBuilder.operation` (TensorRT's values)."""

    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    SUB = 4
    EQUAL = 5
    LESS = 6
    FLOOR_DIV = 7
    CEIL_DIV = 8


def _floor_div(a: int, b: int) -> int:
    if b == 0:
        raise ShapeError(f"division by zero in a dimension expression ({a} / 0)")
    return a // b


def _ceil_div(a: int, b: int) -> int:
    if b == 0:
        raise ShapeError(f"division by zero in a dimension expression ({a} / 0)")
    return -(-a // b)


_APPLY: dict[DimensionOperation, Callable[[int, int], int]] = {
    DimensionOperation.SUM: lambda a, b: a + b,
    DimensionOperation.PROD: lambda a, b: a * b,
    DimensionOperation.MAX: max,
    DimensionOperation.MIN: min,
    DimensionOperation.SUB: lambda a, b: a - b,
    DimensionOperation.EQUAL: lambda a, b: int(a == b),
    DimensionOperation.LESS: lambda a, b: int(a < b),
    DimensionOperation.FLOOR_DIV: _floor_div,
    DimensionOperation.CEIL_DIV: _ceil_div,
}

_SYMBOL = {
    DimensionOperation.SUM: "+",
    DimensionOperation.PROD: "*",
    DimensionOperation.SUB: "-",
    DimensionOperation.FLOOR_DIV: "//",
    DimensionOperation.CEIL_DIV: "/^",
    DimensionOperation.EQUAL: "==",
    DimensionOperation.LESS: "<",
}


class IDimensionExpr:
    """One dimension as an expression (immutable, compared structurally).

    Build them with :class:`~plugrt.IExprBuilder`; plugins receive them in
    ``get_output_dimensions`` / ``get_output_shapes``.
    """

    __slots__ = ("_args", "_hash", "_kind", "_name", "_op", "_value")

    def __init__(
        self,
        kind: str,
        *,
        value: int = 0,
        name: str = "",
        op: DimensionOperation | None = None,
        args: tuple[IDimensionExpr, ...] = (),
    ) -> None:
        self._kind = kind
        self._value = value
        self._name = name
        self._op = op
        self._args = args
        self._hash = hash((kind, value, name, op, args))

    # --- TensorRT's API -------------------------------------------------------
    def is_constant(self) -> bool:
        """True when the expression is a known integer."""
        return self._kind == "const"

    def get_constant_value(self) -> int:
        """The integer value of a constant expression."""
        if self._kind != "const":
            raise ShapeError(f"dimension expression {self} is not a constant")
        return self._value

    def is_size_tensor(self) -> bool:
        """True when this expression stands for a data-dependent size tensor."""
        return self._kind == "size"

    # --- evaluation -------------------------------------------------------------
    @property
    def symbol(self) -> str:
        """Name of a symbol or size-tensor leaf ('' for other expressions)."""
        return self._name

    @property
    def size_bounds(self) -> tuple[IDimensionExpr, IDimensionExpr]:
        """(opt, upper) of a size-tensor leaf."""
        if self._kind != "size":
            raise ShapeError(f"{self} is not a size tensor")
        return self._args[0], self._args[1]

    def symbols(self) -> set[str]:
        """Names of every symbol and size tensor this expression depends on."""
        if self._kind in ("sym", "size"):
            return {self._name}
        found: set[str] = set()
        for arg in self._args:
            found |= arg.symbols()
        return found

    def evaluate(self, env: Mapping[str, int]) -> int:
        """The value for concrete symbol values ``env``."""
        kind = self._kind
        if kind == "const":
            return self._value
        if kind == "op":
            assert self._op is not None
            a, b = self._args
            return int(_APPLY[self._op](a.evaluate(env), b.evaluate(env)))
        try:
            return env[self._name]
        except KeyError:
            raise ShapeError(f"dimension {self._name!r} is not known yet") from None

    def bounds(self, low: Mapping[str, int], high: Mapping[str, int]) -> Interval:
        """Smallest and largest value when each symbol ranges over [low, high]."""
        kind = self._kind
        if kind == "const":
            return self._value, self._value
        if kind == "sym":
            if self._name not in low or self._name not in high:
                raise ShapeError(f"dimension {self._name!r} has no bounds")
            return low[self._name], high[self._name]
        if kind == "size":
            return 0, self._args[1].bounds(low, high)[1]
        assert self._op is not None
        return _interval(self._op, self._args[0].bounds(low, high), self._args[1].bounds(low, high))

    # --- Python protocol ---------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IDimensionExpr):
            return NotImplemented
        return self._hash == other._hash and (
            self._kind,
            self._value,
            self._name,
            self._op,
            self._args,
        ) == (other._kind, other._value, other._name, other._op, other._args)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        if self._kind == "const":
            return str(self._value)
        if self._kind in ("sym", "size"):
            return self._name
        assert self._op is not None
        a, b = self._args
        if self._op in _SYMBOL:
            return f"({a} {_SYMBOL[self._op]} {b})"
        return f"{self._op.name.lower()}({a}, {b})"


def _interval(op: DimensionOperation, a: Interval, b: Interval) -> Interval:
    (alo, ahi), (blo, bhi) = a, b
    if op in (DimensionOperation.SUM, DimensionOperation.MAX, DimensionOperation.MIN):
        f = _APPLY[op]
        return int(f(alo, blo)), int(f(ahi, bhi))
    if op == DimensionOperation.SUB:
        return alo - bhi, ahi - blo
    if op == DimensionOperation.EQUAL:
        if alo == ahi == blo == bhi:
            return 1, 1
        return (0, 0) if ahi < blo or bhi < alo else (0, 1)
    if op == DimensionOperation.LESS:
        if ahi < blo:
            return 1, 1
        return (0, 0) if alo >= bhi else (0, 1)
    # Floor/ceil division is monotone in the divisor on each side of zero, so the
    # extremes are at the interval ends or at +-1 when the interval crosses them.
    divisors = [v for v in (blo, bhi, 1 if blo <= 1 <= bhi else None, -1 if blo <= -1 <= bhi else None) if v]
    if op == DimensionOperation.PROD:
        divisors = [blo, bhi]
    if not divisors:
        raise ShapeError("division by a dimension that is always zero")
    corners = [int(_APPLY[op](x, y)) for x in (alo, ahi) for y in divisors]
    return min(corners), max(corners)
