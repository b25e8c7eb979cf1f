"""``IOutputAllocator``: lets the application place outputs whose size is known late."""

from __future__ import annotations

from ..core.dims import Dims
from ..interfaces.hooks import missing_hook

__all__ = ["IOutputAllocator"]


class IOutputAllocator:
    """Called when an output's size is known (at once for data-dependent shapes: after the run).

    Return the address where the output goes (at least ``size`` bytes,
    ``alignment``-aligned); ``notify_shape`` then reports its final shape.
    """

    def __init__(self) -> None:
        pass

    def reallocate_output(self, tensor_name: str, memory: int, size: int, alignment: int) -> int:
        """Address for ``size`` bytes of ``tensor_name``; ``memory`` is the current one (0 if none). Required."""
        missing_hook(self, "reallocate_output", "IOutputAllocator")

    def reallocate_output_async(self, tensor_name: str, memory: int, size: int, alignment: int, stream: int) -> int:
        """Stream-ordered variant; defaults to :meth:`reallocate_output`."""
        return self.reallocate_output(tensor_name, memory, size, alignment)

    def notify_shape(self, tensor_name: str, shape: Dims) -> None:
        """The output's final shape."""
