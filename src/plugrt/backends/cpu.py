"""The CPU backend: host memory, NumPy kernels, and zero-copy views of raw addresses.

On the CPU a "stream" is only an integer handle: work is done by the time
``execute_async_v3`` returns, so synchronising a stream is a no-op.
"""

from __future__ import annotations

import contextlib
import mmap
from collections.abc import Callable
from typing import Any

import numpy as np

from .base import Backend

__all__ = ["HUGE_PAGES_UP_TO", "CpuBackend", "zeroed_pages"]

#: buffers of more than this many bytes are mapped pages of their own without huge pages (:func:`zeroed_pages`)
HUGE_PAGES_UP_TO = 1 << 20


def zeroed_pages(nbytes: int, huge_pages_up_to: int = HUGE_PAGES_UP_TO) -> np.ndarray:
    """A zeroed uint8 buffer of ``nbytes`` (at least one byte) whose memory is taken only where it is written.

    Up to ``huge_pages_up_to`` bytes it is NumPy's; beyond, an anonymous mapping of its own told not to use
    transparent huge pages. NumPy asks for huge pages on its arrays from 4 MiB, and the kernel then backs every
    written 4 KiB with 2 MiB. An arena is planned for a profile's largest shapes and written only in part at
    smaller ones, so that costs real memory: the T5 encoder's 471 MB arena had 6.5 MB written at batch 1 but held
    52.8 MB, PP-OCR cls's 36 MB arena 0.9 MB written and 21 MB held. Huge pages do save TLB misses where most of a
    buffer is written (a BiLSTM's 46 MB arena, 15 MB written, ran 8% faster at batch 1 with them): not worth the
    memory the others lose."""
    size = max(int(nbytes), 1)
    if size <= huge_pages_up_to:
        return np.zeros(size, dtype=np.uint8)
    pages = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    advice = getattr(mmap, "MADV_NOHUGEPAGE", None)
    if advice is not None:
        with contextlib.suppress(OSError):
            pages.madvise(advice)
    return np.frombuffer(pages, dtype=np.uint8)


class _RawMemory:
    """Exposes raw host memory through NumPy's array interface (no copy; keeps ``owner`` alive)."""

    __slots__ = ("__array_interface__", "owner")

    def __init__(self, address: int, shape: tuple[int, ...], typestr: str, owner: Any) -> None:
        self.__array_interface__ = {"data": (address, False), "shape": shape, "typestr": typestr, "version": 3}
        self.owner = owner


class CpuBackend(Backend):
    """Host memory arenas and NumPy as the array module."""

    name = "cpu"
    host_memory = True
    gpu = False
    xp = np

    def allocate(self, nbytes: int) -> np.ndarray:
        """A zeroed host buffer of ``nbytes`` (at least one byte), large ones in pages taken where written
        (:func:`zeroed_pages`)."""
        return zeroed_pages(nbytes)

    def _view(self, address: int, shape: tuple[int, ...], dtype: np.dtype, nbytes: int, owner: Any) -> np.ndarray:
        return np.asarray(_RawMemory(address, shape, dtype.str, owner))

    def address_of(self, array: np.ndarray) -> int:
        """The address of an array's first element."""
        return int(array.ctypes.data) if array.size else 0

    def to_host(self, array: Any, out: np.ndarray | None = None) -> np.ndarray:
        """The array itself (host memory already), or ``out`` filled with it."""
        if out is None:
            return np.asarray(array)
        out[...] = array
        return out

    def copy_from_host(self, view: np.ndarray, values: np.ndarray) -> None:
        """``view[...] = values``."""
        view[...] = values

    def create_stream(self) -> tuple[None, int]:
        """A stream to run work on: on the CPU there is none, so (None, 0)."""
        return None, 0

    def current_stream(self) -> int:
        """0: CPU work has no stream."""
        return 0

    def stream_scope(self, stream: int) -> contextlib.AbstractContextManager[None]:
        """No stream (CPU work completes before ``execute_async_v3`` returns); a run keeps the BLAS on one thread
        where PyTorch's CPU kernels are bound in this process (``ops/blas_threads.py`` ``run_scope``)."""
        from ..ops.blas_threads import run_scope

        return run_scope()

    def synchronize(self, stream: int) -> None:
        """Nothing to wait for on the CPU."""

    def matmul_into(self, a: Any, b: Any, out: Any, bias: Any = None) -> None:
        """``np.matmul`` into ``out``, then the bias added in place."""
        np.matmul(a, b, out=out)
        if bias is not None:
            np.add(out, bias, out=out)

    def special_function(self, name: str) -> Callable[..., Any] | None:
        """SciPy's ``scipy.special.<name>``, or None without SciPy."""
        try:
            import scipy.special
        except ImportError:
            return None
        found: Callable[..., Any] = getattr(scipy.special, name)
        return found

    def dlpack_device(self) -> tuple[int, int]:
        """(kDLCPU, 0)."""
        return (1, 0)
