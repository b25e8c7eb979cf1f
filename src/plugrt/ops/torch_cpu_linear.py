"""The PyTorch kernel of products by a constant matrix on the CPU: oneDNN's linear, bias included.

``out = a @ w (+ bias)`` where ``w`` is an engine constant ``[K, N]`` (or ``[N, K]`` used
transposed) and ``a`` any ``[..., M, K]`` whose rows are one strided matrix: one call of
``torch.ops.mkldnn._linear_pointwise`` (oneDNN's matrix product, picking its kernels for the
CPU it runs on, AVX-512 where there is one), then the result is copied into the output. A weight
the engine did not pack (``linear_weights.py``) is passed as a transposed view of the plan's array
(oneDNN then reorders it at every call). The product runs on torch's threads
(:func:`~plugrt.ops.torch_cpu.use_threads`: the engine's count from ``MIN_OPENMP_FLOPS`` on a free
machine): oneDNN's OpenMP workers start at once, where handing row blocks to the engine's helper thread
cost ~70 us a product here and ran BERT-base, ViT, DistilBERT and the T5 encoder 4-16% slower on two
threads (docs/benchmarks.md).

Packed weights (``linear_weights.py``): where the engine holds the weight packed in oneDNN's layout
(a :class:`~plugrt.ops.linear_weights.PackedWeight`), the product runs on the packed matrix. A product
whose weight is packed always runs here (an ``a`` that is not one strided matrix is first copied into
one): the placeholder has no values for the NumPy kernel to read.

Measured on the 2-core AMD EPYC VM (Zen 5, AVX-512) with ``OPENBLAS_CORETYPE=Haswell`` set in
its environment, one thread, 128x768 by 768x768: NumPy's OpenBLAS 1.29 ms, this 0.68 ms,
onnxruntime's MLAS 0.64 ms; 128x768 by 768x3072: 5.5, 3.1 and 2.6 ms.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .linear_weights import packed_matrix
from .onednn_matmul import MatmulWeight
from .product_parts import as_rows
from .torch_cpu import Kernel, available, torch_module, use_threads, view

__all__ = ["linear", "linear_available", "linear_function"]


def linear_function() -> Any:
    """oneDNN's linear (``x @ w^T + b``), or None where this torch has none."""
    torch = torch_module()
    try:
        if not torch.backends.mkldnn.is_available():
            return None
        return torch.ops.mkldnn._linear_pointwise
    except (AttributeError, RuntimeError):
        return None


def linear_available() -> bool:
    """Whether this torch has oneDNN's linear (built with MKLDNN, the CPU default of its wheels)."""
    return available() and linear_function() is not None  # (PLUGRT_TORCH off: torch is not imported)


def linear(
    a: np.ndarray, weight: np.ndarray, transposed: bool, bias: np.ndarray | None, out: np.ndarray
) -> Kernel | None:
    """The kernel ``out = a @ weight (+ bias)``; ``weight`` is ``[K, N]``, or ``[N, K]`` with ``transposed``
    (leading dimensions of one allowed), or a :class:`~plugrt.ops.linear_weights.PackedWeight`; ``bias`` has
    ``N`` values. None where it does not apply (never for a packed weight: an ``a`` that is not one strided
    matrix is copied into one)."""
    packed = packed_matrix(weight)
    if packed is not None and isinstance(packed.matrix, MatmulWeight):
        return None  # packed for oneDNN's matmul called directly (ops/onednn_matmul.py): the own kernel unpacks it
    function = linear_function()
    rows = as_rows(a)
    if function is None or (packed is None and (rows is None or rows.shape[0] == 0 or not out.flags.c_contiguous)):
        return None
    if packed is not None:
        n, w = packed.cols, packed.matrix
    else:
        matrix: np.ndarray = weight.reshape(weight.shape[-2:])
        n = int(matrix.shape[0] if transposed else matrix.shape[1])
        w = view(matrix) if transposed else view(matrix).t()
    count_rows = int(np.prod(a.shape[:-1], dtype=np.int64))
    if out.size != count_rows * n:
        return None
    bt = None if bias is None else view(bias).reshape(-1)
    if count_rows == 0:
        return lambda: None
    if rows is None or not out.flags.c_contiguous:
        return _staged(function, a, w, bt, out)
    at, ot = view(rows), view(out).reshape(-1, n)
    flops = 2.0 * out.size * rows.shape[1]

    def run() -> None:
        use_threads(flops)
        ot.copy_(function(at, w, bt, "none", [], ""))

    return run


def _staged(function: Any, a: np.ndarray, w: Any, bt: Any, out: np.ndarray) -> Kernel:
    """The product for an ``a`` that is not one strided matrix (copied into one first) or an ``out`` that is not
    C-contiguous (the result copied into it)."""
    torch = torch_module()
    source, target = view(a), view(out)
    staged = torch.empty(source.shape)
    rows = staged.view(-1, a.shape[-1])
    flops = 2.0 * out.size * a.shape[-1]

    def run() -> None:
        use_threads(flops)
        staged.copy_(source)
        target.copy_(function(rows, w, bt, "none", [], "").view(target.shape))

    return run
