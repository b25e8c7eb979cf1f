"""Matrix products into a given buffer, on the engine's device.

The backend picks the library: NumPy on the CPU; on the GPU a product that a CUDA
graph can capture (see :mod:`plugrt.backends.cuda_matmul`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backends.registry import backend_for

__all__ = ["is_rows_first", "matmul_into", "rows_first"]


def matmul_into(xp: Any, a: Any, b: Any, out: Any, bias: Any = None) -> None:
    """``out[...] = a @ b`` (NumPy broadcasting rules), plus ``bias`` (broadcast over the
    last axis) when given, with ``xp``'s backend; ``out`` is C-contiguous."""
    backend_for(xp).matmul_into(a, b, out, bias)


def rows_first(weights: np.ndarray) -> np.ndarray:
    """``weights`` (a stack of ``[N, K]`` matrices that products take transposed, ``x @ w.T``) with the same
    shape and values but laid out so that each ``w.T`` is C-contiguous ``[K, N]`` rows: a new array, read-only.
    OpenBLAS's product by a transposed operand is slower than by a contiguous one at up to a few hundred rows,
    up to 7x at a few (one thread, 4 x 128 by 128 x 512: 36.5 against 5.6 us; 8 x 768 by 768 x 768 2.2x; 512
    rows within 5%; docs/benchmarks.md)."""
    ordered = np.ascontiguousarray(np.swapaxes(weights, -1, -2))
    ordered.flags.writeable = False
    return np.swapaxes(ordered, -1, -2)


def is_rows_first(array: Any) -> bool:
    """Whether ``array`` is laid out as :func:`rows_first` makes it (its last two axes swapped, C-contiguous)."""
    return isinstance(array, np.ndarray) and array.ndim >= 2 and np.swapaxes(array, -1, -2).flags.c_contiguous
