"""The NumPy convolution's columns and products at small sizes, bound once per shape.

:func:`bound_convolution` is the run of a one-group convolution with every view made at bind:
its column copies (im2col), product, bias and epilogue, so that a run costs those calls alone (the
general kernel's checks and lookups cost small layers 3-8 us each). Two choices keep small layers
cheap: a convolution without padding whose taps each move a few bytes fills its column buffer with
one copy of a strided view of the input (:func:`window_view`; silero-vad's STFT convolution has 256
taps), and a product with two or three output positions is one matrix-vector product per position
(:func:`vector_products`), which OpenBLAS runs faster than its matrix product on so few columns.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .blas_threads import product_guard
from .product_parts import matmul_parts_into

__all__ = [
    "VECTOR_PRODUCT_MAX_POSITIONS",
    "WINDOW_COPY_MAX_BYTES",
    "bound_convolution",
    "vector_products",
    "window_view",
]

#: a convolution without padding whose taps each copy at most this many bytes into the column buffer fills
#: it with one copy of a strided view (a call per tap costs more than such a copy; on larger maps the
#: copies per tap run faster than the one strided copy)
WINDOW_COPY_MAX_BYTES = 4 << 10
#: a one-group product with at most this many output positions per batch entry runs as one matrix-vector
#: product per position (OpenBLAS's GEMM on two or three columns: 14.2 us for silero-vad's 128 x 387 x 3,
#: 18.3 for its 258 x 256 x 3 STFT, against 8.6 and 10.1 for three GEMV; NumPy's own product already
#: takes GEMV for one column)
VECTOR_PRODUCT_MAX_POSITIONS = 3


def vector_products(kernel: np.ndarray, columns: np.ndarray, result: np.ndarray) -> list[tuple[Any, Any]] | None:
    """``result[b] = kernel @ columns[b]`` (``[N, rows, positions]`` into ``[N, maps, positions]``) as the
    (column, result column) pairs of one matrix-vector product each where the positions are few (2 to
    :data:`VECTOR_PRODUCT_MAX_POSITIONS`), else None (one product)."""
    n, _, positions = columns.shape
    if not 1 < positions <= VECTOR_PRODUCT_MAX_POSITIONS:
        return None
    return [(columns[b, :, j], result[b, :, j]) for b in range(n) for j in range(positions)]


def window_view(
    x: np.ndarray, kernel: Sequence[int], multipliers: Sequence[int], out_spatial: Sequence[int]
) -> np.ndarray:
    """The read-only view ``[N, C, *kernel, *out]`` of input ``x`` whose element ``[n, c, *k, *o]`` is what
    kernel tap ``k`` reads for output position ``o``, every window lying inside ``x``; ``multipliers`` are
    the dilations then the strides (per spatial axis)."""
    spatial = x.strides[2:]
    strides = (*x.strides[:2], *(m * s for m, s in zip(multipliers, (*spatial, *spatial))))
    shape = (*x.shape[:2], *kernel, *out_spatial)
    return np.lib.stride_tricks.as_strided(x, shape, strides, writeable=False)


def bound_convolution(op: Any, inputs: Sequence[Any], outputs: Sequence[Any]) -> Callable[[], None] | None:
    """The run of convolution ``op`` (a ``ConvolutionOperator`` prepared for these shapes) over these FLOAT
    arrays, for one group and NumPy (im2col, or the input itself for a 1x1 kernel with stride 1 and no
    padding): its column copies, product, bias and epilogue with every view made now, computing what the
    operator's ``run`` does. None for any other layer."""
    x, out = inputs[0], outputs[0]
    if op.group != 1 or op.uniform or "kernel" not in op.weights or op._depthwise is not None:
        return None
    if x.dtype != np.float32 or out.dtype != np.float32 or x.ndim < 3 or op._shapes != (x.shape, out.shape):
        return None
    if not (x.flags.c_contiguous and out.flags.c_contiguous) or op.bias_input is not None:
        return None
    n, positions = x.shape[0], math.prod(out.shape[2:])
    kernel = np.asarray(op.weights["kernel"]).reshape(op.maps, -1)
    copies: list[tuple[Any, Any]] = []
    if op._cols_shape is None:  # a 1x1 kernel: the input is its columns
        columns = x.reshape(n, x.shape[1], positions)
    else:
        _, cols, taps = op._bind(np)
        columns = cols.reshape(n, -1, positions)
        if op._windows is not None:
            windows = window_view(x, op.window.kernel, op._windows, op._cols_shape[3:])
            copies.append((cols.reshape(windows.shape), windows))
        else:
            copies.extend((dst, x[src]) for dst, src in taps)
    if kernel.dtype != np.float32 or kernel.shape[1] != columns.shape[1]:
        return None
    result = out.reshape(n, op.maps, positions)
    vectors = vector_products(kernel, columns, result)
    bias = op._bias
    residual = op._residual(inputs, out)
    activate = op._activate
    guard = product_guard(op.maps, 1 if vectors is not None else positions, kernel.shape[1])  # one product's

    stacked = kernel[None]  # (a batch of one: the split's blocks are batch entries, or columns of one)

    def run() -> None:
        for target, source in copies:
            np.copyto(target, source)
        if guard is None:  # a large product: blocks on two threads, as the engine's products
            matmul_parts_into(np, stacked, columns, result)
        else:
            with guard:
                if vectors is None:
                    np.matmul(kernel, columns, out=result)
                else:
                    for column, target in vectors:
                        np.matmul(kernel, column, out=target)
        if bias is not None:
            np.add(result, bias, out=result)
        activate(out, np, residual)

    return run
