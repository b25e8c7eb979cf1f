"""Scratch buffers carved out of a plugin's workspace.

A plugin describes its scratch arrays once with :class:`WorkspaceLayout`;
``get_workspace_size`` returns ``layout.nbytes`` and ``enqueue`` turns the
``workspace`` address into named views with :meth:`WorkspaceLayout.bind` (NumPy
views of host memory, or CuPy views of device memory for a kernel running on the
GPU; every array starts on a 256-byte boundary, as TensorRT's plugins align theirs).

>>> import numpy as np
>>> layout = WorkspaceLayout().add("scores", (2, 3), np.float32).add("index", (4,), np.int32)
>>> layout.nbytes
272
>>> views = layout.allocate()
>>> views["scores"].shape, views["index"].dtype
((2, 3), dtype('int32'))
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backends.base import ALIGNMENT
from ..backends.registry import active_backend
from ..core.errors import ExecutionError

__all__ = ["WorkspaceLayout"]


class WorkspaceLayout:
    """Named, aligned arrays inside one block of bytes."""

    def __init__(self) -> None:
        self._entries: list[tuple[str, tuple[int, ...], np.dtype, int]] = []
        self.nbytes = 0

    def add(self, name: str, shape: tuple[int, ...], dtype: Any) -> WorkspaceLayout:
        """Reserve an array ``name`` of ``shape`` and ``dtype``; returns self for chaining."""
        np_dtype = np.dtype(dtype)
        offset = -(-self.nbytes // ALIGNMENT) * ALIGNMENT
        shape = tuple(int(d) for d in shape)
        self._entries.append((name, shape, np_dtype, offset))
        self.nbytes = offset + int(np.prod(shape, dtype=np.int64)) * np_dtype.itemsize
        return self

    def bind(self, address: int, available: int | None = None, xp: Any = np) -> dict[str, Any]:
        """Views of the arrays inside the workspace at ``address`` (no copy).

        ``xp`` is the array module of the kernel that will use them (the one
        :func:`~plugrt.plugins._base.plugin_arrays` yields). When it is the active backend's,
        the views are over the workspace itself (NumPy arrays over host memory, CuPy arrays
        over device memory); a NumPy kernel under a GPU engine (the workspace is device
        memory) gets fresh host scratch instead.
        """
        if available is not None and available < self.nbytes:
            raise ExecutionError(f"workspace of {available} bytes is smaller than the {self.nbytes} bytes needed")
        backend = active_backend()
        if self.nbytes == 0 or xp is not backend.xp:  # nothing to view, or a host kernel under a GPU engine
            return self._views(xp.empty(max(self.nbytes, 1), dtype=np.uint8))
        return self._views(backend.view(address, (self.nbytes,), np.uint8))

    def allocate(self) -> dict[str, np.ndarray]:
        """Fresh arrays laid out the same way (for calling a kernel outside an engine)."""
        return self._views(np.empty(max(self.nbytes, 1), dtype=np.uint8))

    def _views(self, raw: Any) -> dict[str, Any]:
        views = {}
        for name, shape, dtype, offset in self._entries:
            count = int(np.prod(shape, dtype=np.int64))
            views[name] = raw[offset : offset + count * dtype.itemsize].view(dtype).reshape(shape)
        return views
