"""Buffers the checker owns: poisoned contents and guard bytes on both sides.

Output buffers start filled with a poison byte pattern; an element that still
holds the poison after two runs with two different patterns was never written.
Guard bytes before and after every buffer catch writes outside it.

>>> buf = GuardedBuffer(8, fill=0xFF)
>>> buf.data[:] = 1
>>> buf.damage()
(0, 0)
"""

from __future__ import annotations

import numpy as np

from ..backends.base import ALIGNMENT

__all__ = ["GUARD_BYTE", "POISON_A", "POISON_B", "GuardedBuffer", "unwritten_mask"]

GUARD_BYTE = 0xCD
#: Poison patterns: all-ones bytes (NaN for floats, -1 for ints), then 0x7F bytes (a huge finite value).
POISON_A = 0xFF
POISON_B = 0x7F


def _guard_size(nbytes: int) -> int:
    # As large as the buffer (up to 64 KiB): an overrun by a whole extra buffer still lands in the guard.
    return max(4096, min(nbytes, 1 << 16))


class GuardedBuffer:
    """``nbytes`` of host memory with guard bytes around it; ``ptr`` is the data's address."""

    def __init__(self, nbytes: int, fill: int | None = None) -> None:
        self.nbytes = int(nbytes)
        self.guard = _guard_size(self.nbytes)
        self._raw = np.full(self.guard * 2 + self.nbytes + ALIGNMENT, GUARD_BYTE, dtype=np.uint8)
        shift = (-(self._raw.ctypes.data + self.guard)) % ALIGNMENT
        self.start = shift + self.guard
        if fill is not None:
            self.data[:] = fill

    def reset(self, fill: int | None = None) -> None:
        """Restore the guard bytes and fill the data with ``fill`` (None: guard bytes), for the next run."""
        self._raw[:] = GUARD_BYTE
        if fill is not None:
            self.data[:] = fill

    @property
    def data(self) -> np.ndarray:
        """The buffer's bytes (a view)."""
        return self._raw[self.start : self.start + self.nbytes]

    @property
    def ptr(self) -> int:
        """The address handed to the plugin."""
        return int(self._raw.ctypes.data) + self.start

    def view(self, shape: tuple[int, ...], dtype: np.dtype | type) -> np.ndarray:
        """The data as an array of ``shape`` and ``dtype``."""
        np_dtype = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        return self.data[: count * np_dtype.itemsize].view(np_dtype).reshape(shape)

    def damage(self) -> tuple[int, int]:
        """(bytes changed in the guard before the buffer, bytes changed in the guard after it)."""
        before = self._raw[self.start - self.guard : self.start]
        after = self._raw[self.start + self.nbytes : self.start + self.nbytes + self.guard]
        return int(np.count_nonzero(before != GUARD_BYTE)), int(np.count_nonzero(after != GUARD_BYTE))

    def damage_text(self, what: str) -> str:
        """'' when intact, else e.g. 'output 0 (96 bytes): 4 bytes written after its end'."""
        before, after = self.damage()
        parts = []
        if after:
            parts.append(f"{after} byte(s) written after its end")
        if before:
            parts.append(f"{before} byte(s) written before its start")
        return f"{what} ({self.nbytes} bytes): " + " and ".join(parts) if parts else ""


def unwritten_mask(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Elements that hold POISON_A in ``first`` and POISON_B in ``second`` (never written).

    Both arrays have the same dtype and shape and come from runs on the same inputs
    that started from the two poison patterns.
    """
    if first.size == 0:
        return np.zeros(first.shape, dtype=bool)
    itemsize = first.dtype.itemsize
    a = np.ascontiguousarray(first).view(np.uint8).reshape(-1, itemsize)
    b = np.ascontiguousarray(second).view(np.uint8).reshape(-1, itemsize)
    mask = np.all(a == POISON_A, axis=1) & np.all(b == POISON_B, axis=1)
    return mask.reshape(first.shape)
