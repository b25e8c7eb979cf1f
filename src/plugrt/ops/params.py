"""Operator parameters declared on the class, read and checked once when an operator is made.

An operator names each parameter it reads as a class attribute::

    class UnaryOperator(Operator):
        op: str = param(choices=_UFUNCS)             # required, one of the table's keys
        mask: int = param(int, key="axes")           # required, stored under another name
        alpha: float = param(float, default=0.0)     # optional

:class:`~plugrt.ops.base.Operator` reads every declared parameter from ``params``
in its constructor (:func:`read_params`) and sets it on the instance, so a bad
plan or layer fails when the operator is made, with one message form per check:

- missing: ``operator 'kind' ('name') is missing parameter 'key'`` (:meth:`Operator.param`);
- not a choice: ``kind: unknown key 'value'; valid: a, b, c``;
- below the minimum: ``kind: key must be >= minimum, got value``.

A default of ``None`` stays ``None`` (the converter is not applied to it).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any

from ..core.errors import NetworkError

if TYPE_CHECKING:
    from .base import Operator

__all__ = ["Param", "floats", "ints", "param", "read_params"]

#: the default of a parameter that must be given
REQUIRED: Any = object()


def ints(value: Any) -> list[int]:
    """A list parameter of integers (a converter for :func:`param`)."""
    return [int(item) for item in value]


def floats(value: Any) -> list[float]:
    """A list parameter of floats (a converter for :func:`param`)."""
    return [float(item) for item in value]


class Param:
    """One declared parameter: its key in ``params``, how to convert it and what it may be."""

    def __init__(
        self,
        convert: Callable[[Any], Any],
        default: Any,
        key: str | None,
        choices: Collection[Any] | None,
        lookup: bool,
        minimum: float | None,
    ) -> None:
        self.convert = convert
        self.default = default
        self.key = key or ""
        self.attr = ""
        self.choices = choices
        self.lookup = lookup
        self.minimum = minimum

    def __set_name__(self, owner: type, name: str) -> None:
        self.attr = name
        self.key = self.key or name

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        # read_params stores the value on the instance, which hides this descriptor
        raise AttributeError(f"parameter {self.attr!r} of {type(instance).__name__} has not been read")

    def read(self, op: Operator) -> Any:
        """The parameter's value for ``op`` (converted and checked)."""
        raw = op.param(self.key) if self.default is REQUIRED else op.params.get(self.key, self.default)
        if raw is None and self.default is None:
            return None
        value = self.convert(raw)
        if self.choices is not None and value not in self.choices:
            valid = ", ".join(str(choice) for choice in self.choices)
            raise NetworkError(f"{op.kind}: unknown {self.key} {value!r}; valid: {valid}")
        if self.minimum is not None and value < self.minimum:
            raise NetworkError(f"{op.kind}: {self.key} must be >= {self.minimum}, got {value}")
        if self.lookup:
            assert isinstance(self.choices, Mapping)
            return self.choices[value]
        return value


def param(
    convert: Callable[[Any], Any] = str,
    *,
    default: Any = REQUIRED,
    key: str | None = None,
    choices: Collection[Any] | None = None,
    lookup: bool = False,
    minimum: float | None = None,
) -> Any:
    """Declare an operator parameter as a class attribute (see the module docstring).

    ``convert`` turns the stored value into the attribute's (``str``, ``int``,
    ``float``, ``bool`` or any callable); ``key`` is its name in ``params`` when
    it differs from the attribute's; ``choices`` lists the values it may take and,
    with ``lookup``, is a mapping whose value for it the attribute holds;
    ``minimum`` is the lowest value allowed.
    """
    if lookup and not isinstance(choices, Mapping):
        raise TypeError("param(lookup=True) needs choices that map each value to what the attribute holds")
    return Param(convert, default, key, choices, lookup, minimum)


_DECLARED: dict[type, tuple[Param, ...]] = {}


def declared_params(cls: type) -> tuple[Param, ...]:
    """The parameters ``cls`` and its bases declare, base classes first (a subclass may redeclare or drop one)."""
    found = _DECLARED.get(cls)
    if found is None:
        by_name: dict[str, Param] = {}
        for klass in reversed(cls.__mro__):
            for name, value in vars(klass).items():
                if isinstance(value, Param):
                    by_name[name] = value
                elif name in by_name:  # a subclass that sets the attribute itself no longer reads it
                    del by_name[name]
        found = _DECLARED[cls] = tuple(by_name.values())
    return found


def read_params(op: Operator) -> None:
    """Read every parameter ``op``'s class declares and set it on ``op``."""
    for spec in declared_params(type(op)):
        op.__dict__[spec.attr] = spec.read(op)
