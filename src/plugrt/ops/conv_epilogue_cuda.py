"""A GPU convolution's epilogue in one kernel: bias, residual, activation and scalar affine map.

PyTorch's convolution on a GPU adds the bias in a kernel of its own after cuDNN's (cuDNN fuses it only
with ReLU), and the convolution's activation, residual and the copy into the engine's buffer are more
passes over the result. Here the convolution runs without its bias and one kernel writes the engine's
output::

    y = shift + scale * act(conv + bias[c] (+ r))

in the output's layout (contiguous NCHW or channels-last: the channel of element ``i`` is ``(i / inner) %
channels``), reading the result where it lies (cuDNN may give a depthwise convolution's result in the other
layout: the kernel then reads it through its strides, the relayout included). The activation is the elementwise chains' CUDA expression
(:data:`~plugrt.ops.fused_elementwise_cuda.ACTIVATION_SOURCE`), compiled by NVRTC once per activation and
its parameters. FLOAT arithmetic, one rounding at the end (the separate passes round after each).
MobileNetV3-small's fp16 export at batch 32 spent 18% of its kernel time in 46 separate bias adds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .fused_elementwise_cuda import epilogue_module

__all__ = ["conv_epilogue"]

_TEMPLATE = r"""
%(preamble)s
// y and r laid out alike (inner: 1 channels-last, else the spatial size); x as it lies: 4-D strides
// (sn, sc, sh, sw) in elements, with h_w the width (STRIDED), else laid out as y. VEC elements a step, loaded
// and stored as one 16-byte word (VEC > 1: not STRIDED, n and the channels (channels-last) or the spatial size
// multiples of VEC, the pointers 16-byte aligned; the VEC elements then have channels c0 .. c0 + VEC - 1, or c0)
template <typename T, bool RES, bool STRIDED, int VEC>
__global__ void conv_epilogue(const T* __restrict__ x, const T* __restrict__ bias, const T* __restrict__ r,
                              T* __restrict__ y, long long n, long long inner, int channels, float scale,
                              float shift, long long height, long long width, long long sn, long long sc,
                              long long sh, long long sw) {
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x; g < n / VEC; g += stride) {
        const long long i = g * VEC;
        const long long c = (i / inner) %% channels;
        Pack<T, VEC> xs, rs, ys;
        if (STRIDED) {  // (VEC 1) the element's (n, c, h, w) from y's layout, then x's offset
            long long w, h, b;
            if (inner == 1) { long long p = i / channels; w = p %% width; p /= width; h = p %% height; b = p / height; }
            else { w = i %% width; long long p = i / width; h = p %% height; b = p / height / channels; }
            xs.v[0] = x[b * sn + c * sc + h * sh + w * sw];
        } else {
            xs = *reinterpret_cast<const Pack<T, VEC>*>(x + i);
        }
        if (RES) rs = *reinterpret_cast<const Pack<T, VEC>*>(r + i);
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            float v = to_f(xs.v[k]) + to_f(bias[inner == 1 ? c + k : c]);
            if (RES) v += to_f(rs.v[k]);
            v = %(activation)s;
            ys.v[k] = stored(shift + scale * v, T());
        }
        *reinterpret_cast<Pack<T, VEC>*>(y + i) = ys;
    }
}
"""

_THREADS = 256


def _same_memory(a: Any, b: Any) -> bool:
    return tuple(a.shape) == tuple(b.shape) and tuple(a.stride()) == tuple(b.stride())


def conv_epilogue(
    ot: Any,
    bias: Any,
    residual: Any,
    activation: str | None,
    alpha: float,
    beta: float,
    post_affine: tuple[float, float] = (1.0, 0.0),
) -> Callable[..., bool] | None:
    """``apply(result, given=None)`` writing the epilogue of ``result`` (the convolution without its bias) into
    ``ot``, reading the residual from ``given`` instead of ``residual`` where given (a tensor laid out alike).

    ``ot``: the output as a torch CUDA tensor ``[N, C, *spatial]``, contiguous or channels-last; ``bias``:
    ``[C]`` of its type; ``residual``: None or a tensor laid out like ``ot``; ``activation``: an activation
    type's name or None. ``apply`` returns False (having done nothing) when it cannot read ``result`` (another
    shape; not 4-D and laid out unlike ``ot``) or ``given`` (laid out unlike ``ot``), so the caller runs its own
    passes. None when the kernel does not
    take these tensors.
    """
    import torch

    if ot.dtype not in (torch.float32, torch.float16) or bias is None or bias.dtype != ot.dtype:
        return None
    if ot.dim() < 3 or ot.numel() == 0 or (residual is not None and not _same_memory(residual, ot)):
        return None
    channels = int(ot.shape[1])
    if ot.is_contiguous():
        inner = math.prod(int(d) for d in ot.shape[2:])
    elif ot.dim() == 4 and ot.is_contiguous(memory_format=torch.channels_last):
        inner = 1
    else:
        return None
    module = epilogue_module(_TEMPLATE, activation, alpha, beta)
    if module is None:
        return None
    ctype = "float" if ot.dtype == torch.float32 else "__half"
    res = "true" if residual is not None else "false"
    n = ot.numel()
    # 16 bytes a step where the layout allows it (see the kernel); the strided read and misaligned tensors: one element
    vec = 16 // ot.element_size()
    aligned = [ot.data_ptr(), *([] if residual is None else [residual.data_ptr()])]
    if n % vec or (channels if inner == 1 else inner) % vec or any(p % 16 for p in aligned):
        vec = 1

    def function(strided: str, width: int) -> Any:
        return module.function(f"conv_epilogue<{ctype}, {res}, {strided}, {width}>")

    def grid(width: int) -> tuple[int]:
        return (min((n // width + _THREADS - 1) // _THREADS, 65536),)

    bias = bias.contiguous()
    scale, shift = post_affine
    tail = (
        np.uint64(bias.data_ptr()),
        np.uint64(0 if residual is None else residual.data_ptr()),
        np.uint64(ot.data_ptr()),
        np.int64(n),
        np.int64(inner),
        np.int32(channels),
        np.float32(scale),
        np.float32(shift),
    )
    size = tuple(ot.shape)
    spatial = (np.int64(size[2]), np.int64(size[3])) if ot.dim() == 4 else (np.int64(1), np.int64(1))
    zeros = (np.int64(0),) * 4
    alike = (function("false", vec), grid(vec), (*tail, *spatial, *zeros))
    single = (function("false", 1), grid(1), alike[2])  # (an unaligned result or residual)
    strided = function("true", 1)
    block = (_THREADS,)

    def apply(result: Any, given: Any = None, _bias: Any = bias) -> bool:  # (_bias: its address is read: kept alive)
        if given is not None and (residual is None or not _same_memory(given, ot)):
            return False
        if result.stride() == ot.stride():
            kernel, blocks, rest = alike
            if vec > 1 and (result.data_ptr() % 16 or (given is not None and given.data_ptr() % 16)):
                kernel, blocks, rest = single
        elif ot.dim() == 4 and tuple(result.shape) == size:  # (cuDNN chose another layout for its result)
            kernel, blocks, rest = strided, single[1], (*tail, *spatial, *(np.int64(s) for s in result.stride()))
        else:
            return False
        if given is not None:  # the residual a channels-last run handed over instead of writing its buffer
            rest = (rest[0], np.uint64(given.data_ptr()), *rest[2:])
        kernel(blocks, block, (np.uint64(result.data_ptr()), *rest))
        return True

    return apply
