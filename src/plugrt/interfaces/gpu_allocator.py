"""``IGpuAllocator``: device memory for plugins that ask their context for an allocator.

TensorRT hands a plugin ``IPluginResourceContext.gpu_allocator`` in ``attach_to_context``;
plugrt's default one allocates through :func:`plugrt.device_malloc` on the engine's
device (host memory on the CPU backend), so a plugin can use the same calls on both.

>>> import plugrt as trt
>>> allocator = trt.DefaultGpuAllocator("cpu")
>>> address = allocator.allocate(64, 256, 0)
>>> address != 0, allocator.deallocate(address)
(True, True)
"""

from __future__ import annotations

import threading

from ..backends.memory import DeviceBuffer
from ..core.enums import TrtEnum
from ..core.errors import TypeMismatchError
from .hooks import missing_hook

__all__ = ["AllocatorFlag", "DefaultGpuAllocator", "IGpuAllocator"]


class AllocatorFlag(TrtEnum):
    """Flags of ``IGpuAllocator.allocate``."""

    RESIZABLE = 0


class IGpuAllocator:
    """Allocates device memory (TensorRT's ``IGpuAllocator``); subclasses define ``allocate`` and ``deallocate``."""

    def __init__(self) -> None:
        pass

    def allocate(self, size: int, alignment: int, flags: int) -> int:
        """An address of at least ``size`` bytes aligned to ``alignment`` (0 when it fails). Required."""
        missing_hook(self, "allocate", "IGpuAllocator")

    def deallocate(self, memory: int) -> bool:
        """Free ``memory``; True on success. Required."""
        missing_hook(self, "deallocate", "IGpuAllocator")

    def reallocate(self, address: int, alignment: int, new_size: int) -> int:
        """Grow an allocation; 0 when not supported (the default, as in TensorRT)."""
        return 0

    def allocate_async(self, size: int, alignment: int, flags: int, stream: int) -> int:
        """Stream-ordered :meth:`allocate` (defaults to it)."""
        return self.allocate(size, alignment, flags)

    def deallocate_async(self, memory: int, stream: int) -> bool:
        """Stream-ordered :meth:`deallocate` (defaults to it)."""
        return self.deallocate(memory)


class DefaultGpuAllocator(IGpuAllocator):
    """The allocator plugins get by default: :func:`plugrt.device_malloc` on ``device``."""

    def __init__(self, device: str) -> None:
        IGpuAllocator.__init__(self)
        self.device = device
        self._buffers: dict[int, DeviceBuffer] = {}
        self._lock = threading.Lock()

    def allocate(self, size: int, alignment: int, flags: int) -> int:
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise TypeMismatchError(f"IGpuAllocator.allocate: size must be a non-negative int, got {size!r}")
        if isinstance(alignment, bool) or not isinstance(alignment, int) or alignment < 0:
            raise TypeMismatchError(f"IGpuAllocator.allocate: alignment must be a non-negative int, got {alignment!r}")
        step = max(alignment, 1)
        buffer = DeviceBuffer(size + step - 1, self.device)  # room to start on the boundary
        address = -(-buffer.ptr // step) * step
        with self._lock:
            self._buffers[address] = buffer
        return address

    def deallocate(self, memory: int) -> bool:
        with self._lock:
            buffer = self._buffers.pop(int(memory), None)
        if buffer is None:
            return False
        buffer.free()
        return True
