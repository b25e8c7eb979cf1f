"""Matrix products into a given buffer, on either device.

On the GPU, CuPy's cuBLAS calls refuse to run while a stream is being captured
into a CUDA graph; PyTorch's do not. So when PyTorch is installed, GPU products go
through ``torch.matmul(..., out=)`` on the current CuPy stream (zero-copy views through
``__cuda_array_interface__``), which also makes engines with matrix products
capturable. Without PyTorch, CuPy's matmul is used (and graph capture of such
engines raises a clear error).
"""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np

__all__ = ["matmul_into"]

_HAS_TORCH = importlib.util.find_spec("torch") is not None


def matmul_into(xp: Any, a: Any, b: Any, out: Any) -> None:
    """``out[...] = a @ b`` (NumPy broadcasting rules); ``out`` is C-contiguous."""
    if xp is np or not _HAS_TORCH:
        xp.matmul(a, b, out=out)
        return
    import torch

    stream = torch.cuda.ExternalStream(xp.cuda.get_current_stream().ptr)
    with torch.cuda.stream(stream):
        torch.matmul(
            torch.as_tensor(a, device="cuda"),
            torch.as_tensor(b, device="cuda"),
            out=torch.as_tensor(out, device="cuda"),
        )
