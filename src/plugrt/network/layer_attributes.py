"""Checked attributes of the standard layers, and the layers' common base class.

A layer attribute is declared once, with the check that runs on every assignment
(``layer.op = ...``), so a wrong value fails where it is set, with a message
naming the layer class and attribute, the expected and the actual value.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Generic, TypeVar, overload

import numpy as np

from ..core.dims import Dims
from ..core.errors import ShapeError, TypeMismatchError
from ..core.types import DataType, nptype
from ..ops.base import Operator, create_operator
from ..ops.rules import TensorInfo, output_info
from ..shape import constant, symbol
from .layer import ILayer
from .layer_enums import Weights
from .tensor import ITensor

__all__ = ["Attribute", "StandardLayer", "check_axis", "check_bool", "check_dims", "check_enum", "check_float"]
__all__ += ["check_mask", "check_permutation", "check_to_type", "check_weights"]

T = TypeVar("T")
E = TypeVar("E", bound=enum.Enum)
_MISSING: Any = object()


class Attribute(Generic[T]):
    """A layer attribute whose assignments pass through ``check(where, value)``."""

    def __init__(self, check: Callable[[str, Any], T], default: T = _MISSING) -> None:
        self._check = check
        self._default = default
        self._name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Attribute[T]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...
    def __get__(self, obj: object | None, owner: type | None = None) -> T | Attribute[T]:
        if obj is None:
            return self
        value = obj.__dict__.get(self._name, self._default)
        if value is _MISSING:
            raise AttributeError(f"{type(obj).__name__}.{self._name} is not set")
        return value  # type: ignore[no-any-return]

    def __set__(self, obj: object, value: Any) -> None:
        adding = getattr(obj, "_adding", "")  # the add_* method while the layer is being made
        where = f"{adding}: {self._name}" if adding else f"{type(obj).__name__}.{self._name}"
        obj.__dict__[self._name] = self._check(where, value)


class StandardLayer(ILayer):
    """Base of the standard layers: one output, attributes given as keywords."""

    #: False where a valid layer may need an attribute set after ``add_*`` (concatenation axis).
    shapes_checked_at_add: ClassVar[bool] = True

    def __init__(self, network: Any, inputs: Sequence[ITensor], adding: str = "", **attributes: Any) -> None:
        super().__init__(network, list(inputs), 1)
        self._made_by = adding
        self._adding = adding
        for name, value in attributes.items():
            setattr(self, name, value)
        self._adding = ""

    def probe_rules(self) -> None:
        """Run the shape and type rules now when every input is a network input (shape known).

        Errors then name the ``add_*`` method that made the layer, as TensorRT reports them at once.
        """
        tensors = [t for t in self._inputs if t is not None]
        if not tensors or len(tensors) != len(self._inputs) or not all(t.is_network_input for t in tensors):
            return
        operator = self.to_operator()
        operator.name = self._made_by
        if not self.shapes_checked_at_add:
            operator.output_types([t.dtype for t in tensors])
            return
        shapes = [[constant(d) if d >= 0 else symbol(f"{t.name}[{i}]") for i, d in enumerate(t.shape)] for t in tensors]
        output_info(operator, [TensorInfo(t.dtype, shape) for t, shape in zip(tensors, shapes)])

    def _lower(self, kind: str, params: dict[str, Any], weights: dict[str, np.ndarray] | None = None) -> Operator:
        """The registered operator ``kind`` for these params, named after the layer."""
        operator = create_operator(kind, params, weights or {})
        operator.name = self.name
        return operator


def check_enum(cls: type[E]) -> Callable[[str, Any], E]:
    """A check accepting members of the enum ``cls`` only (not plain ints)."""

    def check(where: str, value: Any) -> E:
        if not isinstance(value, cls):
            choices = ", ".join(member.name for member in cls)
            raise TypeMismatchError(f"{where} must be a value of the {cls.__name__} enum ({choices}), got {value!r}")
        return value

    return check


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_float(where: str, value: Any) -> float:
    """A finite real number."""
    if not (_is_int(value) or isinstance(value, (float, np.floating))) or not math.isfinite(float(value)):
        raise TypeMismatchError(f"{where} must be a finite float, got {value!r}")
    return float(value)


def check_bool(where: str, value: Any) -> bool:
    """A bool."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeMismatchError(f"{where} must be a bool, got {value!r}")
    return bool(value)


def check_axis(where: str, value: Any) -> int:
    """An axis index in ``[0, Dims.MAX_DIMS)`` (TensorRT takes no negative axis)."""
    if not _is_int(value) or not 0 <= int(value) < Dims.MAX_DIMS:
        raise TypeMismatchError(f"{where} must be an int in [0, {Dims.MAX_DIMS}), got {value!r}")
    return int(value)


def check_mask(where: str, value: Any) -> int:
    """A bitmask of axes (bit ``i`` selects axis ``i``)."""
    if not _is_int(value) or not 0 <= int(value) < 1 << Dims.MAX_DIMS:
        raise TypeMismatchError(f"{where} must be an int bitmask in [0, {1 << Dims.MAX_DIMS}), got {value!r}")
    return int(value)


def check_permutation(where: str, value: Any) -> tuple[int, ...]:
    """Distinct axis indices (the first ``rank`` of them are used, as TensorRT's Permutation)."""
    items = list(value) if isinstance(value, (Sequence, np.ndarray)) and not isinstance(value, str) else None
    if (
        items is None
        or len(items) > Dims.MAX_DIMS
        or not all(_is_int(p) and 0 <= int(p) < Dims.MAX_DIMS for p in items)
        or len(set(int(p) for p in items)) != len(items)
    ):
        raise TypeMismatchError(f"{where} must be a permutation: distinct ints in [0, {Dims.MAX_DIMS}), got {value!r}")
    return tuple(int(p) for p in items)


def check_dims(where: str, value: Any, allow_unknown: bool = False) -> Dims:
    """Dimensions (``-1`` only with ``allow_unknown``)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, Dims, np.ndarray)):
        raise TypeMismatchError(f"{where} must be a sequence of ints, got {value!r}")
    try:
        dims = Dims(value)
    except ShapeError as error:
        raise ShapeError(f"{where}: {error}") from None
    if not allow_unknown and not dims.is_static():
        raise ShapeError(f"{where} must not contain -1, got {tuple(dims)}")
    return dims


def check_to_type(where: str, value: Any) -> DataType:
    """A DataType that has a NumPy equivalent (so plugrt can compute in it)."""
    if not isinstance(value, DataType):
        raise TypeMismatchError(f"{where} must be a DataType, got {value!r}")
    try:
        nptype(value)
    except TypeMismatchError as error:
        raise TypeMismatchError(f"{where}: {error}") from None
    return value


def check_weights(where: str, value: Any) -> Weights:
    """``Weights``, or a NumPy array wrapped into them."""
    if isinstance(value, Weights):
        return value
    if isinstance(value, np.ndarray):
        try:
            return Weights(value)
        except TypeMismatchError as error:
            raise TypeMismatchError(f"{where}: {error}") from None
    raise TypeMismatchError(f"{where} must be Weights or a NumPy array, got {type(value).__name__}")
