"""The compiled loop of :mod:`plugrt.ops.squeeze_numba` (imported only where numba is installed).

One image at a time over a channels-last ``[N, H, W, C]`` tensor: the channel means (float32 sums in pixel order,
then one multiply by ``1 / (H * W)``), the two small products with their biases and activations (the activation
codes of :mod:`plugrt.ops.depthwise_numba_loops`), the input scaled per channel into the output; every loop over
the channels is vectorised. ``fastmath`` off: no fused multiply-add, no reassociation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba
import numpy as np
from numba import njit

from .depthwise_numba_loops import ACTIVATION_COUNT, _activate

__all__ = ["loop_for", "squeeze_rows"]

_LOOPS: dict[tuple[int, int], Callable[..., None]] = {}


def loop_for(first: int, second: int) -> Callable[..., None]:
    """The compiled block for activation codes ``first`` (after the first product) and ``second`` (after the
    second), compiled at first use (or loaded from numba's cache on disk) and kept; called as
    ``loop(x, w1, b1, w2, b2, out, pooled, hidden, scale, alphas, betas)`` with ``x``, ``out`` ``[N, H, W, C]``,
    ``w1`` ``[C, M]``, ``b1`` ``[M]``, ``w2`` ``[M, C]``, ``b2`` ``[C]``, float32 scratch ``pooled`` and ``scale``
    ``[C]``, ``hidden`` ``[M]``, and the activations' float32 parameters as ``[2]`` arrays."""
    for code in (first, second):
        if not 0 <= code < ACTIVATION_COUNT:
            raise ValueError(f"squeeze-excitation loop: activation code {code}; valid: 0 to {ACTIVATION_COUNT - 1}")
    loop = _LOOPS.get((first, second))
    if loop is None:
        tokens = ((0,) * first, (0,) * second)
        c, m = 1, 1
        x = np.zeros((1, 1, 1, c), np.float32)
        vectors = (np.zeros(c, np.float32), np.zeros(m, np.float32), np.zeros(c, np.float32))
        args: tuple[Any, ...] = (x, np.zeros((c, m), np.float32), vectors[1], np.zeros((m, c), np.float32))
        args += (vectors[0], x.copy(), *vectors, np.zeros(2, np.float32), np.zeros(2, np.float32))
        typed: Any = squeeze_rows
        typed(*args, *tokens)
        compiled: Any = squeeze_rows.overloads.get(tuple(numba.typeof(v) for v in (*args, *tokens)))
        entry: Any = getattr(compiled, "entry_point", None) or squeeze_rows  # else through the dispatcher

        def loop(*call: Any) -> None:
            entry(*call, *tokens)

        _LOOPS[(first, second)] = loop
    return loop


@njit(cache=True, nogil=True, inline="always")
def _dense(source, weights, bias, target, alpha, beta, code):  # type: ignore[no-untyped-def]
    """``target = activation(bias + source @ weights)``, the activation's code the length of the tuple ``code``
    (a compile-time constant: its branch is chosen when compiled)."""
    act = len(code)
    target[:] = bias
    for a in range(source.shape[0]):
        value = source[a]
        for b in range(target.shape[0]):
            target[b] += value * weights[a, b]
    for b in range(target.shape[0]):
        target[b] = _activate(target[b], alpha, beta, act)


@njit(cache=True, nogil=True)
def squeeze_rows(x, w1, b1, w2, b2, out, pooled, hidden, scale, alphas, betas, first, second):  # type: ignore[no-untyped-def]
    """See :func:`loop_for`; the activation codes are the lengths of the tuples ``first`` and ``second``."""
    images, height, width, channels = x.shape
    inverse = np.float32(1.0) / np.float32(height * width)
    for n in range(images):
        pooled[:] = np.float32(0.0)
        for i in range(height):
            for j in range(width):
                for c in range(channels):
                    pooled[c] += x[n, i, j, c]
        for c in range(channels):
            pooled[c] *= inverse
        _dense(pooled, w1, b1, hidden, alphas[0], betas[0], first)
        _dense(hidden, w2, b2, scale, alphas[1], betas[1], second)
        for i in range(height):
            for j in range(width):
                for c in range(channels):
                    out[n, i, j, c] = x[n, i, j, c] * scale[c]
