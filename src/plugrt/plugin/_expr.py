"""Symbolic integers of the decorator API: ``ShapeExpr``, ``SymInt32`` and their lists.

They wrap plugrt's dimension expressions (:class:`~plugrt.IDimensionExpr`), so
``inp.shape_expr[0] * 2`` inside a ``register`` function is the same expression a
class-based plugin would build with ``IExprBuilder.operation``. Python's ``+ - * //``
and the comparisons ``==`` and ``<`` build expressions too (TensorRT's meaning: they
are symbolic, 1 or 0 once evaluated); :func:`cdiv`, :func:`max` and :func:`min` are
functions of the module.

>>> import plugrt.plugin as trtp
>>> (trtp.ShapeExpr(6) * 2 // 4).constant_value()
3
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Union

from ..core.dims import Dims
from ..core.errors import PluginDefinitionError
from ..shape.builder import constant, operation
from ..shape.expr import DimensionOperation, IDimensionExpr

__all__ = [
    "ShapeExpr",
    "ShapeExprs",
    "SizeTensorShapeExpr",
    "SymExpr",
    "SymExprs",
    "SymInt8",
    "SymInt16",
    "SymInt32",
    "SymIntExpr",
    "SymIntExprs",
    "cdiv",
    "max",
    "min",
]

Operand = Union[int, "SymIntExpr"]


class SymExpr:
    """Base of every symbolic expression of the decorator API."""


class SymIntExpr(SymExpr):
    """A symbolic integer: a constant, a dimension of a tensor, or an expression of them.

    ``SymIntExpr()`` with no value is a *fake* expression (TensorRT makes those where no
    shape is known); operations on it give fakes and asking for its value raises.
    """

    def __init__(self, value: int | IDimensionExpr | SymIntExpr | None = None) -> None:
        self._dim: IDimensionExpr | None
        if value is None:
            self._dim = None
        elif isinstance(value, bool) or not isinstance(value, (int, IDimensionExpr, SymIntExpr)):
            raise PluginDefinitionError(
                f"{type(self).__name__} takes an int, an IDimensionExpr or another symbolic expression, "
                f"got {type(value).__name__} {value!r}"
            )
        elif isinstance(value, int):
            self._dim = constant(value)
        elif isinstance(value, IDimensionExpr):
            self._dim = value
        else:
            self._dim = value._dim

    # --- building ------------------------------------------------------------------
    def _result(self, dim: IDimensionExpr | None) -> SymIntExpr:
        return SymIntExpr(dim)

    def _op(self, op: DimensionOperation, other: Operand) -> SymIntExpr:
        right = _operand(other, f"the {op.name} of symbolic expressions")
        if self._dim is None or right._dim is None:
            return self._result(None)
        return self._result(operation(op, self._dim, right._dim))

    def _rop(self, op: DimensionOperation, other: Operand) -> SymIntExpr:
        return _operand(other, f"the {op.name} of symbolic expressions")._op(op, self)

    def __add__(self, other: Operand) -> SymIntExpr:
        return self._op(DimensionOperation.SUM, other)

    def __radd__(self, other: Operand) -> SymIntExpr:
        return self._rop(DimensionOperation.SUM, other)

    def __sub__(self, other: Operand) -> SymIntExpr:
        return self._op(DimensionOperation.SUB, other)

    def __rsub__(self, other: Operand) -> SymIntExpr:
        return self._rop(DimensionOperation.SUB, other)

    def __mul__(self, other: Operand) -> SymIntExpr:
        return self._op(DimensionOperation.PROD, other)

    def __rmul__(self, other: Operand) -> SymIntExpr:
        return self._rop(DimensionOperation.PROD, other)

    def __floordiv__(self, other: Operand) -> SymIntExpr:
        return self._op(DimensionOperation.FLOOR_DIV, other)

    def __rfloordiv__(self, other: Operand) -> SymIntExpr:
        return self._rop(DimensionOperation.FLOOR_DIV, other)

    def __eq__(self, other: object) -> SymIntExpr:  # type: ignore[override]
        return self._op(DimensionOperation.EQUAL, other)  # type: ignore[arg-type]

    def __lt__(self, other: Operand) -> SymIntExpr:
        return self._op(DimensionOperation.LESS, other)

    __hash__ = None  # type: ignore[assignment]

    # --- reading -------------------------------------------------------------------
    @property
    def is_fake(self) -> bool:
        """True for an expression made where no shape is known; its value cannot be read."""
        return self._dim is None

    @property
    def is_constant(self) -> bool:
        """True when the expression is a build-time constant."""
        return self._expr.is_constant()

    def constant_value(self) -> int:
        """The value of a constant expression."""
        if not self.is_constant:
            raise PluginDefinitionError(
                f"{self!r} is not a build-time constant; check is_constant before reading constant_value()"
            )
        return self._expr.get_constant_value()

    def __bool__(self) -> bool:
        if not self.is_constant:
            raise PluginDefinitionError(
                f"{self!r} has no truth value at build time; compare constants only (check is_constant first)"
            )
        return bool(self._expr.get_constant_value())

    def __int__(self) -> int:
        return self.constant_value()

    @property
    def _expr(self) -> IDimensionExpr:
        """The dimension expression (raises for fakes)."""
        if self._dim is None:
            raise PluginDefinitionError(
                f"{type(self).__name__} is fake (no shape is known where it was made); check is_fake first"
            )
        return self._dim

    def __repr__(self) -> str:
        return f"{type(self).__name__}[{'fake' if self._dim is None else self._dim}]"


class SymInt32(SymIntExpr):
    """A symbolic 32-bit integer (a scalar kernel argument of an AOT plugin)."""


class SymInt16(SymIntExpr):
    """A symbolic 16-bit integer."""


class SymInt8(SymIntExpr):
    """A symbolic 8-bit integer."""


class ShapeExpr(SymInt32):
    """One dimension of a tensor, symbolically (``TensorDesc.shape_expr[i]``)."""

    def _result(self, dim: IDimensionExpr | None) -> ShapeExpr:
        return ShapeExpr(dim)

    def _op(self, op: DimensionOperation, other: Operand) -> SymIntExpr:
        if isinstance(other, SizeTensorShapeExpr):
            raise other._refusal(op)
        return super()._op(op, other)

    @property
    def is_size_tensor(self) -> bool:
        """True when this dimension is a size tensor's value (data-dependent)."""
        return False


class SizeTensorShapeExpr(ShapeExpr):
    """The value of a size tensor used as a dimension (``SizeTensorDesc.expr()``).

    It may only appear as a dimension of an output: arithmetic on it is refused
    (as TensorRT refuses it).
    """

    def __init__(self, size_tensor_desc: Any) -> None:
        super().__init__(None)
        self._size_tensor = size_tensor_desc

    def _refusal(self, op: DimensionOperation) -> PluginDefinitionError:
        return PluginDefinitionError(
            f"a size tensor's expression cannot take part in {op.name}: use it as an output dimension as it is "
            "(TensorRT allows no arithmetic on size tensor expressions)"
        )

    def _op(self, op: DimensionOperation, other: Operand) -> SymIntExpr:
        raise self._refusal(op)

    def _rop(self, op: DimensionOperation, other: Operand) -> SymIntExpr:
        raise self._refusal(op)

    @property
    def is_size_tensor(self) -> bool:
        return True

    @property
    def is_fake(self) -> bool:
        return bool(self._size_tensor.opt.is_fake)

    @property
    def is_constant(self) -> bool:
        return False

    @property
    def _expr(self) -> IDimensionExpr:
        declared = self._size_tensor._declared
        if declared is None:
            raise PluginDefinitionError(
                "a size tensor's expression was used, but its SizeTensorDesc is not one of the plugin's outputs; "
                "return the SizeTensorDesc from the register function too"
            )
        return declared  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return "ShapeExpr[size tensor]"


def _operand(value: Any, where: str) -> SymIntExpr:
    if isinstance(value, SymIntExpr):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return SymIntExpr(value)
    raise PluginDefinitionError(
        f"{where}: operands are ints or symbolic expressions, got {type(value).__name__} {value!r}"
    )


def _both_ints(name: str, first: Any, second: Any) -> SymIntExpr:
    if not isinstance(first, SymIntExpr):
        if not isinstance(second, SymIntExpr):
            raise PluginDefinitionError(
                f"{name}: at least one argument must be a symbolic expression, got {first!r} and {second!r}"
            )
        return ShapeExpr(_operand(first, name)) if isinstance(second, ShapeExpr) else _operand(first, name)
    return first


def cdiv(first: Operand, second: Operand) -> SymIntExpr:
    """Symbolic ceiling division ``ceil(first / second)``; one argument may be an int."""
    return _both_ints("cdiv", first, second)._op(DimensionOperation.CEIL_DIV, second)


def max(first: Operand, second: Operand) -> SymIntExpr:  # noqa: A001 - TensorRT's name
    """Symbolic maximum; one argument may be an int."""
    return _both_ints("max", first, second)._op(DimensionOperation.MAX, second)


def min(first: Operand, second: Operand) -> SymIntExpr:  # noqa: A001 - TensorRT's name
    """Symbolic minimum; one argument may be an int."""
    return _both_ints("min", first, second)._op(DimensionOperation.MIN, second)


class SymExprs:
    """A fixed-length list of symbolic expressions (ints are taken as :class:`SymInt32`)."""

    _item: type[SymIntExpr] = SymInt32

    def __init__(self, length: int) -> None:
        if isinstance(length, bool) or not isinstance(length, int) or length < 0:
            raise PluginDefinitionError(f"{type(self).__name__} takes a length >= 0, got {length!r}")
        self._exprs: list[Any] = [None] * length
        self._frozen = False

    @classmethod
    def from_tuple(cls, exprs: Iterable[SymIntExpr | int]) -> Any:
        """A list holding ``exprs`` (ints become constants)."""
        items = list(exprs)
        made = cls(len(items))
        for i, item in enumerate(items):
            made[i] = item
        return made

    def _convert(self, index: int, value: Any) -> SymIntExpr:
        if isinstance(value, SymIntExpr):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return self._item(value)
        raise PluginDefinitionError(
            f"{type(self).__name__}[{index}] takes an int or a symbolic expression, got {type(value).__name__} {value!r}"
        )

    def __setitem__(self, index: int, value: Any) -> None:
        if self._frozen:
            raise PluginDefinitionError(
                f"{type(self).__name__} of an input tensor is read-only; describe outputs with inp.like() or from_shape_expr"
            )
        if not -len(self._exprs) <= index < len(self._exprs):
            raise IndexError(f"{type(self).__name__} index {index} is out of range (length {len(self._exprs)})")
        self._exprs[index] = self._convert(index, value)

    def __getitem__(self, index: int) -> Any:
        return self._exprs[index]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._exprs)

    def __len__(self) -> int:
        return len(self._exprs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}[{', '.join(repr(e) for e in self._exprs)}]"


class ShapeExprs(SymExprs):
    """The symbolic shape of a tensor: one :class:`ShapeExpr` per dimension."""

    _item = ShapeExpr

    def __init__(self, length: int) -> None:
        if isinstance(length, int) and length > Dims.MAX_DIMS:
            raise PluginDefinitionError(
                f"ShapeExprs holds at most Dims.MAX_DIMS = {Dims.MAX_DIMS} dimensions, got {length}"
            )
        super().__init__(length)

    def _convert(self, index: int, value: Any) -> SymIntExpr:
        converted = super()._convert(index, value)
        return converted if isinstance(converted, ShapeExpr) else ShapeExpr(converted)

    def numel(self) -> ShapeExpr:
        """The number of elements, symbolically."""
        total: SymIntExpr = ShapeExpr(1)
        for i, dim in enumerate(self._exprs):
            if dim is None:
                raise PluginDefinitionError(f"ShapeExprs.numel: dimension {i} was never set")
            total = total * dim
        return ShapeExpr(total)

    def _copy(self) -> ShapeExprs:
        made = ShapeExprs(len(self._exprs))
        made._exprs = list(self._exprs)
        return made


class SymIntExprs(SymExprs):
    """A list of symbolic integers (the scalar arguments an ``aot_impl`` returns)."""
