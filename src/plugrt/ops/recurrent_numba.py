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
LSTM where it is the faster (:func:`loop_is_faster`): at batch 1 (its steps stream the recurrent weight once each,
where PyTorch's add a dozen kernel calls: the BiLSTM encoder's 256-unit cells 0.8x PyTorch's time), and for short
sequences of small cells at larger batches (silero-vad's one step at batch 1 to 8); PyTorch's one BLAS product a
step is faster over long sequences at batch 2 and up. The choice is made at bind by the shapes the engine runs, so
the tactic the builder timed at one shape does not decide others. A bidirectional loop long enough
(:data:`SPLIT_MACS`) runs its two directions on two threads where the engine may use two.
It applies to LSTMs with the default activations (sigmoid, tanh, tanh), no clip, no peepholes, no coupled
input-forget gate, sequence-major, without sequence lengths, in FLOAT.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .blas_threads import blas_threads_for
from .depthwise_numba import compiled_module
from .host_threads import pulled_by_two
from .products import rows_first

if TYPE_CHECKING:
    from .recurrent import RecurrentOperator

__all__ = [
    "LOOP_MAX_BATCH",
    "LOOP_MAX_HIDDEN",
    "LOOP_MAX_HIDDEN_ALONE",
    "LOOP_MAX_ROWS",
    "PACKED_PROJECTION_FLOPS",
    "SPLIT_MACS",
    "compiled_lstm",
    "loop_is_faster",
]

#: in PyTorch's tactic, where the compiled loop runs instead of PyTorch's fused LSTM (:func:`loop_is_faster`; measured
#: with ``benchmarks/lstm_cpu.py``, docs/benchmarks.md "CPU: the LSTM's loop by batch and length"): at batch 1 cells of
#: up to this many units (64 steps, the loop's time over PyTorch's, one / two threads: 0.93 / 0.77 at 128 units,
#: 0.88 / 0.79 at 256, 0.76 / 0.66 at 512) ...
LOOP_MAX_HIDDEN_ALONE = 512
#: ... and at larger batches cells of up to this many units over at most :data:`LOOP_MAX_ROWS` steps times batch
#: entries, batches of at most :data:`LOOP_MAX_BATCH` (128 units: 4 steps at batch 8 0.82 / 0.86, 16 steps at batch 4
#: 1.11 / 1.33, 64 steps at batch 8 1.04 / 1.17; 256 units at batch 2 1.11 / 1.01: PyTorch's step is one BLAS
#: product, the loop's rows are not blocked over the batch)
LOOP_MAX_HIDDEN = 128
LOOP_MAX_ROWS = 32
LOOP_MAX_BATCH = 8

#: an input projection of at least this many operations a direction runs as oneDNN's linear over the packed weight
#: (PyTorch's tactic); smaller ones as NumPy's product: oneDNN's call costs ~12 us whatever its size (one thread:
#: 1 x 128 by 128 x 512 3.7 against 12.4 us, 4 rows 11.5 against 12.6, 16 rows 23.1 against 18.8, the CRNN's
#: 32 x 512 by 512 x 1024 320 against 142 us)
PACKED_PROJECTION_FLOPS = 1e6

#: a bidirectional loop whose recurrent products take at least this many multiply-adds a direction runs its two
#: directions on two threads where the engine may use two (``ops/host_threads.py``: each takes the next direction
#: as it is free, so a busy machine's other core costs nothing): each core then keeps one direction's recurrent
#: weight in its cache
SPLIT_MACS = 8_000_000

_DEFAULTS = ("sigmoid", "tanh", "tanh")


def compiled_lstm(
    op: RecurrentOperator,
    inputs: Sequence[Any],
    outputs: Sequence[Any],
    faster_only: bool = False,
    constant_weights: bool = False,
    packed_projection: bool = False,
) -> Callable[[], None] | None:
    """The compiled LSTM over these bound arrays as a call without arguments (writing ``Y``, ``Y_h`` and ``Y_c``),
    or None where it does not apply (numba unavailable or turned off, another cell or configuration, not FLOAT,
    arrays not contiguous, empty; with ``faster_only``, shapes where PyTorch's fused LSTM is faster:
    :func:`loop_is_faster`).
    ``constant_weights``: ``W`` and ``R`` are engine constants (the binding says so; PyTorch's tactic requires it),
    so both are laid out as their products take them once (:func:`~plugrt.ops.products.rows_first`) and kept
    across binds; otherwise ``R`` is transposed at each call and ``W`` read as given (a 256 KB transpose costs
    silero-vad's call ~40 us). ``packed_projection``: ``W`` and ``B``
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
    if faster_only and not loop_is_faster(steps, batch, hidden):
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
        recurrent_t = op.derived_weight("rows_first_r", (r.ctypes.data, r.shape, r.dtype), lambda: rows_first(r))
        recurrent_t = recurrent_t.transpose(0, 2, 1)  # (C-contiguous [D, H, 4H])
        transpose = None
    else:
        recurrent_t = np.empty((dirs, hidden, size), np.float32)
        transpose = r.transpose(0, 2, 1)
    reverse = np.array(op.spec.reverse, np.int8)
    zeros = np.zeros((dirs, batch, hidden), np.float32)
    h0 = given.get("initial_h", zeros)
    c0 = given.get("initial_c", zeros)
    y, y_h, y_c = outputs
    # scratch per direction: two directions may run at once, on the caller's thread and the helper
    gates = np.empty((dirs, batch, size), np.float32)
    work, bits = np.empty((dirs, size), np.float32), np.empty((dirs, size), np.int32)
    loop = module.lstm_steps
    steps_view = projected.reshape(dirs, steps, batch, size)
    last = [steps - 1 - (steps - 1) * int(back) for back in op.spec.reverse]  # each direction's last step
    flops = 2.0 * rows.shape[0] * size * rows.shape[1]
    apart = dirs == 2 and steps * batch * hidden * size >= SPLIT_MACS

    def direction(d: int) -> None:
        loop(steps_view, recurrent_t, reverse, h0, y_c, y, gates[d], work[d], bits[d], d, d + 1)

    projections = _packed_projections(op, rows, w, bias, projected) if packed_projection else None
    # NumPy's projection by a constant W takes it as [K, 4H] rows, made once (products.rows_first)
    input_t = None
    if projections is None and constant_weights:
        input_t = op.derived_weight("rows_first_w", (w.ctypes.data, w.shape, w.dtype), lambda: rows_first(w))
        input_t = input_t.transpose(0, 2, 1)

    def run() -> None:
        if projections is not None:
            for project in projections:
                project()
        else:
            with blas_threads_for(flops):
                for d in range(dirs):
                    np.matmul(rows, w[d].T if input_t is None else input_t[d], out=projected[d])
            if bias is not None and folded is not None:  # the recurrent bias joins the input bias
                np.add(bias[:, None, :size], bias[:, None, size:], out=folded)
                np.add(projected, folded, out=projected)
        if transpose is not None:
            np.copyto(recurrent_t, transpose)
        np.copyto(y_c, c0)
        if apart:
            pulled_by_two(dirs, direction)
        else:
            loop(steps_view, recurrent_t, reverse, h0, y_c, y, gates[0], work[0], bits[0], 0, dirs)
        for d, t in enumerate(last):
            y_h[d] = y[t, d]

    return run


def loop_is_faster(steps: int, batch: int, hidden: int) -> bool:
    """Whether the compiled loop runs an LSTM of ``steps`` steps, ``batch`` entries and ``hidden`` units faster
    than PyTorch's fused layer (measured: :data:`LOOP_MAX_HIDDEN_ALONE`, :data:`LOOP_MAX_HIDDEN`)."""
    if batch == 1:
        return hidden <= LOOP_MAX_HIDDEN_ALONE
    return hidden <= LOOP_MAX_HIDDEN and batch <= LOOP_MAX_BATCH and steps * batch <= LOOP_MAX_ROWS


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
