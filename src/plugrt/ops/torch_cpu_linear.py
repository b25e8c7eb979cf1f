"""The PyTorch kernel of products by a constant matrix on the CPU: oneDNN's linear, bias included.

``out = a @ w (+ bias)`` where ``w`` is an engine constant ``[K, N]`` (or ``[N, K]`` used
transposed) and ``a`` any ``[..., M, K]`` whose rows are one strided matrix: one call of
``torch.ops.mkldnn._linear_pointwise`` (oneDNN's matrix product, picking its kernels for the
CPU it runs on, AVX-512 where there is one), then the result is copied into the output. A weight
the engine did not pack (``linear_weights.py``) is passed as a transposed view of the plan's array
(oneDNN then reorders it at every call). A large product
(:func:`~plugrt.ops.blas_threads.split_products`) is split into blocks that this thread and the
engine's helper thread take in turn (:func:`~plugrt.ops.host_threads.pulled_by_two`), each a
one-thread oneDNN call, as NumPy's products are (``product_parts.py``): for a plain weight blocks of
rows (up to ``MAX_BLOCKS``, ``MIN_BLOCK_ROWS`` rows or more; each reads all of the weight: in CPU time
11-22% more than one call at 128-256 rows, measured with no free core), never column slices of it
(oneDNN reorders a weight whose columns are a strided slice on every call: thousands of times slower).

Packed weights (``linear_weights.py``): where the engine holds the weight packed in oneDNN's layout
(a :class:`~plugrt.ops.linear_weights.PackedWeight`), the product runs on the packed blocks of
columns: a large product as those blocks (times row blocks for a weight packed whole) taken by the
two threads, each block writing its columns of the output; a smaller one block after block on this
thread. A product whose weight is packed always runs here (an ``a`` that is not one strided matrix
is first copied into one): the placeholder has no values for the NumPy kernel to read.

Measured on the 2-core AMD EPYC VM (Zen 5, AVX-512) with ``OPENBLAS_CORETYPE=Haswell`` set in
its environment, one thread, 128x768 by 768x768: NumPy's OpenBLAS 1.29 ms, this 0.68 ms,
onnxruntime's MLAS 0.64 ms; 128x768 by 768x3072: 5.5, 3.1 and 2.6 ms.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .blas_threads import split_products
from .host_threads import on_helper, pulled_by_two
from .linear_weights import packed_matrix
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
    (leading dimensions of one allowed), or a :class:`~plugrt.ops.linear_weights.PackedWeight`; ``bias`` has
    ``N`` values. None where it does not apply (never for a packed weight: an ``a`` that is not one strided
    matrix is copied into one)."""
    function = linear_function()
    packed = packed_matrix(weight)
    rows = as_rows(a)
    if function is None or (packed is None and (rows is None or rows.shape[0] == 0 or not out.flags.c_contiguous)):
        return None
    if packed is not None:
        n, parts = packed.cols, packed.parts
    else:
        matrix: np.ndarray = weight.reshape(weight.shape[-2:])
        n = int(matrix.shape[0] if transposed else matrix.shape[1])
        parts = [(0, n, view(matrix) if transposed else view(matrix).t())]
    count_rows = int(np.prod(a.shape[:-1], dtype=np.int64))
    if out.size != count_rows * n:
        return None
    bt = None if bias is None else view(bias).reshape(-1)
    if count_rows == 0:
        return lambda: None
    if rows is None or not out.flags.c_contiguous:
        return _staged(function, a, parts, bt, out, n)
    at, ot = view(rows), view(out).reshape(-1, n)
    flops = 2.0 * out.size * rows.shape[1]
    split = split_products(flops)
    if len(parts) == 1:
        wt = parts[0][2]
        count = min(MAX_BLOCKS, rows.shape[0] // MIN_BLOCK_ROWS) if split else 1
        if count < 2:

            def run() -> None:
                use_threads(flops)
                ot.copy_(function(at, wt, bt, "none", [], ""))

            return run
        step = -(-rows.shape[0] // count)
        spans = [(start, min(start + step, rows.shape[0])) for start in range(0, rows.shape[0], step)]
    else:
        spans = [(0, rows.shape[0])]
    blocks = [
        (at[r0:r1], w, None if bt is None else bt[c0:c1], ot[r0:r1, c0:c1]) for r0, r1 in spans for c0, c1, w in parts
    ]

    def block(item: int) -> None:
        if on_helper():
            one_thread_here()
        x, w, b, target = blocks[item]
        target.copy_(function(x, w, b, "none", [], ""))

    if not split:

        def run_parts() -> None:
            use_threads(flops)
            for x, w, b, target in blocks:
                target.copy_(function(x, w, b, "none", [], ""))

        return run_parts

    def run_blocks() -> None:
        use_threads(0.0)  # one thread here too
        pulled_by_two(len(blocks), block)

    return run_blocks


def _staged(function: Any, a: np.ndarray, parts: list[Any], bt: Any, out: np.ndarray, n: int) -> Kernel:
    """The product for an ``a`` that is not one strided matrix (copied into one first) or an ``out`` that is not
    C-contiguous (the result copied into it), block of columns after block."""
    torch = torch_module()
    source, target = view(a), view(out)
    staged = torch.empty(source.shape)
    rows, columns = staged.view(-1, a.shape[-1]), target.view(-1, n) if out.flags.c_contiguous else None
    flops = 2.0 * out.size * a.shape[-1]

    def run() -> None:
        use_threads(flops)
        staged.copy_(source)
        if columns is not None:
            for c0, c1, w in parts:
                columns[:, c0:c1].copy_(function(rows, w, None if bt is None else bt[c0:c1], "none", [], ""))
            return
        result = torch.cat(
            [function(rows, w, None if bt is None else bt[c0:c1], "none", [], "") for c0, c1, w in parts], 1
        )
        target.copy_(result.view(target.shape))

    return run
