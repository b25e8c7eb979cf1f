"""The time loop of the recurrent operator: every direction stepped together, in place.

The input projection of every step and direction is one product per direction
before the loop, with the input bias and every recurrent bias that sits outside
a product folded in. The loop then does, per time step and for all directions at
once (a batched product over ``[direction, batch, hidden]``), the recurrent
product into a preallocated gate buffer and the gate arithmetic in place. The
hidden state of step ``t`` is written straight into the output ``Y[t]`` and read
from there by step ``t + 1``.

Directions are aligned in time by reversing the reverse direction's sequence
first (each batch entry's first ``length`` steps) and its outputs after. With
``sequence_lens``, an entry past its length keeps its state (restored after the
step) and outputs zeros (one masking pass after the loop).

Gate orders follow ONNX: LSTM ``i o f c``, GRU ``z r h``; peepholes ``i o f``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .rnn_activations import Activation

__all__ = ["CellSpec", "bound_cells", "reverse_each", "run_cells"]

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


@dataclass(frozen=True)
class CellSpec:
    """What the loop needs from the operator's attributes."""

    cell: str
    reverse: tuple[bool, ...]  # per direction
    functions: tuple[tuple[Activation, ...], ...]  # per direction: f, g(, h)
    clip: float | None
    linear_before_reset: bool
    input_forget: bool


class _Gates:
    """Applies one of a cell's activations to a ``[direction, ...]`` slice: once when every direction
    uses the same function, else per direction. Made once per function list and array module
    (:func:`_gates`): a cell's step is made at every run."""

    def __init__(self, functions: Sequence[Activation], xp: Any) -> None:
        self.functions = list(functions)
        self.same = all(f == self.functions[0] for f in self.functions)
        self.xp = xp

    def __call__(self, x: Any, out: Any = None) -> None:
        """The activation of ``x`` into ``out`` (default: ``x``)."""
        out = x if out is None else out
        if self.same:
            self.functions[0](self.xp, x, out)
        else:
            for d, function in enumerate(self.functions):
                function(self.xp, x[d], out[d])


@functools.lru_cache(maxsize=256)
def _gates(functions: tuple[Activation, ...], xp: Any) -> _Gates:
    return _Gates(functions, xp)


def reverse_each(xp: Any, x: Any, lengths: Any) -> Any:
    """Reverse the first ``lengths[b]`` steps of each batch entry ``b`` of ``x`` ([steps, batch, ...])."""
    if lengths is None:
        return x[::-1]
    steps = x.shape[0]
    time = xp.arange(steps).reshape(steps, 1)
    source = xp.where(time < lengths.reshape(1, -1), lengths.reshape(1, -1) - 1 - time, time)
    index = source.reshape(source.shape + (1,) * (x.ndim - 2))
    return xp.take_along_axis(x, xp.broadcast_to(index, x.shape), axis=0)


def run_cells(
    spec: CellSpec,
    x: Any,
    w: Any,
    r: Any,
    bias: Any,
    lengths: Any,
    states: list[Any],
    peepholes: Any,
    xp: Any,
) -> tuple[Any, list[Any]]:
    """Run the cells over ``x`` ``[steps, batch, input]`` for every direction.

    ``w`` ``[D, G*H, input]``, ``r`` ``[D, G*H, H]``, ``bias`` ``[D, 2*G*H]`` (None: zeros), ``lengths``
    ``[batch]`` (None: every entry runs every step), ``states`` the initial ``[D, batch, H]`` states
    (h, and c for LSTM; overwritten), ``peepholes`` ``[D, 3*H]`` or None; all in the work dtype.
    Returns ``Y`` ``[steps, D, batch, H]`` and the final states.
    """
    steps, batch = x.shape[0], x.shape[1]
    dirs, hidden = r.shape[0], r.shape[2]
    size = GATES[spec.cell] * hidden
    folded = None if bias is None else xp.empty((dirs, size), dtype=x.dtype)
    projected = xp.empty((dirs, steps, batch, size), dtype=x.dtype)
    sequences = [reverse_each(xp, x, lengths) if spec.reverse[d] else x for d in range(dirs)]
    _project(spec, sequences, w, bias, folded, projected, xp)
    y = xp.empty((steps, dirs, batch, hidden), dtype=x.dtype)
    step = _STEPS[spec.cell](spec, r, bias, peepholes, batch, xp)
    active = None if lengths is None else lengths.reshape(1, batch, 1)
    h = states[0]
    for t in range(steps):
        kept = None if active is None else [s.copy() for s in (h, *states[1:])]
        step(projected[:, t], h, states, y[t])
        h = y[t]
        if kept is not None and active is not None:
            idle = t >= active
            xp.copyto(h, kept[0], where=idle)
            for state, old in zip(states[1:], kept[1:]):
                xp.copyto(state, old, where=idle)
    finals = [h.copy(), *states[1:]]
    if active is not None:
        xp.multiply(y, xp.arange(steps).reshape(steps, 1, 1, 1) < active, out=y)
    for d in range(dirs):
        if spec.reverse[d]:
            y[:, d] = reverse_each(xp, y[:, d], lengths).copy()
    return y, finals


def bound_cells(
    spec: CellSpec, x: Any, w: Any, r: Any, bias: Any, states: Sequence[Any], peepholes: Any, y: Any,
    finals: Sequence[Any], xp: Any,
) -> Callable[[], None]:
    """:func:`run_cells` without sequence lengths as a call without arguments over these arrays, every buffer
    and view made now (a run then costs the kernels alone: one time step of a small cell is a few
    microseconds of them). ``states`` are the initial states (read only), ``y`` the ``Y`` output
    ``[steps, D, batch, H]`` and ``finals`` the final-state outputs ``[D, batch, H]``, written at each call; the
    call computes exactly what :func:`run_cells` does (the same operations in the same order)."""
    steps, batch = x.shape[0], x.shape[1]
    dirs, hidden = r.shape[0], r.shape[2]
    size = GATES[spec.cell] * hidden
    folded = None if bias is None else xp.empty((dirs, size), dtype=x.dtype)
    projected = xp.empty((dirs, steps, batch, size), dtype=x.dtype)
    sequences = [x[::-1] if spec.reverse[d] else x for d in range(dirs)]
    step = _STEPS[spec.cell](spec, r, bias, peepholes, batch, xp)
    carried = [states[0], *finals[1:]]  # the cell state (LSTM) is stepped in its output
    initial = list(zip(finals[1:], states[1:]))
    steps_in = [(projected[:, t], y[t]) for t in range(steps)]
    reversed_dirs = [d for d in range(dirs) if spec.reverse[d]]

    def run() -> None:
        _project(spec, sequences, w, bias, folded, projected, xp)
        for state, value in initial:
            xp.copyto(state, value)
        h = states[0]
        for gates_in, out in steps_in:
            step(gates_in, h, carried, out)
            h = out
        xp.copyto(finals[0], h)
        for d in reversed_dirs:
            y[:, d] = y[::-1, d].copy()

    return run


def _project(spec: CellSpec, sequences: Sequence[Any], w: Any, bias: Any, folded: Any, projected: Any, xp: Any) -> None:
    """Every step's input projection per direction into ``projected``, with the biases outside a product
    (``folded``: their sum, written here; the recurrent bias joins the input bias except GRU's h gate
    before reset)."""
    if bias is not None:
        size = folded.shape[1]
        xp.add(bias[:, :size], bias[:, size:], out=folded)
        if spec.cell == "GRU" and spec.linear_before_reset:
            hidden = size // 3
            folded[:, 2 * hidden :] = bias[:, 2 * hidden : size]
    for d, sequence in enumerate(sequences):
        if sequence.flags.c_contiguous:  # every step in one product (NumPy makes one per step of a 3-D one)
            rows = projected[d].reshape(-1, projected.shape[-1])  # a view: the buffer is contiguous
            xp.matmul(sequence.reshape(-1, sequence.shape[-1]), w[d].T, out=rows)
        else:
            xp.matmul(sequence, w[d].T, out=projected[d])
        if bias is not None:
            xp.add(projected[d], folded[d], out=projected[d])


def _product(xp: Any, h: Any, weights: Any, out: Any) -> None:
    """``out = h @ weights`` over ``[direction, ...]`` stacks: one direction as one 2-D product (the stacked
    product costs a microsecond more for the same BLAS call)."""
    if h.shape[0] == 1:
        xp.matmul(h[0], weights[0], out=out[0])
    else:
        xp.matmul(h, weights, out=out)


def _clip(spec: CellSpec, x: Any, xp: Any) -> None:
    if spec.clip is not None:
        xp.clip(x, -spec.clip, spec.clip, out=x)


def _rnn(spec: CellSpec, r: Any, bias: Any, peepholes: Any, batch: int, xp: Any) -> Any:
    f = _gates(tuple(fs[0] for fs in spec.functions), xp)
    recurrent = r.transpose(0, 2, 1)

    def step(projected: Any, h: Any, states: list[Any], out: Any) -> None:
        _product(xp, h, recurrent, out)
        xp.add(out, projected, out=out)
        _clip(spec, out, xp)
        f(out)

    return step


def _gru(spec: CellSpec, r: Any, bias: Any, peepholes: Any, batch: int, xp: Any) -> Any:
    f, g = (_gates(tuple(fs[k] for fs in spec.functions), xp) for k in range(2))
    dirs, hidden = r.shape[0], r.shape[2]
    update_reset, candidate_weights = r[:, : 2 * hidden].transpose(0, 2, 1), r[:, 2 * hidden :].transpose(0, 2, 1)
    zr = xp.empty((dirs, batch, 2 * hidden), dtype=r.dtype)
    candidate, scratch = (xp.empty((dirs, batch, hidden), dtype=r.dtype) for _ in range(2))
    inner = None
    if spec.linear_before_reset and bias is not None:
        inner = bias[:, 5 * hidden :].reshape(dirs, 1, hidden)

    def step(projected: Any, h: Any, states: list[Any], out: Any) -> None:
        _product(xp, h, update_reset, zr)
        xp.add(zr, projected[..., : 2 * hidden], out=zr)
        _clip(spec, zr, xp)
        f(zr)
        z, reset = zr[..., :hidden], zr[..., hidden:]
        if spec.linear_before_reset:  # h~ = x Wh + r * (h Rh + Rbh)
            _product(xp, h, candidate_weights, candidate)
            if inner is not None:
                xp.add(candidate, inner, out=candidate)
            xp.multiply(candidate, reset, out=candidate)
        else:  # h~ = x Wh + (r * h) Rh (+ Rbh, folded)
            xp.multiply(reset, h, out=scratch)
            _product(xp, scratch, candidate_weights, candidate)
        xp.add(candidate, projected[..., 2 * hidden :], out=candidate)
        _clip(spec, candidate, xp)
        g(candidate)
        # h' = (1 - z) h~ + z h = h~ + z (h - h~)
        xp.subtract(h, candidate, out=scratch)
        xp.multiply(scratch, z, out=scratch)
        xp.add(candidate, scratch, out=out)

    return step


def _lstm(spec: CellSpec, r: Any, bias: Any, peepholes: Any, batch: int, xp: Any) -> Any:
    f, g, h_fn = (_gates(tuple(fs[k] for fs in spec.functions), xp) for k in range(3))
    dirs, hidden = r.shape[0], r.shape[2]
    recurrent = r.transpose(0, 2, 1)
    pre = xp.empty((dirs, batch, 4 * hidden), dtype=r.dtype)
    scratch = xp.empty((dirs, batch, hidden), dtype=r.dtype)
    peep = None if peepholes is None else [peepholes[:, k * hidden : (k + 1) * hidden][:, None] for k in range(3)]
    i, o, forget, cell_in = (pre[..., k * hidden : (k + 1) * hidden] for k in range(4))

    def step(projected: Any, h: Any, states: list[Any], out: Any) -> None:
        c = states[1]
        _product(xp, h, recurrent, pre)
        xp.add(pre, projected, out=pre)
        if peep is None:
            _clip(spec, pre, xp)
            f(pre[..., : 3 * hidden])
        else:  # i and f see the old cell, o the new one
            for gate, weight in ((i, peep[0]), (forget, peep[2])):
                xp.multiply(c, weight, out=scratch)
                xp.add(gate, scratch, out=gate)
                _clip(spec, gate, xp)
                f(gate)
        if spec.input_forget:
            xp.subtract(1.0, i, out=forget)
        _clip(spec, cell_in, xp)
        g(cell_in)
        xp.multiply(forget, c, out=c)
        xp.multiply(i, cell_in, out=cell_in)
        xp.add(c, cell_in, out=c)
        if peep is not None:
            xp.multiply(c, peep[1], out=scratch)
            xp.add(o, scratch, out=o)
            _clip(spec, o, xp)
            f(o)
        h_fn(c, scratch)
        xp.multiply(o, scratch, out=out)

    return step


_STEPS = {"RNN": _rnn, "GRU": _gru, "LSTM": _lstm}
