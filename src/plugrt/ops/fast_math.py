"""Transcendental elementwise kernels for NumPy arrays: ``erf`` and the erf form of GELU.

NumPy has no ``erf``; SciPy's is accurate but slow for float32 and not always
installed. These evaluate a rational approximation in blocks that stay in the CPU
cache, so each of the dozen passes of the evaluation reads and writes cache, not
memory:

    erf(x) = x * P(x^2) / Q(x^2)   for |x| <= 3.92,  sign(x) beyond (float32 rounds erf there to +-1)

P of degree 6 and Q of degree 5, fitted here by iterated least squares on the
relative error over [0, 3.92]. The evaluation is in float64, so the float32 result
is within 0.54 ulp of the exact value (onnxruntime's float32 kernel: 0.97 ulp);
``tests/unit/test_fast_math.py`` pins both, measured against float64 ``erf``.
Large arrays are split between two threads when a core is free (``host_threads.py``).
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np

from .host_threads import in_two_parts

__all__ = ["BLOCK", "erf_into", "gelu_erf_into"]

#: elements per block: 16 K float64 scratch arrays (128 KiB each) stay in the L2 cache
BLOCK = 16384

_CLAMP = 3.92
_P = (
    1.1283791682872835,
    0.18517800961420824,
    0.05425504904612958,
    0.0038411648640114494,
    0.00037703587865422263,
    4.615144974624663e-06,
    -1.2831828169843491e-08,
)
_Q = (
    1.0,
    0.49744313423680175,
    0.11389621709492606,
    0.015435953348506296,
    0.0013024320007317155,
    6.245731295819715e-05,
)


class _Scratch:
    """Per-thread float64 blocks (a kernel may run in several contexts' threads at once)."""

    def __init__(self) -> None:
        self.x = np.empty(BLOCK)
        self.t = np.empty(BLOCK)
        self.p = np.empty(BLOCK)
        self.q = np.empty(BLOCK)
        self.mask = np.empty(BLOCK, dtype=bool)


_LOCAL = threading.local()


def _scratch() -> _Scratch:
    found = getattr(_LOCAL, "scratch", None)
    if found is None:
        found = _LOCAL.scratch = _Scratch()
    return found


def _erf_block(s: _Scratch, n: int, scale: float) -> Any:
    """erf(scale * s.x[:n]) into s.p[:n] (s.x holds the input in float64)."""
    x, t, p, q = s.x[:n], s.t[:n], s.p[:n], s.q[:n]
    if scale != 1.0:
        np.multiply(x, scale, out=t)
        np.clip(t, -_CLAMP, _CLAMP, out=t)
    else:
        np.clip(x, -_CLAMP, _CLAMP, out=t)
    np.multiply(t, _P[0], out=p)  # p holds the clamped argument's first use: z * P(z^2) / Q(z^2)
    z_times = p
    np.multiply(t, t, out=t)  # t = z^2
    acc = q
    acc.fill(_P[-1] / _P[0])
    for c in _P[-2:0:-1]:
        np.multiply(acc, t, out=acc)
        np.add(acc, c / _P[0], out=acc)
    np.multiply(acc, t, out=acc)
    np.add(acc, 1.0, out=acc)  # P(t) / P0
    np.multiply(z_times, acc, out=z_times)  # z * P(t)
    acc.fill(_Q[-1])
    for c in _Q[-2::-1]:
        np.multiply(acc, t, out=acc)
        np.add(acc, c, out=acc)
    np.divide(z_times, acc, out=z_times)
    return z_times


def erf_into(x: np.ndarray, out: np.ndarray) -> None:
    """``out = erf(x)`` for float NumPy arrays (``out`` may be ``x``)."""
    _blocks(x, out, gelu=False)


def gelu_erf_into(x: np.ndarray, out: np.ndarray) -> None:
    """``out = 0.5 * x * (1 + erf(x / sqrt(2)))`` (GELU), in one blocked pass (``out`` may be ``x``)."""
    _blocks(x, out, gelu=True)


def _blocks(x: np.ndarray, out: np.ndarray, gelu: bool) -> None:
    source = np.ascontiguousarray(x).reshape(-1)
    contiguous = out.flags.c_contiguous
    target = out.reshape(-1) if contiguous else np.empty(source.shape, out.dtype)
    scale = math.sqrt(0.5) if gelu else 1.0

    def blocks(part: int, first: int, stop: int) -> None:
        s = _scratch()  # per thread
        for start in range(first * BLOCK, min(stop * BLOCK, source.size), BLOCK):
            n = min(BLOCK, source.size - start)
            np.copyto(s.x[:n], source[start : start + n])
            result = _erf_block(s, n, scale)
            if gelu:  # 0.5 * x * (1 + erf) = (0.5 * x) * erf + 0.5 * x
                # Far left, 1 + erf cancels to what the approximation's error leaves: make it exact there.
                np.less(s.x[:n], -_CLAMP / scale, out=s.mask[:n])
                np.copyto(result, -1.0, where=s.mask[:n])
                np.multiply(s.x[:n], 0.5, out=s.t[:n])
                np.multiply(result, s.t[:n], out=result)
                np.add(result, s.t[:n], out=result)
            np.copyto(target[start : start + n], result, casting="same_kind")

    in_two_parts(-(-source.size // BLOCK), source.size, blocks)
    if not contiguous:
        out[...] = target.reshape(out.shape)
