"""The compiled loops of :mod:`plugrt.ops.depthwise_numba` (imported only where numba is installed).

Channels-last tensors: the channels of a pixel are contiguous, so every loop over them is vectorised by
LLVM. Per output row, an interior pixel (every tap inside the input) sums its taps in registers with the
kernel's loops unrolled (:func:`loops_for` compiles one kernel per kernel size, cached on disk); the other
pixels of the row add tap by tap into an accumulator row, skipping taps that read padding. Sums run in the
NumPy tap-sum kernel's order (``ops/conv_taps.py``: taps row-major from zero, the bias added last) with
separate multiplies and adds (``fastmath`` off: no fused multiply-add, no reassociation), so the result is
that kernel's bit for bit up to the sign of a zero. Activation codes are
:data:`plugrt.ops.depthwise_numba.ACTIVATION_CODES`'s, each computed as the NumPy activation kernel does
(``ops/activation.py``), in float32.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba
import numpy as np
from numba import njit

__all__ = ["ACTIVATION_COUNT", "UNROLLED_TAPS", "depthwise_rows", "entry_point", "loops_for", "max_pool", "rows_epilogue"]

#: activation codes run from 0 (none) to this count - 1 (see :func:`_activate`)
ACTIVATION_COUNT = 6
#: kernels with more taps than this run the loop whose tap loops are not unrolled (long compiled code otherwise)
UNROLLED_TAPS = 49

_LOOPS: dict[tuple[int, int, int], Callable[..., None]] = {}


@njit(cache=True, inline="always")
def _identity(v, alpha, beta):  # type: ignore[no-untyped-def]
    return v


@njit(cache=True, inline="always")
def _relu(v, alpha, beta):  # type: ignore[no-untyped-def]
    return np.float32(0.0) if v < np.float32(0.0) else v  # NaN stays NaN


@njit(cache=True, inline="always")
def _clip(v, alpha, beta):  # type: ignore[no-untyped-def]
    v = beta if v > beta else v
    return alpha if v < alpha else v


@njit(cache=True, inline="always")
def _hard_swish(v, alpha, beta):  # type: ignore[no-untyped-def]
    t = v + np.float32(3.0)  # x * clip(x + 3, 0, 6) / 6, NumPy's order
    t = np.float32(6.0) if t > np.float32(6.0) else t
    t = np.float32(0.0) if t < np.float32(0.0) else t
    return v * t / np.float32(6.0)


@njit(cache=True, inline="always")
def _hard_sigmoid(v, alpha, beta):  # type: ignore[no-untyped-def]
    t = alpha * v + beta
    t = np.float32(1.0) if t > np.float32(1.0) else t
    return np.float32(0.0) if t < np.float32(0.0) else t


@njit(cache=True, inline="always")
def _leaky_relu(v, alpha, beta):  # type: ignore[no-untyped-def]
    return v if v >= np.float32(0.0) else alpha * v


@njit(cache=True, inline="always")
def _activate(v, alpha, beta, act):  # type: ignore[no-untyped-def]
    """Activation code ``act`` (``ACTIVATION_CODES`` in ``depthwise_numba.py``; a literal: one branch compiled)."""
    if act == 1:
        return _relu(v, alpha, beta)
    if act == 2:
        return _clip(v, alpha, beta)
    if act == 3:
        return _hard_swish(v, alpha, beta)
    if act == 4:
        return _hard_sigmoid(v, alpha, beta)
    if act == 5:
        return _leaky_relu(v, alpha, beta)
    return _identity(v, alpha, beta)


@njit(cache=True, nogil=True)
def _edge_taps(x, weights, acc, n, oh, ow, geometry, kh_first, kh_stop):  # type: ignore[no-untyped-def]
    """Add the taps of rows ``[kh_first, kh_stop)`` that read inside ``x`` to pixel ``(oh, ow)``'s ``acc``."""
    width, channels = x.shape[2], x.shape[3]
    maps = acc.shape[0]
    multiplier = maps // channels
    for kh in range(kh_first, kh_stop):
        ih = oh * geometry[0] - geometry[4] + kh * geometry[2]
        for kw in range(weights.shape[1]):
            iw = ow * geometry[1] - geometry[5] + kw * geometry[3]
            if iw < 0 or iw >= width:
                continue
            pixel, tap = x[n, ih, iw], weights[kh, kw]
            if multiplier == 1:
                for c in range(channels):
                    acc[c] += pixel[c] * tap[c]
            else:
                for m in range(maps):
                    acc[m] += pixel[m // multiplier] * tap[m]


@njit(cache=True, nogil=True)
def _add_taps(x, weights, acc, n, top, ow_first, ow_stop, geometry, kh_first, kh_stop):  # type: ignore[no-untyped-def]
    """``acc[ow] = the sum of the taps that read inside x`` for the columns ``[ow_first, ow_stop)`` of the output
    row whose first input row is ``top``, the kernel rows ``[kh_first, kh_stop)`` (one input channel per map):
    tap by tap, each over its columns' channels."""
    width, channels = x.shape[2], x.shape[3]
    stride_w, dil_h, dil_w, pad_w = geometry[1], geometry[2], geometry[3], geometry[5]
    acc[ow_first:ow_stop] = np.float32(0.0)
    for kh in range(kh_first, kh_stop):
        ih = top + kh * dil_h
        for kw in range(weights.shape[1]):
            offset = kw * dil_w - pad_w  # input column = ow * stride_w + offset
            first = max(ow_first, (-offset + stride_w - 1) // stride_w)
            stop = min(ow_stop, (width - 1 - offset) // stride_w + 1)
            for ow in range(first, stop):
                iw = ow * stride_w + offset
                for c in range(channels):
                    acc[ow, c] += x[n, ih, iw, c] * weights[kh, kw, c]


_ENTRIES: dict[tuple[Any, tuple[Any, ...]], Callable[..., Any]] = {}


def entry_point(function: Any, *example: Any) -> Callable[..., Any]:
    """The compiled code of ``function`` (an ``njit`` dispatcher) for the types of the ``example`` arguments (small
    arrays of the layouts the calls will pass), called with them the first time (compiled, or loaded from numba's
    cache) and kept: calling it skips the dispatcher's typing of every argument (~1 us each); the dispatcher itself
    where numba keeps no entry point."""
    types = tuple(numba.typeof(v) for v in example)
    entry = _ENTRIES.get((function, types))
    if entry is None:
        function(*example)
        compiled: Any = function.overloads.get(types)
        entry = _ENTRIES[(function, types)] = getattr(compiled, "entry_point", None) or function
    return entry


@njit(cache=True, nogil=True)
def rows_epilogue(out, bias, residual, act, alpha, beta):  # type: ignore[no-untyped-def]
    """A 1x1 convolution's epilogue over its rows ``out`` (``[N*H*W, M]``) in place, in the NumPy epilogue's
    order: the bias, then the residual's rows (``[N*H*W, M]``; a ``[0, 0]`` array for none), then activation code
    ``act``. One pass where PyTorch's in-place kernels take one call each (2-5 us a layer saved on PP-OCR cls's
    small layers)."""
    rows, cols = out.shape
    added = residual.shape[0] != 0
    for r in range(rows):
        row = out[r]
        for c in range(cols):
            v = row[c] + bias[c]
            if added:
                v = v + residual[r, c]
            row[c] = _activate(v, alpha, beta, act)


@njit(cache=True, nogil=True)
def _pool_tiles(x, out, kernel_h, kernel_w):  # type: ignore[no-untyped-def]
    """:func:`max_pool` where the windows tile the input (strides = kernel, no padding or dilation, every window
    inside): each output pixel starts from its window's first pixel, a 2x2 window's four pixels in one pass over
    the channels (no per-tap loop), NaN kept as there."""
    batch, channels = x.shape[0], x.shape[3]
    out_h, out_w = out.shape[1], out.shape[2]
    for n in range(batch):
        for oh in range(out_h):
            top = oh * kernel_h
            for ow in range(out_w):
                left = ow * kernel_w
                target, first = out[n, oh, ow], x[n, top, left]
                if kernel_h == 2 and kernel_w == 2:
                    right, below, corner = x[n, top, left + 1], x[n, top + 1, left], x[n, top + 1, left + 1]
                    for c in range(channels):
                        m = first[c]
                        v = right[c]
                        m = v if (v > m or v != v) else m
                        v = below[c]
                        m = v if (v > m or v != v) else m
                        v = corner[c]
                        target[c] = v if (v > m or v != v) else m
                    continue
                for c in range(channels):
                    target[c] = first[c]
                for i in range(kernel_h):
                    for j in range(kernel_w):
                        if i + j == 0:
                            continue
                        pixel = x[n, top + i, left + j]
                        for c in range(channels):
                            v, t = pixel[c], target[c]
                            target[c] = v if (v > t or v != v) else t


@njit(cache=True, nogil=True)
def max_pool(x, out, kernel, geometry):  # type: ignore[no-untyped-def]
    """2-D MAX pooling of channels-last ``x`` (``[N, H, W, C]``) into ``out`` (``[N, OH, OW, C]``): each output
    pixel the largest of its window's pixels inside ``x`` (padding is never a candidate; every window holds at
    least one input pixel), NaN where any candidate is NaN, as ``torch.max_pool2d``. ``kernel``: its height and
    width; ``geometry``: strides, dilations and begin paddings (H then W), int64 ``[6]``."""
    batch, height, width, channels = x.shape
    out_h, out_w = out.shape[1], out.shape[2]
    tiled = geometry[0] == kernel[0] and geometry[1] == kernel[1] and geometry[2] == 1 and geometry[3] == 1
    if tiled and geometry[4] == 0 and geometry[5] == 0 and out_h * kernel[0] <= height and out_w * kernel[1] <= width:
        _pool_tiles(x, out, kernel[0], kernel[1])  # windows side by side, all inside: 3x faster for 2x2
        return
    lowest = np.float32(-np.inf)
    for n in range(batch):
        for oh in range(out_h):
            for ow in range(out_w):
                target = out[n, oh, ow]
                for c in range(channels):
                    target[c] = lowest
                for kh in range(kernel[0]):
                    ih = oh * geometry[0] - geometry[4] + kh * geometry[2]
                    if ih < 0 or ih >= height:
                        continue
                    for kw in range(kernel[1]):
                        iw = ow * geometry[1] - geometry[5] + kw * geometry[3]
                        if iw < 0 or iw >= width:
                            continue
                        pixel = x[n, ih, iw]
                        for c in range(channels):
                            v, t = pixel[c], target[c]
                            target[c] = v if (v > t or v != v) else t  # a NaN stays: nothing compares above it


def loops_for(kernel_h: int, kernel_w: int, act: int) -> Callable[..., None]:
    """The compiled depthwise loop for ``kernel_h x kernel_w`` kernels (their tap loops unrolled up to
    :data:`UNROLLED_TAPS` taps; one shared loop above) and activation code ``act``, compiled at first use (or
    loaded from numba's cache on disk) and kept.

    The loop, called as ``loop(x, weights, bias, out, acc, first_row, stop_row, geometry, alpha, beta)``,
    computes output rows ``[first_row, stop_row)`` (over ``N * OH``) of the depthwise convolution of ``x``
    (``[N, H, W, C]``) by ``weights`` (``[KH, KW, C * multiplier]``) plus ``bias``, activated, into ``out``
    (``[N, OH, OW, C * multiplier]``); ``acc`` is float32 scratch ``[OW, C * multiplier]``; ``geometry``:
    strides, dilations and begin paddings (H then W) as int64 ``[6]``; ``alpha``, ``beta``: the activation's
    float32 parameters. It is the compiled code's own entry point: numba's type dispatch (which for literal
    arguments types the call again each time, milliseconds) is done once here.
    """
    if kernel_h < 1 or kernel_w < 1:
        raise ValueError(f"depthwise loop: kernel size {kernel_h}x{kernel_w}; both sides must be at least 1")
    if not 0 <= act < ACTIVATION_COUNT:
        raise ValueError(f"depthwise loop: activation code {act}; valid: 0 to {ACTIVATION_COUNT - 1}")
    key = (kernel_h, kernel_w, act) if kernel_h * kernel_w <= UNROLLED_TAPS else (0, 0, act)
    loop = _LOOPS.get(key)
    if loop is None:
        loop = _entry_point(*key)
        _LOOPS[key] = loop
    return loop


def _entry_point(fixed_h: int, fixed_w: int, act: int) -> Callable[..., None]:
    """:func:`depthwise_rows` compiled (or loaded from the cache) for ``fixed_h``, ``fixed_w``, ``act`` given as
    the lengths of tuples (part of the arguments' types, so compile-time constants), as its entry point with
    those tuples bound."""
    tokens = ((0,) * fixed_h, (0,) * fixed_w, (0,) * act)
    x = np.zeros((1, 1, 1, 1), np.float32)
    weights = np.zeros((max(fixed_h, 1), max(fixed_w, 1), 1), np.float32)
    args = (x, weights, np.zeros(1, np.float32), x.copy(), np.zeros((1, 1), np.float32), 0, 0, np.ones(6, np.int64))
    depthwise_rows(*args, np.float32(0.0), np.float32(0.0), *tokens)
    wanted = tuple(numba.typeof(v) for v in (*args, np.float32(0.0), np.float32(0.0), *tokens))
    compiled: Any = depthwise_rows.overloads.get(wanted)  # numba's CompileResult
    entry: Any = getattr(compiled, "entry_point", None) or depthwise_rows  # else through the dispatcher (~us a call)

    def loop(*call: Any) -> None:
        entry(*call, *tokens)

    return loop


@njit(cache=True, nogil=True)
def depthwise_rows(x, weights, bias, out, acc, first_row, stop_row, geometry, alpha, beta, rows, cols, code):  # type: ignore[no-untyped-def]
    """See :func:`loops_for`; the kernel size (0: the weights' own) and the activation code are the lengths of
    the tuples ``rows``, ``cols`` and ``code``: constants of each compiled version."""
    fixed_h, fixed_w, act = len(rows), len(cols), len(code)
    height, width, channels = x.shape[1], x.shape[2], x.shape[3]
    out_h, out_w, maps = out.shape[1], out.shape[2], out.shape[3]
    kernel_h = weights.shape[0] if fixed_h == 0 else fixed_h
    kernel_w = weights.shape[1] if fixed_w == 0 else fixed_w
    stride_h, stride_w, dil_h, dil_w = geometry[0], geometry[1], geometry[2], geometry[3]
    pad_h, pad_w = geometry[4], geometry[5]
    # interior columns: every kw reads inside the input
    lo = min(out_w, (pad_w + stride_w - 1) // stride_w)
    hi = max(lo, min(out_w, (width - 1 - (kernel_w - 1) * dil_w + pad_w) // stride_w + 1))
    for row in range(first_row, stop_row):
        n, oh = row // out_h, row % out_h
        top = oh * stride_h - pad_h
        kh_first = 0
        while kh_first < kernel_h and top + kh_first * dil_h < 0:
            kh_first += 1
        kh_stop = kernel_h
        while kh_stop > kh_first and top + (kh_stop - 1) * dil_h >= height:
            kh_stop -= 1
        target = out[n, oh]
        if maps == channels and fixed_h > 0 and kh_first == 0 and kh_stop == kernel_h:
            for ow in range(lo, hi):  # every tap inside: the sums stay in registers
                left = ow * stride_w - pad_w
                for c in range(channels):
                    s = np.float32(0.0)
                    for kh in range(fixed_h):
                        for kw in range(fixed_w):
                            s += x[n, top + kh * dil_h, left + kw * dil_w, c] * weights[kh, kw, c]
                    target[ow, c] = _activate(s + bias[c], alpha, beta, act)
            _add_taps(x, weights, acc, n, top, 0, lo, geometry, 0, kernel_h)
            _add_taps(x, weights, acc, n, top, hi, out_w, geometry, 0, kernel_h)
            edges = ((0, lo), (hi, out_w))
        elif maps == channels:  # kernel rows read padding: the interior columns a kernel row at a time
            acc[lo:hi] = np.float32(0.0)
            for kh in range(kh_first, kh_stop):
                ih = top + kh * dil_h
                for ow in range(lo, hi):
                    left = ow * stride_w - pad_w
                    for c in range(channels):
                        s = acc[ow, c]
                        for kw in range(kernel_w):
                            s += x[n, ih, left + kw * dil_w, c] * weights[kh, kw, c]
                        acc[ow, c] = s
            _add_taps(x, weights, acc, n, top, 0, lo, geometry, kh_first, kh_stop)
            _add_taps(x, weights, acc, n, top, hi, out_w, geometry, kh_first, kh_stop)
            edges = ((0, out_w), (out_w, out_w))
        else:  # several maps a channel: every pixel tap by tap
            for ow in range(out_w):
                acc[ow] = np.float32(0.0)
                _edge_taps(x, weights, acc[ow], n, oh, ow, geometry, kh_first, kh_stop)
            edges = ((0, out_w), (out_w, out_w))
        for first, stop in edges:
            for ow in range(first, stop):
                for c in range(maps):
                    target[ow, c] = _activate(acc[ow, c] + bias[c], alpha, beta, act)
