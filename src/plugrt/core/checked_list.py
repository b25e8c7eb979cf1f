"""The list-like containers of the API (``Dims``, ``DimsExprs``, ``PluginFieldCollection``) share one base.

A :class:`CheckedList` keeps its items in ``_items`` and passes every item written
into it through :meth:`CheckedList._checked`, which raises for a bad item and
returns the item to store; reading, iterating and ``len`` are a list's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Generic, SupportsIndex, TypeVar, overload

__all__ = ["CheckedList"]

T = TypeVar("T")


class CheckedList(Generic[T]):
    """Items of one kind, checked on the way in; subclasses define :meth:`_checked`."""

    _items: list[T]

    def _checked(self, value: Any) -> T:
        """The item to store for ``value``; raises when ``value`` is not a valid item."""
        raise NotImplementedError(f"{type(self).__name__} does not check its items")

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: SupportsIndex) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: SupportsIndex | slice) -> T | list[T]:
        return self._items[index]

    def __setitem__(self, index: SupportsIndex, value: Any) -> None:
        self._items[index] = self._checked(value)

    def __iter__(self) -> Iterator[T]:
        return iter(self._items)
