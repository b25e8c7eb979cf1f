"""A one-pass softmax over the last axis, optionally of a scaled input: ``softmax(x * s)``.

One warp per row: each lane holds its share of the row in registers (read once), the
maximum and the sum of exponentials are warp shuffles, the result is written once. The
scale ``s`` is a one-element device tensor (what a fused ``Mul`` by a constant feeds),
read by the kernel, so nothing is read back to the host. FP32 or FP16 rows of up to
:data:`MAX_COLS` elements; FP32 arithmetic (an FP16 product ``x * s`` is rounded to FP16
first, as the separate ``Mul`` layer would store it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backends.cuda import CudaModule

__all__ = ["MAX_COLS", "softmax_last_axis", "supports"]

MAX_COLS = 2048
_ROWS_PER_BLOCK = 4

_SOURCE = r"""
#include <cuda_fp16.h>
__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float round_to(float v, const float*) { return v; }
__device__ __forceinline__ float round_to(float v, const __half*) { return __half2float(__float2half_rn(v)); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__half* p, float v) { *p = __float2half_rn(v); }

template <typename T, int PER_LANE>
__global__ void softmax_rows(const T* __restrict__ x, const T* __restrict__ scale, T* __restrict__ y,
                             int rows, int cols) {
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= rows) return;
    const T* xr = x + (size_t)row * cols;
    T* yr = y + (size_t)row * cols;
    const bool scaled = scale != nullptr;
    const float s = scaled ? to_f(scale[0]) : 1.f;
    float v[PER_LANE];
    float top = __uint_as_float(0xff800000u);
    #pragma unroll
    for (int j = 0; j < PER_LANE; ++j) {
        const int c = lane + 32 * j;
        v[j] = __uint_as_float(0xff800000u);
        if (c < cols) {
            const float raw = to_f(xr[c]);
            v[j] = scaled ? round_to(raw * s, x) : raw;
        }
        top = fmaxf(top, v[j]);
    }
    #pragma unroll
    for (int o = 16; o > 0; o /= 2) top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, o));
    float total = 0.f;
    #pragma unroll
    for (int j = 0; j < PER_LANE; ++j) {
        v[j] = (lane + 32 * j < cols) ? expf(v[j] - top) : 0.f;
        total += v[j];
    }
    #pragma unroll
    for (int o = 16; o > 0; o /= 2) total += __shfl_xor_sync(0xffffffffu, total, o);
    #pragma unroll
    for (int j = 0; j < PER_LANE; ++j) {
        const int c = lane + 32 * j;
        if (c < cols) store(yr + c, v[j] / total);
    }
}
"""

_MODULE = CudaModule(_SOURCE)


def supports(dtype: Any, cols: int) -> bool:
    """True when the kernel handles rows of ``cols`` elements of ``dtype``."""
    return np.dtype(dtype) in (np.dtype(np.float32), np.dtype(np.float16)) and 0 < cols <= MAX_COLS


def _kernel(dtype: np.dtype, cols: int) -> Any:
    per_lane = 1
    while 32 * per_lane < cols:
        per_lane *= 2
    return _MODULE.function(f"softmax_rows<{'float' if dtype == np.float32 else '__half'}, {per_lane}>")


def softmax_last_axis(x: Any, out: Any, scale: Any = None) -> None:
    """``out = softmax(x * scale)`` over the last axis, on CuPy's current stream.

    ``x`` and ``out``: C-contiguous CuPy arrays of one dtype with :func:`supports`;
    ``scale``: None or a one-element CuPy array of that dtype.
    """
    cols = int(x.shape[-1]) if x.ndim else 1
    rows = int(x.size) // cols if cols else 0
    if rows == 0:
        return
    kernel = _kernel(np.dtype(x.dtype), cols)
    grid = (rows + _ROWS_PER_BLOCK - 1) // _ROWS_PER_BLOCK
    scale_arg = scale if scale is not None else np.uint64(0)
    kernel((grid,), (32 * _ROWS_PER_BLOCK,), (x, scale_arg, out, np.int32(rows), np.int32(cols)))
