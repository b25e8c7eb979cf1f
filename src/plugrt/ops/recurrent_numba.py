"""The LSTM's time loop as one Numba-compiled call (the optional extra ``plugrt[numba]``) where PyTorch is absent.

A small LSTM step is a few microseconds of arithmetic behind a dozen NumPy calls (the CRNN's bidirectional
512 -> 128 cell: ~30 us a step as NumPy calls, 1.09 ms over 32 steps, against onnxruntime's 0.31 ms for the
layer). Here the input projection of every step is one BLAS product per direction, and the steps run as one
compiled loop
(:func:`~plugrt.ops.recurrent_numba_loops.lstm_steps`): the recurrent product as vectorised rows, the gates
through a vectorised float32 exponential, a reverse direction read and written backwards in time. Within 1e-6
of a float64 reference (the NumPy loop: within a few ulp of NumPy's functions).

It is the recurrent operator's own kernel where PyTorch's tactic cannot run (PyTorch absent or turned off): there
it takes 0.5-0.9x the NumPy loop's time (docs/benchmarks.md). PyTorch's tactic runs it instead of PyTorch's fused
LSTM for small cells only (batch up to 8, at most 128 units: :data:`TORCH_MAX_BATCH`, :data:`TORCH_MAX_HIDDEN`),
where it is faster in the models measured (the CRNN's 128-unit cell, silero-vad's one step at batch 1 to 8); PyTorch's
is faster for larger ones (the BiLSTM encoder's 256-unit cells: 1.9 and 3.1 ms a layer against PyTorch's ~2 ms each). The choice is
made at bind by the shapes the engine runs, so the tactic the builder timed at one shape does not decide others.
It applies to LSTMs with the default activations (sigmoid, tanh, tanh), no clip, no peepholes, no coupled
input-forget gate, sequence-major, without sequence lengths, in FLOAT.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .blas_threads import blas_threads_for
from .depthwise_numba import compiled_module

if TYPE_CHECKING:
    from .recurrent import RecurrentOperator

__all__ = ["PACKED_PROJECTION_FLOPS", "TORCH_MAX_BATCH", "TORCH_MAX_HIDDEN", "compiled_lstm"]

#: in PyTorch's tactic, the largest batch and hidden size the compiled loop takes instead of PyTorch's fused LSTM
#: (measured, docs/benchmarks.md "CPU: the LSTM's compiled loop")
#: (silero-vad's one step at batch 4 / 8, the whole model: 375 -> 269, 526 -> 431 us; 32 steps of 128 units at batch 8
#: about equal, 4.3 ms; at batch 16, 64 steps of 256 units PyTorch's 2.2x faster)
TORCH_MAX_BATCH = 8
TORCH_MAX_HIDDEN = 128

#: an input projection of at least this many operations a direction runs as oneDNN's linear over the packed weight
#: (PyTorch's tactic); smaller ones as NumPy's product: oneDNN's call costs ~12 us whatever its size (one thread:
#: 1 x 128 by 128 x 512 3.7 against 12.4 us, 4 rows 11.5 against 12.6, 16 rows 23.1 against 18.8, the CRNN's
#: 32 x 512 by 512 x 1024 320 against 142 us)
PACKED_PROJECTION_FLOPS = 1e6

_DEFAULTS = ("sigmoid", "tanh", "tanh")


def compiled_lstm(
    op: RecurrentOperator,
    inputs: Sequence[Any],
    outputs: Sequence[Any],
    max_batch: int | None = None,
    max_hidden: int | None = None,
    constant_weights: bool = False,
    packed_projection: bool = False,
) -> Callable[[], None] | None:
    """The compiled LSTM over these bound arrays as a call without arguments (writing ``Y``, ``Y_h`` and ``Y_c``),
    or None where it does not apply (numba unavailable or turned off, another cell or configuration, not FLOAT,
    arrays not contiguous, empty, a batch above ``max_batch`` or a hidden size above ``max_hidden``).
    ``constant_weights``: ``R`` is an engine constant (the binding says so; PyTorch's tactic requires it), so its
    transpose is made once and kept across binds; otherwise it is transposed at each call, as ``W`` and ``B`` are
    always read then (a 256 KB transpose costs silero-vad's call ~40 us). ``packed_projection``: ``W`` and ``B``
    are engine constants too and PyTorch's kernels may run (its tactic): the input projection is then oneDNN's
    linear over ``W`` packed once, the two biases folded into it (:func:`_packed_projections`)."""
    given = dict(zip(op.inputs, inputs))
    names = [str(n).lower() for n in op.params.get("activations") or []]
    if op.cell != "LSTM" or op.layout or op.clip is not None or op.input_forget:
        return None
    if names and names != list(_DEFAULTS) * op.num_directions:
        return None
    if "P" in given or "sequence_lens" in given or len(outputs) != 3:
        return None
    arrays = [*inputs, *outputs]
    if any(not isinstance(a, np.ndarray) or a.dtype != np.float32 or not a.flags.c_contiguous for a in arrays):
        return None
    x, w, r = given["X"], given["W"], given["R"]
    steps, batch = x.shape[0], x.shape[1]
    dirs, hidden = r.shape[0], r.shape[2]
    if batch == 0 or steps == 0 or hidden == 0:
        return None
    if (max_batch is not None and batch > max_batch) or (max_hidden is not None and hidden > max_hidden):
        return None
    module = compiled_module("recurrent_numba_loops")
    if module is None:
        return None
    size = 4 * hidden
    rows = x.reshape(steps * batch, x.shape[2])
    projected = np.empty((dirs, steps * batch, size), np.float32)
    bias = given.get("B")
    folded = None if bias is None else np.empty((dirs, 1, size), np.float32)
    if constant_weights:  # transposed once, kept across binds (a context whose outputs move binds again per call)
        recurrent_t = op.derived_weight("compiled_r", (r.ctypes.data, r.shape), lambda: _transposed(r))
        transpose = None
    else:
        recurrent_t = np.empty((dirs, hidden, size), np.float32)
        transpose = r.transpose(0, 2, 1)
    reverse = np.array(op.spec.reverse, np.int8)
    zeros = np.zeros((dirs, batch, hidden), np.float32)
    h0 = given.get("initial_h", zeros)
    c0 = given.get("initial_c", zeros)
    y, y_h, y_c = outputs
    gates, work, bits = np.empty((batch, size), np.float32), np.empty(size, np.float32), np.empty(size, np.int32)
    loop = module.lstm_steps
    steps_view = projected.reshape(dirs, steps, batch, size)
    last = [steps - 1 - (steps - 1) * int(back) for back in op.spec.reverse]  # each direction's last step
    flops = 2.0 * rows.shape[0] * size * rows.shape[1]

    projections = _packed_projections(op, rows, w, bias, projected) if packed_projection else None

    def run() -> None:
        if projections is not None:
            for project in projections:
                project()
        else:
            with blas_threads_for(flops):
                for d in range(dirs):
                    np.matmul(rows, w[d].T, out=projected[d])
            if bias is not None and folded is not None:  # the recurrent bias joins the input bias
                np.add(bias[:, None, :size], bias[:, None, size:], out=folded)
                np.add(projected, folded, out=projected)
        if transpose is not None:
            np.copyto(recurrent_t, transpose)
        np.copyto(y_c, c0)
        loop(steps_view, recurrent_t, reverse, h0, y_c, y, gates, work, bits)
        for d, t in enumerate(last):
            y_h[d] = y[t, d]

    return run


def _packed_projections(
    op: RecurrentOperator, rows: np.ndarray, w: np.ndarray, bias: np.ndarray | None, projected: np.ndarray
) -> list[Callable[[], None]] | None:
    """Each direction's input projection ``rows @ W[d]^T + (Wb[d] + Rb[d])`` into ``projected[d]`` as oneDNN's
    linear (``ops/torch_cpu_linear.py``) over ``W[d]`` packed in its layout once and kept across binds, the biases
    summed once: 2.2x faster than OpenBLAS's product for the CRNN's 32 x 512 by 512 x 1024 (one thread, 0.14
    against 0.32 ms). None where oneDNN's linear is not there, or for a projection below
    :data:`PACKED_PROJECTION_FLOPS`."""
    from .linear_weights import PackedMatrix, placeholder
    from .torch_cpu_linear import linear, linear_available

    size = projected.shape[-1]
    if 2.0 * rows.shape[0] * rows.shape[1] * size < PACKED_PROJECTION_FLOPS or not linear_available():
        return None

    def pack() -> tuple[list[Any], list[Any]]:
        weights = [placeholder(PackedMatrix(np.ascontiguousarray(w[d]), True)) for d in range(w.shape[0])]
        sums = [None if bias is None else np.ascontiguousarray(bias[d, :size] + bias[d, size:]) for d in range(w.shape[0])]
        return weights, sums

    key = (w.ctypes.data, w.shape, None if bias is None else bias.ctypes.data)
    weights, sums = op.derived_weight("compiled_w", key, pack)
    kernels = [linear(rows, weights[d], True, sums[d], projected[d]) for d in range(w.shape[0])]
    return None if any(k is None for k in kernels) else [k for k in kernels if k is not None]


def _transposed(r: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(r.transpose(0, 2, 1))
