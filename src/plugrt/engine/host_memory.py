"""``IHostMemory``: the bytes of a serialized engine."""

from __future__ import annotations

from ..core.context_manager import DeprecatedContextManager

__all__ = ["IHostMemory"]


class IHostMemory(bytes, DeprecatedContextManager):
    """Plan bytes (a ``bytes`` subclass with TensorRT's ``nbytes``)."""

    @property
    def nbytes(self) -> int:
        """Size in bytes."""
        return len(self)
