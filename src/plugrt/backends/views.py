"""``as_array``: the zero-copy array plugins make from a buffer address and its descriptor."""

from __future__ import annotations

from typing import Any

from ..core.types import DataType
from ..interfaces.descriptors import PluginTensorDesc
from .base import Backend
from .registry import active_backend

__all__ = ["as_array"]

# Views made by as_array, keyed by (address, id(desc), dtype, backend); the entry keeps the
# descriptor alive so its id cannot be reused while cached. Plugins call as_array on
# every enqueue with the descriptors the executor reuses, so most calls hit.
_VIEW_CACHE: dict[tuple[int, int, object, Backend], tuple[object, Any]] = {}
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
    backend = active_backend()
    key = (address, id(desc), dtype, backend)
    entry = _VIEW_CACHE.get(key)
    if entry is not None and entry[0] is desc:
        return entry[1]
    view = backend.view(address, desc, DataType(dtype) if dtype is not None else None)
    if isinstance(desc, PluginTensorDesc):  # frozen: the cached view stays right for it
        if len(_VIEW_CACHE) >= _VIEW_CACHE_LIMIT:
            _VIEW_CACHE.clear()
        _VIEW_CACHE[key] = (desc, view)
    return view
