"""The CUDA backend: device memory and streams through CuPy (imported only when used).

``execute_async_v3(stream)`` takes a real CUDA stream handle (an integer, as
``cupy.cuda.Stream().ptr`` or ``torch.cuda.current_stream().cuda_stream``); kernels
of standard layers launch on it through CuPy, plugins receive it unchanged, and
nothing synchronises inside a run except for data-dependent sizes, which must
be read back to size what follows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..core.dims import volume
from ..core.errors import ExecutionError, MissingBackendError

__all__ = ["CudaBackend", "cupy_stream", "import_cupy"]


_CUPY: list[Any] = []


def import_cupy() -> Any:
    """CuPy, or :class:`MissingBackendError` saying what to install (checked once, then cached)."""
    if _CUPY:
        return _CUPY[0]
    try:
        import cupy
    except ImportError as exc:
        raise MissingBackendError(
            "the 'cuda' device needs CuPy; install it with pip install 'plugrt[cuda]' (or the cupy build for your CUDA)"
        ) from exc
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise MissingBackendError("the 'cuda' device needs an NVIDIA GPU; CuPy sees none")
    except cupy.cuda.runtime.CUDARuntimeError as exc:
        raise MissingBackendError(f"the 'cuda' device is not usable: {exc}") from exc
    _CUPY.append(cupy)
    return cupy


class _StreamHandle:
    """A raw stream handle offered through the CUDA stream protocol."""

    def __init__(self, handle: int) -> None:
        self.handle = handle

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.handle)


_STREAMS: dict[int, Any] = {}


def cupy_stream(handle: int) -> Any:
    """CuPy's stream object for a raw CUDA stream handle (0: the legacy default stream).

    Use it as a context manager to make CuPy launch on that stream. The wrapper never
    owns the stream; wrappers are cached per handle.
    """
    cp = import_cupy()
    if not handle:
        return cp.cuda.Stream.null
    stream = _STREAMS.get(handle)
    if stream is None:
        from_external = getattr(cp.cuda.Stream, "from_external", None)
        stream = from_external(_StreamHandle(handle)) if from_external is not None else cp.cuda.ExternalStream(handle)
        if len(_STREAMS) >= 256:
            _STREAMS.clear()
        _STREAMS[handle] = stream
    return stream


class CudaBackend:
    """Device arenas and CuPy as the array module."""

    name = "cuda"

    def __init__(self) -> None:
        self.cupy = import_cupy()
        self.xp = self.cupy

    def allocate_arena(self, nbytes: int) -> tuple[Any, int]:
        """A device buffer of ``nbytes`` (256-byte aligned): (owner array, base address)."""
        cp = self.cupy
        try:
            raw = cp.zeros(nbytes + 256, dtype=cp.uint8)
        except cp.cuda.memory.OutOfMemoryError:
            raise ExecutionError(f"cannot allocate a device activation arena of {nbytes} bytes") from None
        base = int(raw.data.ptr)
        shift = (-base) % 256
        return raw[shift : shift + nbytes], base + shift

    def view(self, address: int, shape: tuple[int, ...], dtype: Any) -> Any:
        """A zero-copy CuPy array over device ``address``."""
        cp = self.cupy
        np_dtype = np.dtype(dtype)
        shape = tuple(int(d) for d in shape)
        nbytes = volume(shape) * np_dtype.itemsize
        if nbytes == 0:
            return cp.empty(shape, dtype=np_dtype)
        if not isinstance(address, int) or address <= 0:
            raise ExecutionError(f"cannot view {nbytes} bytes at device address {address!r}")
        memory = cp.cuda.UnownedMemory(address, nbytes, None)
        return cp.ndarray(shape, dtype=np_dtype, memptr=cp.cuda.MemoryPointer(memory, 0))

    def address_of(self, array: Any) -> int:
        """The device address of an array's first element."""
        return int(array.data.ptr) if array.size else 0

    def create_stream(self) -> tuple[Any, int]:
        """A new non-blocking CUDA stream: (owner, raw handle); the handle lives as long as the owner."""
        stream = self.cupy.cuda.Stream(non_blocking=True)
        return stream, int(stream.ptr)

    def synchronize(self, stream: int) -> None:
        """Wait for the work queued on ``stream``."""
        cupy_stream(stream).synchronize()

    @contextlib.contextmanager
    def stream_scope(self, stream: int) -> Iterator[None]:
        """Make CuPy launch on ``stream`` (0 means the legacy default stream)."""
        with cupy_stream(stream):
            yield
