"""The PyTorch kernel of products by a constant matrix on the CPU: oneDNN's linear, bias included.

``out = a @ w (+ bias)`` where ``w`` is an engine constant ``[K, N]`` (or ``[N, K]`` used
transposed) and ``a`` any ``[..., M, K]`` whose rows are one strided matrix: one call of
``torch.ops.mkldnn._linear_pointwise`` (oneDNN's matrix product, picking its kernels for the
CPU it runs on, AVX-512 where there is one), then the result is copied into the output. The
weight is passed as a transposed view of the plan's array (no copy, nothing packed ahead:
weights stay held once). A large product (:func:`~plugrt.ops.blas_threads.split_products`) is
split into blocks of rows (up to ``MAX_BLOCKS``, ``MIN_BLOCK_ROWS`` rows or more) that this thread
and the engine's helper thread take in turn (:func:`~plugrt.ops.host_threads.pulled_by_two`),
each a one-thread oneDNN call, as NumPy's products are (``product_parts.py``); in CPU time a
row block costs 2-5% more than the whole product. Never column blocks: oneDNN reorders a weight
whose columns are a strided slice on every call (thousands of times slower).

Measured on the 2-core AMD EPYC VM (Zen 5, AVX-512) with ``OPENBLAS_CORETYPE=Haswell`` set in
its environment, one thread, 128x768 by 768x768: NumPy's OpenBLAS 1.29 ms, this 0.68 ms,
onnxruntime's MLAS 0.64 ms; 128x768 by 768x3072: 5.5, 3.1 and 2.6 ms.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .blas_threads import split_products
from .host_threads import on_helper, pulled_by_two
from .product_parts import as_rows
from .torch_cpu import Kernel, one_thread_here, torch_module, use_threads, view

__all__ = ["MAX_BLOCKS", "MIN_BLOCK_ROWS", "linear", "linear_available", "linear_function"]

#: at most this many row blocks per product
MAX_BLOCKS = 4
#: a row block has at least this many rows
MIN_BLOCK_ROWS = 48


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
    return torch_module() is not None and linear_function() is not None


def linear(
    a: np.ndarray, weight: np.ndarray, transposed: bool, bias: np.ndarray | None, out: np.ndarray
) -> Kernel | None:
    """The kernel ``out = a @ weight (+ bias)``; ``weight`` is ``[K, N]``, or ``[N, K]`` with ``transposed``
    (leading dimensions of one allowed); ``bias`` has ``N`` values. None where it does not apply."""
    function = linear_function()
    rows = as_rows(a)
    if function is None or rows is None or rows.shape[0] == 0 or not out.flags.c_contiguous:
        return None
    matrix: np.ndarray = weight.reshape(weight.shape[-2:])
    n = int(matrix.shape[0] if transposed else matrix.shape[1])
    if out.size != rows.shape[0] * n:
        return None
    at, ot = view(rows), view(out).reshape(-1, n)
    wt = view(matrix) if transposed else view(matrix).t()
    bt = None if bias is None else view(bias).reshape(-1)
    flops = 2.0 * out.size * rows.shape[1]
    count = min(MAX_BLOCKS, rows.shape[0] // MIN_BLOCK_ROWS) if split_products(flops) else 1
    if count < 2:

        def run() -> None:
            use_threads(flops)
            ot.copy_(function(at, wt, bt, "none", [], ""))

        return run
    step = -(-rows.shape[0] // count)
    spans = [(start, min(start + step, rows.shape[0])) for start in range(0, rows.shape[0], step)]

    def block(item: int) -> None:
        if on_helper():
            one_thread_here()
        start, stop = spans[item]
        ot[start:stop].copy_(function(at[start:stop], wt, bt, "none", [], ""))

    def run_blocks() -> None:
        use_threads(0.0)  # one thread here too
        pulled_by_two(len(spans), block)

    return run_blocks
