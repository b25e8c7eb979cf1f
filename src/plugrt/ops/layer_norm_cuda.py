"""A one-pass LayerNorm CUDA kernel: each row is read once into registers, normalised, written once.

``y = (x - mean) / sqrt(var + eps) * gamma + beta`` over the last ``cols``
elements of each row; FP16 or FP32 input/output, FP32 arithmetic and FP32
gamma/beta. Loads and stores are 16-byte vectors; a row is held by a group of
threads (a warp for short rows, up to a whole block for long ones) and the two
reductions (mean, then the centred sum of squares — exact, no cancellation) stay
in registers and shuffles. The kernel is specialised for each (dtype, cols) at
first use, so the per-thread work is fully unrolled.

With a residual (``residual=``, the transformer's ``LayerNorm(x + r)``) the kernel
reads ``r`` beside ``x`` and normalises their sum, rounded to the row type first
as a separate add would store it; ``total=`` also writes that sum (a pre-LN block
reads it again). One pass instead of an add's three tensors and the norm's two.
The LayerNorm plugin and the ``normalization`` operator on a GPU both launch it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backends.cuda import CudaModule
from ..backends.registry import gpu_backend

__all__ = ["layer_norm_cuda", "layer_norm_launch", "supports"]

_SOURCE = r"""
#include <cuda_fp16.h>
template <typename T> __device__ __forceinline__ float to_f(T v);
template <> __device__ __forceinline__ float to_f<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_f<__half>(__half v) { return __half2float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }

template <int TPR>
__device__ __forceinline__ float row_sum(float v, float* shared) {
    #pragma unroll
    for (int o = (TPR < 32 ? TPR : 32) / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffff, v, o);
    if (TPR <= 32) return v;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    const int first = (threadIdx.x / TPR) * (TPR / 32);   // this row's warps
    float total = 0.f;
    #pragma unroll
    for (int w = 0; w < TPR / 32; ++w) total += shared[first + w];
    return total;
}

// RES: 0 plain, 1 normalise x + r, 2 also write x + r to s
template <typename T, int COLS, int TPR, int RES>
__global__ void __launch_bounds__(TPR < 256 ? 256 : TPR)
layer_norm(const T* __restrict__ x, const T* __restrict__ r, const float* __restrict__ gamma,
           const float* __restrict__ beta, T* __restrict__ y, T* __restrict__ s, int rows, float eps) {
    constexpr int VEC = 16 / sizeof(T);
    constexpr int LOADS = COLS / (VEC * TPR);
    __shared__ float shared[32];
    const int rows_per_block = blockDim.x / TPR;
    const int row = blockIdx.x * rows_per_block + threadIdx.x / TPR;
    const int lane = threadIdx.x % TPR;
    const bool valid = row < rows;   // no early return: every thread takes part in the block reductions
    const T* xr = x + (size_t)(valid ? row : 0) * COLS;
    T* yr = y + (size_t)(valid ? row : 0) * COLS;
    float v[LOADS][VEC];
    float sum = 0.f;
    #pragma unroll
    for (int l = 0; l < LOADS; ++l) {
        const int col = (l * TPR + lane) * VEC;
        uint4 raw = valid ? *reinterpret_cast<const uint4*>(xr + col) : make_uint4(0, 0, 0, 0);
        T* e = reinterpret_cast<T*>(&raw);
        if (RES) {
            const uint4 other = valid ? *reinterpret_cast<const uint4*>(r + (size_t)(valid ? row : 0) * COLS + col)
                                      : make_uint4(0, 0, 0, 0);
            const T* o = reinterpret_cast<const T*>(&other);
            #pragma unroll
            for (int k = 0; k < VEC; ++k) e[k] = from_f<T>(to_f<T>(e[k]) + to_f<T>(o[k]));
            if (RES == 2 && valid) *reinterpret_cast<uint4*>(s + (size_t)row * COLS + col) = raw;
        }
        #pragma unroll
        for (int k = 0; k < VEC; ++k) { v[l][k] = to_f<T>(e[k]); sum += v[l][k]; }
    }
    const float mean = row_sum<TPR>(sum, shared) * (1.f / COLS);
    float sq = 0.f;
    #pragma unroll
    for (int l = 0; l < LOADS; ++l)
        #pragma unroll
        for (int k = 0; k < VEC; ++k) { float d = v[l][k] - mean; sq += d * d; }
    const float rstd = rsqrtf(row_sum<TPR>(sq, shared) * (1.f / COLS) + eps);
    #pragma unroll
    for (int l = 0; l < LOADS; ++l) {
        const int col = (l * TPR + lane) * VEC;
        uint4 raw;
        T* e = reinterpret_cast<T*>(&raw);
        #pragma unroll
        for (int k = 0; k < VEC; k += 4) {
            const float4 g = *reinterpret_cast<const float4*>(gamma + col + k);
            const float4 b = *reinterpret_cast<const float4*>(beta + col + k);
            e[k + 0] = from_f<T>((v[l][k + 0] - mean) * rstd * g.x + b.x);
            e[k + 1] = from_f<T>((v[l][k + 1] - mean) * rstd * g.y + b.y);
            e[k + 2] = from_f<T>((v[l][k + 2] - mean) * rstd * g.z + b.z);
            e[k + 3] = from_f<T>((v[l][k + 3] - mean) * rstd * g.w + b.w);
        }
        if (valid) *reinterpret_cast<uint4*>(yr + col) = raw;
    }
}
"""

_MODULE = CudaModule(_SOURCE)


def _threads_per_row(cols: int, vec: int) -> int | None:
    vectors = cols // vec
    if cols % vec:
        return None
    target = min(1024, max(32, vectors // 4))  # about four 16-byte loads per thread
    tpr = 1024
    while tpr > 32 and (tpr > target or vectors % tpr):  # a power of two >= 32 dividing the row
        tpr //= 2
    if tpr < 32 or vectors % tpr or (vectors // tpr) > 16:
        return None
    return tpr


def supports(dtype: Any, cols: int) -> bool:
    """True when the fast kernel handles rows of ``cols`` elements of ``dtype`` (else use a fallback)."""
    np_dtype = np.dtype(dtype)
    if np_dtype not in (np.dtype(np.float32), np.dtype(np.float16)):
        return False
    return _threads_per_row(cols, 16 // np_dtype.itemsize) is not None


def _kernel(dtype: np.dtype, cols: int, residual: int) -> tuple[Any, int]:
    tpr = _threads_per_row(cols, 16 // dtype.itemsize)
    assert tpr is not None
    ctype = "float" if dtype == np.float32 else "__half"
    return _MODULE.function(f"layer_norm<{ctype}, {cols}, {tpr}, {residual}>"), tpr


def layer_norm_launch(
    x: int, gamma: int, beta: int, y: int, rows: int, cols: int, eps: float, dtype: Any, residual: int = 0, total: int = 0
) -> tuple[Any, tuple[Any, ...]]:
    """The kernel and its launch arguments, ``kernel(*arguments)`` launching it on CuPy's current stream.

    Addresses of x/y (``dtype``, ``rows`` × ``cols``), of FP32 gamma/beta (``cols``), of the residual
    (``residual``, 0 for none) and of the sum's output (``total``, 0 for none; needs a residual).
    Requires :func:`supports` and 16-byte aligned addresses.
    """
    if total and not residual:
        raise ValueError("layer_norm_launch: the sum's output (total) needs a residual")
    kernel, tpr = _kernel(np.dtype(dtype), cols, 2 if total else 1 if residual else 0)
    block = max(tpr, 256)
    rows_per_block = block // tpr
    grid = (rows + rows_per_block - 1) // rows_per_block
    pointers = (np.uint64(p) for p in (x, residual, gamma, beta, y, total))
    return kernel, ((grid,), (block,), (*pointers, np.int32(rows), np.float32(eps)))


def layer_norm_cuda(
    x: int, gamma: int, beta: int, y: int, rows: int, cols: int, eps: float, dtype: Any, stream: int
) -> None:
    """Plain layer normalization (:func:`layer_norm_launch` without a residual) launched on ``stream``, a raw
    handle (the LayerNorm plugin's ``enqueue``)."""
    kernel, arguments = layer_norm_launch(x, gamma, beta, y, rows, cols, eps, dtype)
    with gpu_backend().stream_scope(stream):
        kernel(*arguments)
