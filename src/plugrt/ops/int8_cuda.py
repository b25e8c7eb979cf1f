"""INT8 products on a GPU: INT8 operands, INT32 accumulation in cuBLASLt (``torch._int_mm``), one epilogue kernel.

The INT8 operators (:mod:`plugrt.ops.int8`) compute exact integer products everywhere; on the CPU
through float32 BLAS in exact blocks. On a GPU with PyTorch installed (with CUDA; as the GPU's float
products, :mod:`plugrt.backends.cuda_matmul`, not a tactic that ``PLUGRT_TORCH`` turns off) the product is
``torch._int_mm`` (cuBLASLt's INT8 GEMM with INT32 accumulation, on the engine's stream: the
CUDA backend makes it PyTorch's current stream for the run), and the dequantize (``acc * in_scale
* weight_scale + bias``) or requantize epilogue is one CuPy elementwise kernel that reads the
accumulator and writes the output once. cuBLASLt wants the reduction length and the number of
columns in multiples of 8 and more than 16 rows: operands are laid out once per shape change in
zero-padded buffers that meet that (zero rows and columns add nothing to the sums), so the
product is exact as on the CPU.

A convolution's columns are gathered (im2col) straight into a ``[C * taps, N * positions]`` INT8
buffer, so one product covers the whole batch. Grouped convolutions, and products too small for
cuBLASLt, keep the exact float path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..backends.cuda_matmul import torch_for_graphs
from .torch_cpu import torch_module, view

__all__ = ["ALIGN", "MIN_ROWS", "Int8Product", "epilogue_into", "gather_columns", "padded", "usable"]

#: cuBLASLt's INT8 GEMM takes reductions and column counts in multiples of this
ALIGN = 8
#: and more rows than this
MIN_ROWS = 16

_DEQUANTIZE = (
    "int32 acc, float32 m, float32 b", "T out", "out = (T)((float)acc * m + b)", "plugrt_int8_dequantize"
)
_REQUANTIZE = (
    "int32 acc, float32 m, float32 b, float32 inv",
    "int8 out",
    "float v = rintf(((float)acc * m + b) * inv); out = (signed char)fminf(fmaxf(v, -128.0f), 127.0f)",
    "plugrt_int8_requantize",
)
_KERNELS: dict[str, Any] = {}


def padded(size: int) -> int:
    """``size`` rounded up to a multiple of :data:`ALIGN`."""
    return -(-size // ALIGN) * ALIGN


def usable(xp: Any, rows: int) -> bool:
    """Whether products of ``rows`` output rows on arrays of ``xp`` take the cuBLASLt INT8 path."""
    return xp is not np and rows > MIN_ROWS and torch_for_graphs() is not None


def _kernel(cp: Any, spec: tuple[str, str, str, str]) -> Any:
    found = _KERNELS.get(spec[3])
    if found is None:
        found = _KERNELS[spec[3]] = cp.ElementwiseKernel(*spec)
    return found


def epilogue_into(cp: Any, acc: Any, multiplier: Any, bias: Any, out: Any, output_scale: float) -> None:
    """``out = acc * multiplier + bias`` (FLOAT or HALF ``out``), or that requantized with ``output_scale``
    (INT8 ``out``), in one kernel; ``multiplier`` and ``bias`` broadcast against ``acc`` (float32)."""
    if cp is np:  # the same arithmetic in NumPy passes (the layout is checked on the CPU this way)
        value = acc.astype(np.float32) * multiplier + bias
        if out.dtype == np.int8:
            value = np.clip(np.rint(value * np.float32(1.0 / output_scale)), -128, 127)
        out[...] = value
    elif out.dtype == np.int8:
        _kernel(cp, _REQUANTIZE)(acc, multiplier, bias, np.float32(1.0 / output_scale), out)
    else:
        _kernel(cp, _DEQUANTIZE)(acc, multiplier, bias, out)


class Int8Product:
    """``acc[:rows, :cols] = a @ b`` with INT8 ``a`` ``[rows, K]`` (a weight, padded once) and a ``b`` the
    caller writes into :attr:`columns` (``[K, cols]`` inside a zero-padded ``[K', cols']`` INT8 buffer)."""

    def __init__(self, cp: Any, a: np.ndarray, k: int, cols: int) -> None:
        torch = torch_for_graphs() if cp is not np else torch_module()
        rows = a.shape[0]
        self.k_padded, self.cols_padded = padded(k), padded(cols)
        weight = np.zeros((rows, self.k_padded), dtype=np.int8)
        weight[:, :k] = a
        self._a = view(cp.asarray(weight))
        self._buffer = cp.zeros((self.k_padded, self.cols_padded), dtype=np.int8)
        self.columns = self._buffer[:k, :cols]
        self._acc = cp.empty((rows, self.cols_padded), dtype=np.int32)
        self.acc = self._acc[:, :cols]
        self._b, self._out = view(self._buffer), view(self._acc)
        self._mm = torch._int_mm

    def column_view(self, cp: Any, shape: Sequence[int]) -> Any:
        """:attr:`columns` seen as ``[C, taps, N, *out_spatial]`` (``shape``; a view of the padded buffer)."""
        _, taps, _, *spatial = shape
        itemsize = self._buffer.itemsize
        inner = [int(np.prod(spatial[i + 1 :], dtype=np.int64)) for i in range(len(spatial))]
        positions = int(np.prod(spatial, dtype=np.int64))
        strides = [taps * self.cols_padded, self.cols_padded, positions, *inner]
        return cp.lib.stride_tricks.as_strided(self._buffer, tuple(shape), tuple(s * itemsize for s in strides))

    def acc_view(self, cp: Any, shape: Sequence[int], strides: Sequence[int]) -> Any:
        """The accumulator (INT32 ``[rows, cols]`` inside its padded buffer) seen with ``shape`` and element
        ``strides`` (a convolution's ``[N, M, positions]``, a transposed Gemm's ``[rows, N]``)."""
        itemsize = self._acc.itemsize
        return cp.lib.stride_tricks.as_strided(self._acc, tuple(shape), tuple(s * itemsize for s in strides))

    def run(self) -> None:
        """The product into :attr:`acc` (on the current stream)."""
        self._mm(self._a, self._b, out=self._out)


def gather_columns(xp: Any, x: Any, target: Any, plan: Sequence[tuple[tuple[Any, ...], tuple[Any, ...]]]) -> None:
    """im2col of ``x`` ``[N, C, *spatial]`` into ``target`` ``[C, taps, N, *out_spatial]``
    (:meth:`Int8Product.column_view`), copying each tap's strided slice as the float path does; ``plan`` is
    the operator's tap plan (empty: a pointwise kernel, the input itself). Positions no tap writes (padding)
    keep the zeros the buffer was made with."""
    if not plan:
        xp.copyto(target[:, 0], x.swapaxes(0, 1))
        return
    for dst, src in plan:
        index = (slice(None), dst[2], slice(None), *dst[3:])  # channels, the tap, every image, its spots
        xp.copyto(target[index], x[src].swapaxes(0, 1))
