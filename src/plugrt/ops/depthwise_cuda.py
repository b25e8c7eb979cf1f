"""Depthwise convolutions of channels-last runs on a GPU as one generated kernel, bias and activation included.

cuDNN runs a depthwise (one map per channel) convolution of channels-last HALF tensors in its grouped direct
kernel, slowly: MobileNetV3-small's fp16 export at batch 32 spent 27% of its kernel time in three of them, and
every one of its depthwise layers was a second kernel for the bias and activation after it. Here one thread
computes 16 bytes of neighbouring channels of one output position ``y[n, oh, ow, c:c+8]`` (HALF; 4 FLOAT channels;
stored ``[N, OH, OW, C]``: each tap one 16-byte load, neighbouring threads reading neighbouring channels; one channel
a thread where the channels are no multiple of that), summing the window's taps in FLOAT (the weights kept in FLOAT), then
the bias, the activation (:data:`~plugrt.ops.fused_elementwise_cuda.ACTIVATION_SOURCE`) and the scalar affine map,
rounding once. Padding of either end and any stride or dilation are bounds in the loop. Stride-1 layers (dilation 1)
take a second kernel, ``depthwise_rows``: four neighbouring outputs of a row a thread, each input column of the
window loaded once into registers and each tap's weights once (MobileNetV3-small fp16 at batch 32: its six
stride-1 5x5 layers took 0.093 ms, where all eight of its 5x5 layers had taken 0.205 ms with one output a thread). Compiled by NVRTC once per (type, window, activation).
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from .fused_elementwise_cuda import epilogue_module
from .hand_over import HandOver

if TYPE_CHECKING:
    from .conv import ConvolutionOperator
    from .torch_cpu import Kernel

__all__ = ["MAX_TAPS", "ROW_OUTPUTS", "SWITCH", "depthwise_cuda"]

#: ``PLUGRT_DEPTHWISE_CUDA=0`` leaves these layers to cuDNN (to compare the two: ``benchmarks/gpu_depthwise.py``)
SWITCH = "PLUGRT_DEPTHWISE_CUDA"

#: windows of at most this many taps take the kernel (MobileNets' 3x3 and 5x5, ConvNeXt's 7x7)
MAX_TAPS = 49

#: a stride-1 layer's thread computes this many neighbouring outputs of a row (``depthwise_rows``)
ROW_OUTPUTS = 4

_TEMPLATE = r"""
%(preamble)s
// x [N, H, W, C], w [KH * KW, C] (FLOAT), bias [C] (FLOAT) or null, y [N, OH, OW, C]; 32-bit indices. A thread
// computes VEC neighbouring channels of one position, each tap one 16-byte load (C a multiple of VEC, the
// tensors 16-byte aligned); total: the outputs / VEC
template <typename T, int KH, int KW, int VEC>
__global__ void depthwise_nhwc(const T* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                               T* __restrict__ y, int total, int H, int W, int C, int OH, int OW, int sh, int sw,
                               int ph, int pw, int dh, int dw, float scale, float shift) {
    const int groups = C / VEC;
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += blockDim.x * gridDim.x) {
        const int c = (idx %% groups) * VEC;
        int p = idx / groups;
        const int ow = p %% OW;
        p /= OW;
        const int oh = p %% OH;
        const int n = p / OH;
        float acc[VEC];
#pragma unroll
        for (int k = 0; k < VEC; ++k) acc[k] = 0.0f;
#pragma unroll
        for (int i = 0; i < KH; ++i) {
            const int ih = oh * sh - ph + i * dh;
            if (ih < 0 || ih >= H) continue;
            const T* row = x + ((long long)(n * H + ih) * W) * C + c;
#pragma unroll
            for (int j = 0; j < KW; ++j) {
                const int iw = ow * sw - pw + j * dw;
                if (iw < 0 || iw >= W) continue;
                const Pack<T, VEC> xs = *reinterpret_cast<const Pack<T, VEC>*>(row + (long long)iw * C);
                const float* tap = w + (i * KW + j) * C + c;
#pragma unroll
                for (int k = 0; k < VEC; ++k) acc[k] += to_f(xs.v[k]) * tap[k];
            }
        }
        Pack<T, VEC> ys;
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            float v = acc[k];
            if (bias != nullptr) v += bias[c + k];
            v = %(activation)s;
            ys.v[k] = stored(shift + scale * v, T());
        }
        *reinterpret_cast<Pack<T, VEC>*>(y + (long long)idx * VEC) = ys;
    }
}
// Stride 1, dilation 1: a thread computes OUTW neighbouring outputs of a row (VEC channels each), the window's
// KW + OUTW - 1 input columns of each row loaded once into registers and each tap's weights once: ~3x fewer loads
// than one output a thread for a 5x5 window. total: N * OH * ceil(OW / OUTW) * C / VEC
template <typename T, int KH, int KW, int VEC, int OUTW>
__global__ void depthwise_rows(const T* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                               T* __restrict__ y, int total, int H, int W, int C, int OH, int OW, int sh, int sw,
                               int ph, int pw, int dh, int dw, float scale, float shift) {
    const int groups = C / VEC;
    const int blocks = (OW + OUTW - 1) / OUTW;
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += blockDim.x * gridDim.x) {
        const int c = (idx %% groups) * VEC;
        int p = idx / groups;
        const int ow0 = (p %% blocks) * OUTW;
        p /= blocks;
        const int oh = p %% OH;
        const int n = p / OH;
        float acc[OUTW][VEC];
#pragma unroll
        for (int o = 0; o < OUTW; ++o)
#pragma unroll
            for (int k = 0; k < VEC; ++k) acc[o][k] = 0.0f;
#pragma unroll
        for (int i = 0; i < KH; ++i) {
            const int ih = oh - ph + i;
            if (ih < 0 || ih >= H) continue;
            const T* row = x + ((long long)(n * H + ih) * W) * C + c;
            Pack<T, VEC> cols[KW + OUTW - 1];
#pragma unroll
            for (int q = 0; q < KW + OUTW - 1; ++q) {
                const int iw = ow0 - pw + q;
                if (iw >= 0 && iw < W) {
                    cols[q] = *reinterpret_cast<const Pack<T, VEC>*>(row + (long long)iw * C);
                } else {
#pragma unroll
                    for (int k = 0; k < VEC; ++k) cols[q].v[k] = T(0.0f);
                }
            }
#pragma unroll
            for (int j = 0; j < KW; ++j) {
                float tap[VEC];
#pragma unroll
                for (int k = 0; k < VEC; ++k) tap[k] = w[(i * KW + j) * C + c + k];
#pragma unroll
                for (int o = 0; o < OUTW; ++o)
#pragma unroll
                    for (int k = 0; k < VEC; ++k) acc[o][k] += to_f(cols[o + j].v[k]) * tap[k];
            }
        }
#pragma unroll
        for (int o = 0; o < OUTW; ++o) {
            const int ow = ow0 + o;
            if (ow >= OW) break;
            Pack<T, VEC> ys;
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
                float v = acc[o][k];
                if (bias != nullptr) v += bias[c + k];
                v = %(activation)s;
                ys.v[k] = stored(shift + scale * v, T());
            }
            *reinterpret_cast<Pack<T, VEC>*>(y + (((long long)(n * OH + oh) * OW + ow) * C + c)) = ys;
        }
    }
}
"""

_THREADS = 256


def depthwise_cuda(
    op: ConvolutionOperator,
    xt: Any,
    ot: Any,
    begins: list[int],
    slots: tuple[HandOver | None, HandOver | None, HandOver | None],
) -> Kernel | None:
    """The depthwise convolution ``op`` (bias, activation and scalar map included) from ``xt`` into ``ot``, torch
    views ``[N, C, H, W]`` of channels-last CUDA tensors of one type (FLOAT or HALF); ``begins``: the padding
    before each spatial axis; ``slots``: the hand-over slots of the input, the residual and the output (the input
    is read from its slot where that holds a tensor; the output's slot is emptied: the buffer holds the result).
    None where the kernel does not take the layer: not depthwise (one map per channel), a residual, a uniform
    kernel, a window of more than :data:`MAX_TAPS` taps, an activation it does not compute, tensors that are not
    channels-last, or indices past 32 bits. On an H200 at batch 32 it ran 0.13-0.95x cuDNN's time on every
    MobileNetV2/V3 depthwise layer measured, FLOAT and HALF (``benchmarks/gpu_depthwise.py``)."""
    import torch

    w = op.window
    if w.rank != 2 or op.residual or op.uniform or "kernel" not in op.weights or op.bias_input is not None:
        return None
    if not xt.is_cuda or os.environ.get(SWITCH, "1") == "0":
        return None
    _, channels, height, width = (int(d) for d in xt.shape)
    if op.group != channels or op.maps != channels or math.prod(w.kernel) > MAX_TAPS:
        return None
    if xt.dtype not in (torch.float16, torch.float32) or ot.dtype != xt.dtype:
        return None
    layout = torch.channels_last
    if not (xt.is_contiguous(memory_format=layout) and ot.is_contiguous(memory_format=layout)) or xt.is_contiguous():
        return None
    total = ot.numel()
    if total == 0 or xt.numel() >= 2**31 or total >= 2**31:
        return None
    module = epilogue_module(_TEMPLATE, op.activation, *op.activation_range)
    if module is None:
        return None
    kh, kw = w.kernel
    ctype = "float" if xt.dtype == torch.float32 else "__half"
    vec = 16 // xt.element_size()
    if channels % vec or xt.data_ptr() % 16 or ot.data_ptr() % 16:
        vec = 1
    out_h, out_w = int(ot.shape[2]), int(ot.shape[3])
    rows = vec > 1 and w.strides == (1, 1) and w.dilations == (1, 1) and out_w >= ROW_OUTPUTS
    steps = total // vec
    if rows:  # ROW_OUTPUTS neighbours of a row a thread
        kernel = module.function(f"depthwise_rows<{ctype}, {kh}, {kw}, {vec}, {ROW_OUTPUTS}>")
        steps = total // vec // out_w * -(-out_w // ROW_OUTPUTS)
    else:
        kernel = module.function(f"depthwise_nhwc<{ctype}, {kh}, {kw}, {vec}>")
    taps = np.ascontiguousarray(np.asarray(op.weights["kernel"], np.float32).reshape(channels, kh * kw).T)
    weights = torch.from_numpy(taps).to(xt.device)
    bias_t = None
    if "bias" in op.weights:
        bias_t = torch.from_numpy(np.array(op.weights["bias"], np.float32).reshape(-1)).to(xt.device)
    scale, shift = op.post_affine
    tail = (
        np.uint64(weights.data_ptr()),
        np.uint64(0 if bias_t is None else bias_t.data_ptr()),
        np.uint64(ot.data_ptr()),
        np.int32(steps),
        *(np.int32(v) for v in (height, width, channels, out_h, out_w, *w.strides, *begins, *w.dilations)),
        np.float32(scale),
        np.float32(shift),
    )
    grid, block = (min((steps + _THREADS - 1) // _THREADS, 65536),), (_THREADS,)
    given, _, handed = slots
    source = np.uint64(xt.data_ptr())

    def run(_kept: tuple[Any, Any] = (weights, bias_t)) -> None:  # (_kept: their addresses are read: kept alive)
        x = source
        if given is not None and given.tensor is not None:
            tensor = given.tensor
            if not tensor.is_contiguous(memory_format=layout) or tensor.data_ptr() % 16:
                tensor = tensor.clone(memory_format=layout)  # (channels-last, aligned: the allocator's)
            x = np.uint64(tensor.data_ptr())
        kernel(grid, block, (x, *tail))
        if handed is not None:
            handed.tensor = None  # the buffer holds it

    return run
