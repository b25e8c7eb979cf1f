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

import contextvars
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..core.errors import ExecutionError, MissingBackendError, TypeMismatchError

__all__ = ["DeviceBuffer", "active_device", "device_malloc", "live_allocations", "using_device"]

_DEVICE: contextvars.ContextVar[str] = contextvars.ContextVar("plugrt_device", default="cpu")
_LIVE: dict[int, DeviceBuffer] = {}
_LOCK = threading.Lock()


def active_device() -> str:
    """The device of the engine currently calling plugin hooks ('cpu' unless set)."""
    return _DEVICE.get()


@contextmanager
def using_device(device: str) -> Iterator[None]:
    """Make ``device`` the active device inside the block (engines do this around plugin calls)."""
    token = _DEVICE.set(device)
    try:
        yield
    finally:
        _DEVICE.reset(token)


class DeviceBuffer:
    """A block of backend memory with an integer address (``ptr``) plugins can pass around."""

    def __init__(self, nbytes: int, device: str | None = None) -> None:
        if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes < 0:
            raise TypeMismatchError(f"device_malloc: nbytes must be a non-negative int, got {nbytes!r}")
        self.device = device or active_device()
        self.nbytes = nbytes
        self._array: Any = _allocate(self.device, max(nbytes, 1))
        self.ptr = int(self._array.data.ptr) if self.device == "cuda" else int(self._array.ctypes.data)
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
        return self._array[: count * np_dtype.itemsize].view(np_dtype).reshape(shape)

    def __enter__(self) -> DeviceBuffer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()

    def __repr__(self) -> str:
        state = "freed" if self.freed else f"0x{self.ptr:x}"
        return f"DeviceBuffer({self.nbytes} bytes on {self.device}, {state})"


def _allocate(device: str, nbytes: int) -> Any:
    if device == "cpu":
        return np.zeros(nbytes, dtype=np.uint8)
    if device == "cuda":
        try:
            import cupy
        except ImportError as exc:
            raise MissingBackendError("device 'cuda' needs CuPy: pip install 'plugrt[cuda]'") from exc
        return cupy.zeros(nbytes, dtype=cupy.uint8)
    raise TypeMismatchError(f"unknown device {device!r}; choose 'cpu' or 'cuda'")


def device_malloc(nbytes: int, device: str | None = None) -> DeviceBuffer:
    """Allocate ``nbytes`` on ``device`` (default: the active device); free with ``.free()``."""
    return DeviceBuffer(nbytes, device)


def live_allocations() -> list[DeviceBuffer]:
    """Buffers allocated with :func:`device_malloc` and not freed yet."""
    with _LOCK:
        return list(_LIVE.values())
