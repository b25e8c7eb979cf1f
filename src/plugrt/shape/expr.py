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
from typing import Any

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

    __slots__ = ("_args", "_forms", "_hash", "_kind", "_name", "_nonneg", "_op", "_value", "depth")

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
        #: never negative, judged from structure: symbols and size tensors are dimensions
        self._nonneg: bool = _nonnegative(kind, value, op, args)
        #: canonical forms cached by shape.simplify (linear, monomial)
        self._forms: dict[str, Any] = {}
        #: nesting levels below this node (0 for a leaf)
        self.depth: int = 1 + max(a.depth for a in args) if args else 0

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

    def nodes(self, known: Mapping[IDimensionExpr, Any] | None = None) -> list[IDimensionExpr]:
        """Every distinct sub-expression, children before parents (shared ones once).

        Sub-expressions in ``known`` (and what is below them) are left out.
        """
        order: list[IDimensionExpr] = []
        seen: set[int] = set()
        if known is not None and self in known:
            return order
        stack: list[tuple[IDimensionExpr, bool]] = [(self, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                order.append(node)
                continue
            if id(node) in seen:
                continue
            seen.add(id(node))
            stack.append((node, True))
            stack.extend(
                (arg, False)
                for arg in reversed(node._args)
                if id(arg) not in seen and (known is None or arg not in known)
            )
        return order

    def evaluate(self, env: Mapping[str, int]) -> int:
        """The value for concrete symbol values ``env``."""
        if self._kind == "const":
            return self._value
        values: dict[int, int] = {}
        for node in self.nodes():
            kind = node._kind
            if kind == "const":
                values[id(node)] = node._value
            elif kind == "op":
                assert node._op is not None
                a, b = node._args
                values[id(node)] = int(_APPLY[node._op](values[id(a)], values[id(b)]))
            elif kind == "size" and node._name not in env:
                raise ShapeError(f"dimension {node._name!r} is not known yet")
            else:
                try:
                    values[id(node)] = env[node._name]
                except KeyError:
                    raise ShapeError(f"dimension {node._name!r} is not known yet") from None
        return values[id(self)]

    def bounds(self, low: Mapping[str, int], high: Mapping[str, int]) -> Interval:
        """Smallest and largest value when each symbol ranges over [low, high].

        Interval arithmetic on the expression refined for that box: a max, min or
        comparison whose outcome the intervals decide is replaced by it and the
        expression re-simplified, so that one size spelled two ways (a
        convolution's floor division and an exporter's clamped truncation)
        cancels in a quotient instead of dividing the largest numerator by the
        smallest denominator.
        """
        return refined_bounds(self, low, high)[1]

    def refined(self, low: Mapping[str, int], high: Mapping[str, int]) -> IDimensionExpr:
        """An expression equal to this one wherever every symbol lies in [low, high], simplified for that box."""
        return refined_bounds(self, low, high)[0]

    # --- Python protocol ---------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IDimensionExpr):
            return NotImplemented
        # Iterative, so two deep expressions compare without recursion.
        stack = [(self, other)]
        while stack:
            x, y = stack.pop()
            if x is y:
                continue
            if x._hash != y._hash or (x._kind, x._value, x._name, x._op) != (y._kind, y._value, y._name, y._op):
                return False
            if len(x._args) != len(y._args):
                return False
            stack.extend(zip(x._args, y._args))
        return True

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        # Children first with shared ones once, each text cut at _REPR_LIMIT: a deep or
        # heavily shared expression prints in linear time.
        texts: dict[int, str] = {}
        for node in self.nodes():
            if node._kind == "const":
                text = str(node._value)
            elif node._kind in ("sym", "size"):
                text = node._name
            else:
                assert node._op is not None
                a, b = (texts[id(arg)] for arg in node._args)
                op = node._op
                text = f"({a} {_SYMBOL[op]} {b})" if op in _SYMBOL else f"{op.name.lower()}({a}, {b})"
            texts[id(node)] = text if len(text) <= _REPR_LIMIT else text[: _REPR_LIMIT - 3] + "..."
        return texts[id(self)]


_REPR_LIMIT = 2000


def _nonnegative(kind: str, value: int, op: DimensionOperation | None, args: tuple[IDimensionExpr, ...]) -> bool:
    if kind == "const":
        return value >= 0
    if kind != "op":
        return True
    a, b = args
    if op in (DimensionOperation.EQUAL, DimensionOperation.LESS):
        return True
    if op == DimensionOperation.MAX:
        return a._nonneg or b._nonneg
    if op == DimensionOperation.PROD:
        return (a._nonneg and b._nonneg) or a == b
    if op == DimensionOperation.SUB:
        return False  # canonical sums subtract only what can be positive
    return a._nonneg and b._nonneg  # SUM, MIN, FLOOR_DIV, CEIL_DIV


def refined_bounds(
    expr: IDimensionExpr, low: Mapping[str, int], high: Mapping[str, int]
) -> tuple[IDimensionExpr, Interval]:
    """(refined expression, interval) of ``expr`` over the box [low, high]; see :meth:`IDimensionExpr.bounds`."""
    from .builder import constant, operation

    refined: dict[IDimensionExpr, IDimensionExpr] = {}
    intervals: dict[IDimensionExpr, Interval] = {}

    def interval(node: IDimensionExpr) -> Interval:
        known = intervals.get(node)
        if known is not None:
            return known
        for sub in node.nodes(intervals):
            if sub._kind == "const":
                intervals[sub] = (sub._value, sub._value)
            elif sub._kind == "sym":
                if sub._name not in low or sub._name not in high:
                    raise ShapeError(f"dimension {sub._name!r} has no bounds")
                intervals[sub] = (low[sub._name], high[sub._name])
            elif sub._kind == "size":
                intervals[sub] = (0, interval(sub._args[1])[1])
            else:
                assert sub._op is not None
                intervals[sub] = _interval(sub._op, intervals[sub._args[0]], intervals[sub._args[1]])
        return intervals[node]

    for node in expr.nodes():
        if node._kind != "op":
            refined[node] = node
            continue
        assert node._op is not None
        op = node._op
        a, b = refined[node._args[0]], refined[node._args[1]]
        (alo, ahi), (blo, bhi) = interval(a), interval(b)
        result: IDimensionExpr | None = None
        if op in (DimensionOperation.MAX, DimensionOperation.MIN):
            if alo >= bhi or blo >= ahi:
                a_wins = alo >= bhi
                result = a if a_wins == (op == DimensionOperation.MAX) else b
        elif op == DimensionOperation.LESS:
            if ahi < blo or alo >= bhi:
                result = constant(int(ahi < blo))
        elif op == DimensionOperation.EQUAL and (ahi < blo or bhi < alo):
            result = constant(0)
        if result is None:
            result = node if (a, b) == node._args else operation(op, a, b)
        refined[node] = result
    top = refined[expr]
    return top, interval(top)


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
