"""The compiled LSTM time loop of :mod:`plugrt.ops.recurrent_numba` (imported only where numba is installed).

Per direction, time step and batch entry (a direction's steps all run before the next direction's: its
recurrent weight, 1 MB at 256 units, stays in the core's cache instead of two taking turns there, 10% faster
on the BiLSTM encoder's cells): the gates start from the step's input projection (computed before
the loop by one product per direction for every step, the biases folded in; a reverse direction reads it and
writes its outputs backwards in time, so nothing is reversed or copied), the recurrent product is added as ``H``
scaled rows of the transposed recurrent weight, four rows at a time (``gates += (h[k] RT[k] + h[k+1] RT[k+1]) +
(h[k+2] RT[k+2] + h[k+3] RT[k+3])``, in that order: the loop over the gates is vectorised, no sum reordered by
the compiler), then the activations (sigmoid for i, o, f; tanh for c) through a
vectorised float32 exponential (Cephes' ``expf``: range reduction by ``ln 2``, a degree-6 polynomial, the
power of two put together in the exponent bits; within 2 ulp of ``exp``), and the cell and hidden updates.
``fastmath`` off: no fused multiply-add, no reassociation.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["lstm_steps"]

_LOG2E = np.float32(1.4426950408889634)
_LN2_HI = np.float32(0.693359375)
_LN2_LO = np.float32(-2.12194440e-4)
_P = tuple(np.float32(c) for c in (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
                                    1.6666665459e-1, 5.0000001201e-1))  # fmt: skip
_LOW, _HIGH = np.float32(-87.3), np.float32(88.0)
_ONE, _TWO, _HALF = np.float32(1.0), np.float32(2.0), np.float32(0.5)


@njit(cache=True, fastmath=False, nogil=True)
def _exp_scaled(values: np.ndarray, factor: np.float32, out: np.ndarray, bits: np.ndarray) -> None:
    """``out = exp(factor * values)`` (float32, vectorised); ``bits`` an int32 scratch of the same length."""
    n = values.shape[0]
    for j in range(n):
        x = min(max(factor * values[j], _LOW), _HIGH)
        k = np.floor(x * _LOG2E + _HALF)
        r = x - k * _LN2_HI - k * _LN2_LO
        p = _P[0]
        p = p * r + _P[1]
        p = p * r + _P[2]
        p = p * r + _P[3]
        p = p * r + _P[4]
        p = p * r + _P[5]
        out[j] = p * r * r + r + _ONE
        bits[j] = (np.int32(k) + np.int32(127)) << np.int32(23)
    scale = bits.view(np.float32)
    for j in range(n):
        out[j] *= scale[j]


@njit(cache=True, fastmath=False, nogil=True)
def lstm_steps(
    projected: np.ndarray,
    recurrent_t: np.ndarray,
    reverse: np.ndarray,
    h0: np.ndarray,
    c: np.ndarray,
    y: np.ndarray,
    gates: np.ndarray,
    work: np.ndarray,
    bits: np.ndarray,
    first: int,
    stop: int,
) -> None:
    """The LSTM's steps of the directions ``[first, stop)``: ``projected`` ``[D, T, B, 4H]`` (each direction's
    input projection of step ``t`` in the input's time order, ONNX gate order i o f c), ``recurrent_t``
    ``[D, H, 4H]``, ``reverse`` ``[D]`` (1 for a direction that runs backwards in time), ``h0`` ``[D, B, H]`` the
    initial hidden state, ``c`` ``[D, B, H]`` the cell state (initial in, final out), ``y`` ``[T, D, B, H]`` the
    hidden states out (in the input's time order); float32 scratch ``gates`` ``[B, 4H]`` and ``work`` ``[4H]``,
    int32 ``bits`` ``[4H]`` (calls for other directions at the same time need their own). The GIL is released:
    two directions may run on two threads."""
    steps, batch = projected.shape[1], projected.shape[2]
    hidden = recurrent_t.shape[1]
    size = 4 * hidden
    for d in range(first, stop):  # one direction's steps, then the other's: its recurrent weight stays in the cache
        for step in range(steps):
            back = reverse[d] != 0
            t = steps - 1 - step if back else step
            weights = recurrent_t[d]
            if step == 0:
                previous = h0[d]
            else:
                previous = y[t + 1, d] if back else y[t - 1, d]
            for b in range(batch):
                for j in range(size):
                    gates[b, j] = projected[d, t, b, j]
            quads = hidden - hidden % 4
            for k in range(0, quads, 4):  # four weight rows at a time: the gates read and written a quarter as often
                r0, r1, r2, r3 = weights[k], weights[k + 1], weights[k + 2], weights[k + 3]
                for b in range(batch):
                    h0k, h1k, h2k, h3k = previous[b, k], previous[b, k + 1], previous[b, k + 2], previous[b, k + 3]
                    into = gates[b]
                    for j in range(size):
                        into[j] += (h0k * r0[j] + h1k * r1[j]) + (h2k * r2[j] + h3k * r3[j])
            for k in range(quads, hidden):
                row = weights[k]
                for b in range(batch):
                    hk = previous[b, k]
                    into = gates[b]
                    for j in range(size):
                        into[j] += hk * row[j]
            for b in range(batch):
                into = gates[b]
                # sigmoid(v) = 1 / (1 + exp(-v)) for i, o, f; tanh(v) = 2 / (1 + exp(-2v)) - 1 for the candidate
                _exp_scaled(into[: 3 * hidden], -_ONE, work[: 3 * hidden], bits[: 3 * hidden])
                _exp_scaled(into[3 * hidden :], -_TWO, work[3 * hidden :], bits[3 * hidden :])
                for j in range(3 * hidden):
                    into[j] = _ONE / (_ONE + work[j])
                for j in range(3 * hidden, size):
                    into[j] = _TWO / (_ONE + work[j]) - _ONE
                cell = c[d, b]
                for k in range(hidden):
                    cell[k] = into[2 * hidden + k] * cell[k] + into[k] * into[3 * hidden + k]
                _exp_scaled(cell, -_TWO, work[:hidden], bits[:hidden])
                out = y[t, d, b]
                for k in range(hidden):
                    out[k] = into[hidden + k] * (_TWO / (_ONE + work[k]) - _ONE)
