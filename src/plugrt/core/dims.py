"""Tensor dimensions: ``Dims`` and its fixed-rank helpers, as in TensorRT.

``-1`` marks a dimension that is unknown until run time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, SupportsIndex

from .checked_list import CheckedList
from .errors import ShapeError

__all__ = ["Dims", "Dims2", "Dims3", "Dims4", "DimsCHW", "DimsHW", "DimsNCHW", "ReadOnlyDims", "volume"]


class Dims(CheckedList[int]):
    """A mutable sequence of up to :attr:`MAX_DIMS` integer dimensions.

    >>> d = Dims((2, -1, 4))
    >>> len(d), d[1], d == (2, -1, 4)
    (3, -1, True)
    """

    MAX_DIMS = 8

    def __init__(self, shape: Iterable[SupportsIndex] | Dims = ()) -> None:
        values = [_as_dim(v) for v in shape]
        if len(values) > self.MAX_DIMS:
            raise ShapeError(f"Dims holds at most {self.MAX_DIMS} dimensions, got {len(values)}")
        self._items = values

    def _checked(self, value: Any) -> int:
        return _as_dim(value)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Dims, tuple, list)):
            if not all(isinstance(v, int) or (hasattr(v, "__index__") and not isinstance(v, float)) for v in other):
                return False
            return list(self._items) == [v.__index__() for v in other]
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._items))

    def __repr__(self) -> str:
        return f"({', '.join(map(str, self._items))})" if len(self) != 1 else f"({self[0]},)"

    @property
    def nbDims(self) -> int:
        """Number of dimensions (TensorRT's ``nbDims``)."""
        return len(self._items)

    def is_static(self) -> bool:
        """True when no dimension is ``-1``."""
        return all(v >= 0 for v in self._items)


class ReadOnlyDims(Dims):
    """Dims that cannot be changed: the dims of descriptors handed to plugin hooks.

    The engine reuses descriptors between runs, so a hook that wrote into them
    would corrupt later runs; copy with ``Dims(desc.dims)`` to get a mutable one.
    """

    def __setitem__(self, index: SupportsIndex, value: SupportsIndex) -> None:
        raise ShapeError(
            f"descriptor dims {self!r} are read-only (the engine reuses them between runs); copy them with Dims(desc.dims)"
        )


def _as_dim(value: Any) -> int:
    try:
        dim = int(value.__index__()) if not isinstance(value, int) else value
    except (AttributeError, TypeError):
        raise ShapeError(f"a dimension must be an integer, got {value!r}") from None
    if dim < -1:
        raise ShapeError(f"a dimension must be >= -1 (-1 means dynamic), got {dim}")
    return dim


def volume(shape: Iterable[int]) -> int:
    """Number of elements of a shape (1 for a 0-d shape)."""
    result = 1
    for dim in shape:
        result *= int(dim)
    return result


class _FixedRankDims(Dims):
    RANK = 0

    def __init__(self, *values: SupportsIndex) -> None:
        if len(values) == 1 and isinstance(values[0], Iterable):
            values = tuple(values[0])
        if len(values) != self.RANK:
            raise ShapeError(f"{type(self).__name__} takes {self.RANK} dimensions, got {len(values)}")
        super().__init__(values)


class Dims2(_FixedRankDims):
    """Two dimensions."""

    RANK = 2


class Dims3(_FixedRankDims):
    """Three dimensions."""

    RANK = 3


class Dims4(_FixedRankDims):
    """Four dimensions."""

    RANK = 4


class DimsHW(Dims2):
    """Height and width."""

    h = property(lambda self: self[0], lambda self, v: self.__setitem__(0, v))
    w = property(lambda self: self[1], lambda self, v: self.__setitem__(1, v))


class DimsCHW(Dims3):
    """Channels, height and width."""

    c = property(lambda self: self[0], lambda self, v: self.__setitem__(0, v))
    h = property(lambda self: self[1], lambda self, v: self.__setitem__(1, v))
    w = property(lambda self: self[2], lambda self, v: self.__setitem__(2, v))


class DimsNCHW(Dims4):
    """Batch, channels, height and width."""

    n = property(lambda self: self[0], lambda self, v: self.__setitem__(0, v))
    c = property(lambda self: self[1], lambda self, v: self.__setitem__(1, v))
    h = property(lambda self: self[2], lambda self, v: self.__setitem__(2, v))
    w = property(lambda self: self[3], lambda self, v: self.__setitem__(3, v))
