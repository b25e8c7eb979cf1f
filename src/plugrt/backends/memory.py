"""Backend memory for plugins: ``device_malloc`` / ``DeviceBuffer``, tracked while alive.

What ``cudaMalloc`` is to a TensorRT plugin, :func:`device_malloc` is to a plugrt
plugin: host memory on the CPU backend, device memory on CUDA. Every live buffer
is tracked, so tests and the conformance checker can see what ``initialize``
acquired and whether ``terminate`` released it.

>>> import plugrt as trt
>>> buffer = trt.device_malloc(64)
>>> buffer.ptr != 0, buffer in trt.live_allocations()
(True, True)
>>> buffer.free()
>>> buffer in trt.live_allocations()
False
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ..core.errors import ExecutionError, TypeMismatchError
from .registry import active_backend, get_backend

__all__ = ["DeviceBuffer", "device_malloc", "live_allocations"]

_LIVE: dict[int, DeviceBuffer] = {}
_LOCK = threading.Lock()


class DeviceBuffer:
    """A block of backend memory with an integer address (``ptr``) plugins can pass around."""

    def __init__(self, nbytes: int, device: str | None = None) -> None:
        if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes < 0:
            raise TypeMismatchError(f"device_malloc: nbytes must be a non-negative int, got {nbytes!r}")
        self.backend = active_backend() if device is None else get_backend(device)
        self.device = self.backend.name
        self.nbytes = nbytes
        self._array: Any = self.backend.allocate(nbytes)
        self.ptr = self.backend.address_of(self._array)
        with _LOCK:
            _LIVE[id(self)] = self

    def free(self) -> None:
        """Release the memory (idempotent)."""
        with _LOCK:
            _LIVE.pop(id(self), None)
        self._array = None
        self.ptr = 0

    @property
    def freed(self) -> bool:
        """True after :meth:`free`."""
        return self._array is None

    def as_array(self, shape: tuple[int, ...], dtype: Any) -> Any:
        """A typed view of the first bytes (NumPy on the CPU, CuPy on CUDA)."""
        if self._array is None:
            raise ExecutionError("this DeviceBuffer was freed")
        np_dtype = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        if count * np_dtype.itemsize > self.nbytes:
            raise ExecutionError(
                f"a view of shape {tuple(shape)} {np_dtype} needs {count * np_dtype.itemsize} bytes; the buffer has {self.nbytes}"
            )
        return self.backend.view(self.ptr, tuple(shape), np_dtype, owner=self._array)

    def __enter__(self) -> DeviceBuffer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()

    def __repr__(self) -> str:
        state = "freed" if self.freed else f"0x{self.ptr:x}"
        return f"DeviceBuffer({self.nbytes} bytes on {self.device}, {state})"


def device_malloc(nbytes: int, device: str | None = None) -> DeviceBuffer:
    """Allocate ``nbytes`` on ``device`` (default: the active device); free with ``.free()``."""
    return DeviceBuffer(nbytes, device)


def live_allocations() -> list[DeviceBuffer]:
    """Buffers allocated with :func:`device_malloc` and not freed yet."""
    with _LOCK:
        return list(_LIVE.values())
