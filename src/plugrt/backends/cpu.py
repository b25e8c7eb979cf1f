"""The CPU backend: host memory, NumPy kernels, and zero-copy views of raw addresses.

On the CPU a "stream" is only an integer handle: work is done by the time
``execute_async_v3`` returns, so synchronising a stream is a no-op.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from ..core.dims import volume
from ..core.errors import ExecutionError
from ..core.layouts import storage_shape
from ..core.types import DataType, TensorFormat, nptype
from ..interfaces.descriptors import PluginTensorDesc
from .memory import active_device

__all__ = ["CpuBackend", "as_array", "host_view"]

_ARENA_ALIGNMENT = 256


class _RawMemory:
    """Exposes raw host memory through NumPy's array interface (no copy, no ownership)."""

    __slots__ = ("__array_interface__",)

    def __init__(self, address: int, shape: tuple[int, ...], typestr: str) -> None:
        self.__array_interface__ = {"data": (address, False), "shape": shape, "typestr": typestr, "version": 3}


def host_view(address: int, shape: tuple[int, ...], dtype: np.dtype | type) -> np.ndarray:
    """A NumPy array over ``address`` (no copy). ``address`` must stay valid while it is used."""
    np_dtype = np.dtype(dtype)
    shape = tuple(int(d) for d in shape)
    nbytes = volume(shape) * np_dtype.itemsize
    if nbytes == 0:
        return np.empty(shape, dtype=np_dtype)
    if not isinstance(address, int) or address <= 0:
        raise ExecutionError(f"cannot view {nbytes} bytes at address {address!r}: not a valid host address")
    return np.asarray(_RawMemory(address, shape, np_dtype.str))


# Views made by as_array, keyed by (address, id(desc), dtype); the entry keeps the
# descriptor alive so its id cannot be reused while cached. Plugins call as_array on
# every enqueue with the descriptors the executor reuses, so most calls hit.
_VIEW_CACHE: dict[tuple[int, int, object, str], tuple[object, Any]] = {}
_VIEW_CACHE_LIMIT = 4096


def as_array(address: int, desc: Any, dtype: DataType | None = None) -> Any:
    """A zero-copy array for a plugin buffer: ``address`` plus a ``PluginTensorDesc``.

    NumPy on the CPU device; a CuPy array while a CUDA engine runs the plugin
    (the active device, see :func:`plugrt.active_device`), so one ``enqueue``
    written with ``as_array`` and array-module-generic code runs on both.

    The array has the buffer's storage shape (the logical dims for LINEAR; see
    :mod:`plugrt.core.layouts` for vectorised formats).

    >>> import numpy as np, plugrt as trt
    >>> x = np.arange(6, dtype=np.float32)
    >>> desc = trt.PluginTensorDesc(trt.Dims((2, 3)), trt.float32)
    >>> trt.as_array(x.ctypes.data, desc)[1, 2]
    np.float32(5.0)
    """
    device = active_device()
    key = (address, id(desc), dtype, device)
    entry = _VIEW_CACHE.get(key)
    if entry is not None and entry[0] is desc:
        return entry[1]
    dims = tuple(desc.dims)
    fmt = getattr(desc, "format", TensorFormat.LINEAR)
    element = nptype(dtype if dtype is not None else desc.type)
    if device == "cuda":
        from .registry import get_backend

        view = get_backend("cuda").view(address, storage_shape(dims, fmt), element)
    else:
        view = host_view(address, storage_shape(dims, fmt), element)
    if isinstance(desc, PluginTensorDesc):  # frozen: the cached view stays right for it
        if len(_VIEW_CACHE) >= _VIEW_CACHE_LIMIT:
            _VIEW_CACHE.clear()
        _VIEW_CACHE[key] = (desc, view)
    return view


class CpuBackend:
    """Host memory arenas and NumPy as the array module."""

    name = "cpu"
    xp = np

    def allocate_arena(self, nbytes: int) -> tuple[np.ndarray, int]:
        """An aligned host buffer of ``nbytes``: (owner array, aligned base address)."""
        try:
            raw = np.zeros(nbytes + _ARENA_ALIGNMENT, dtype=np.uint8)
        except MemoryError:
            raise ExecutionError(f"cannot allocate an activation arena of {nbytes} bytes") from None
        base = raw.ctypes.data
        shift = (-base) % _ARENA_ALIGNMENT
        return raw[shift : shift + nbytes], base + shift

    def view(self, address: int, shape: tuple[int, ...], dtype: np.dtype | type) -> np.ndarray:
        """A zero-copy array over a host address."""
        return host_view(address, shape, dtype)

    def address_of(self, array: np.ndarray) -> int:
        """The address of an array's first element."""
        return int(array.ctypes.data) if array.size else 0

    def create_stream(self) -> tuple[None, int]:
        """A stream to run work on: on the CPU there is none, so (None, 0)."""
        return None, 0

    def synchronize(self, stream: int) -> None:
        """Nothing to wait for on the CPU."""

    def stream_scope(self, stream: int) -> contextlib.AbstractContextManager[None]:
        """Nothing to do: CPU work completes before ``execute_async_v3`` returns."""
        return contextlib.nullcontext()
