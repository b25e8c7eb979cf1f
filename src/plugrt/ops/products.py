"""Matrix products into a given buffer, on the engine's device.

The backend picks the library: NumPy on the CPU; on the GPU a product that a CUDA
graph can capture (see :mod:`plugrt.backends.cuda_matmul`).
"""

from __future__ import annotations

from typing import Any

from ..backends.registry import backend_for

__all__ = ["matmul_into"]


def matmul_into(xp: Any, a: Any, b: Any, out: Any, bias: Any = None) -> None:
    """``out[...] = a @ b`` (NumPy broadcasting rules), plus ``bias`` (broadcast over the
    last axis) when given, with ``xp``'s backend; ``out`` is C-contiguous."""
    backend_for(xp).matmul_into(a, b, out, bias)
