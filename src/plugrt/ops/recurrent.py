"""The recurrent operator: ONNX's LSTM, GRU and RNN cells over a sequence.

One operator kind, ``recurrent``, runs the three cells (``cell`` = LSTM, GRU
or RNN) forward, in reverse or in both directions, with per-batch sequence
lengths (steps past an entry's length output zeros and keep its state), initial
states, the ``activations`` attribute with its alphas and betas, ``clip``,
``layout`` 1 (batch first) and GRU's ``linear_before_reset``. Outputs are
always Y, Y_h and (LSTM only) Y_c; an importer uses those the node asks for.

Gate orders follow ONNX: LSTM ``i o f c``, GRU ``z r h``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import NetworkError, ShapeError, TypeMismatchError
from ..core.types import DataType
from ..shape import IDimensionExpr, constant
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .blas_threads import blas_threads_for
from .elementwise import FLOAT_TYPES, label
from .params import param
from .rnn_activations import activation_functions

__all__ = ["RECURRENT_INPUTS", "RecurrentOperator"]

#: ONNX's input names, in order; ``params["inputs"]`` lists the ones given.
RECURRENT_INPUTS = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P")
_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
_DEFAULT_ACTIVATIONS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}
_DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}


@register_operator
class RecurrentOperator(Operator):
    """params: ``cell``, ``inputs`` (names from RECURRENT_INPUTS, X W R first), ``direction``,
    ``hidden_size``, ``activations``, ``activation_alpha``, ``activation_beta``, ``clip``, ``layout``,
    ``linear_before_reset`` (GRU) and ``input_forget`` (LSTM)."""

    kind = "recurrent"
    cell: str = param(choices=_GATES)
    direction: str = param(default="forward", choices=_DIRECTIONS)
    hidden_size: int | None = param(int, default=None)
    layout: int = param(int, default=0)
    clip: float | None = param(float, default=None)
    linear_before_reset: bool = param(bool, default=False)
    input_forget: bool = param(bool, default=False)

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        self.inputs = [str(n) for n in self.params.get("inputs", RECURRENT_INPUTS[:3])]
        if self.inputs[:3] != list(RECURRENT_INPUTS[:3]) or any(n not in RECURRENT_INPUTS for n in self.inputs):
            raise NetworkError(
                f"recurrent: inputs {self.inputs} must start with X, W, R and name only {RECURRENT_INPUTS}"
            )
        self.num_directions = _DIRECTIONS[self.direction]
        if self.layout not in (0, 1):
            raise NetworkError(f"recurrent: layout must be 0 or 1, got {self.layout}")
        names = self.params.get("activations") or _DEFAULT_ACTIVATIONS[self.cell] * self.num_directions
        per_direction = len(_DEFAULT_ACTIVATIONS[self.cell])
        if len(names) != per_direction * self.num_directions:
            raise NetworkError(
                f"recurrent: {self.cell} {self.direction} needs {per_direction * self.num_directions} activations, "
                f"got {list(names)}"
            )
        functions = activation_functions(
            [str(n) for n in names],
            [float(a) for a in self.params.get("activation_alpha", [])],
            [float(b) for b in self.params.get("activation_beta", [])],
        )
        self.functions = [functions[d * per_direction : (d + 1) * per_direction] for d in range(self.num_directions)]

    @property
    def num_outputs(self) -> int:
        return 3 if self.cell == "LSTM" else 2

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        if len(input_types) != len(self.inputs):
            raise NetworkError(f"{label(self)}: expected inputs {self.inputs}, got {len(input_types)} tensors")
        for name, dtype in zip(self.inputs, input_types):
            allowed = {DataType.INT32, DataType.INT64} if name == "sequence_lens" else FLOAT_TYPES
            if dtype not in allowed or (name != "sequence_lens" and dtype != input_types[0]):
                raise TypeMismatchError(f"{label(self)}: input {name} is {dtype.name}; expected {input_types[0].name}")
        return [input_types[0]] * self.num_outputs

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        if len(input_shapes) != len(self.inputs):
            raise NetworkError(f"{label(self)}: expected inputs {self.inputs}, got {len(input_shapes)} tensors")
        shapes = dict(zip(self.inputs, input_shapes))
        x, r = shapes["X"], shapes["R"]
        if len(x) != 3 or len(r) != 3 or len(shapes["W"]) != 3:
            raise ShapeError(f"{label(self)}: X, W and R must be 3-D, got ranks {len(x)}, {len(shapes['W'])}, {len(r)}")
        hidden: IDimensionExpr = r[2]
        if self.hidden_size is not None:
            if hidden.is_constant() and hidden.get_constant_value() != self.hidden_size:
                raise ShapeError(f"{label(self)}: hidden_size is {self.hidden_size} but R has shape {r}")
            hidden = constant(self.hidden_size)
        for name in ("W", "R"):
            dirs = shapes[name][0]
            if dirs.is_constant() and dirs.get_constant_value() != self.num_directions:
                raise ShapeError(
                    f"{label(self)}: {name} has {dirs} directions but direction is {self.direction!r} "
                    f"({self.num_directions})"
                )
        steps, batch = (x[1], x[0]) if self.layout else (x[0], x[1])
        dirs = constant(self.num_directions)
        state = [batch, dirs, hidden] if self.layout else [dirs, batch, hidden]
        y = [batch, steps, dirs, hidden] if self.layout else [steps, dirs, batch, hidden]
        return [y] + [list(state) for _ in range(self.num_outputs - 1)]

    # --- kernel ------------------------------------------------------------------------
    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        given = dict(zip(self.inputs, inputs))
        x = given["X"]
        if self.layout:
            x = x.transpose(1, 0, 2)
        steps, batch = x.shape[0], x.shape[1]
        hidden = given["R"].shape[2]
        work = xp.float32 if x.dtype == np.float16 else x.dtype
        x = x.astype(work, copy=False)
        lens = given.get("sequence_lens")
        lengths = xp.full(batch, steps, dtype=xp.int64) if lens is None else lens.astype(xp.int64).reshape(batch)
        y = xp.zeros((steps, self.num_directions, batch, hidden), dtype=work)
        finals: list[list[Any]] = []
        for d in range(self.num_directions):
            reverse = self.direction == "reverse" or d == 1
            state = self._initial_states(given, d, batch, hidden, work, xp)
            sequence = _reverse_each(xp, x, lengths) if reverse else x
            out_steps, state = self._direction(given, d, sequence, lengths, state, work, xp)
            y[:, d] = _reverse_each(xp, out_steps, lengths) if reverse else out_steps
            finals.append(state)
        self._write_outputs(outputs, y, finals)

    def _initial_states(self, given: dict[str, Any], d: int, batch: int, hidden: int, work: Any, xp: Any) -> list[Any]:
        states = []
        for name in ("initial_h", "initial_c") if self.cell == "LSTM" else ("initial_h",):
            value = given.get(name)
            if value is None:
                states.append(xp.zeros((batch, hidden), dtype=work))
            else:
                states.append((value[:, d] if self.layout else value[d]).astype(work))
        return states

    def _direction(
        self, given: dict[str, Any], d: int, x: Any, lengths: Any, state: list[Any], work: Any, xp: Any
    ) -> tuple[Any, list[Any]]:
        gates = _GATES[self.cell]
        w, r = given["W"][d].astype(work, copy=False), given["R"][d].astype(work, copy=False)
        hidden = r.shape[1]
        bias = given.get("B")
        b = xp.zeros(2 * gates * hidden, dtype=work) if bias is None else bias[d].astype(work)
        wb, rb = b[: gates * hidden], b[gates * hidden :]
        # every step's input projection in one product
        with blas_threads_for(2.0 * x.shape[0] * x.shape[1] * w.size) if xp is np else contextlib.nullcontext():
            projected = x @ w.T + wb
        step_fn = {"LSTM": self._lstm_step, "GRU": self._gru_step, "RNN": self._rnn_step}[self.cell]
        functions = self.functions[d]
        peep = given.get("P")
        extra = {"r": r, "rb": rb, "functions": functions, "p": None if peep is None else peep[d].astype(work)}
        out = xp.zeros((x.shape[0], x.shape[1], hidden), dtype=work)
        # each step's product is small: one BLAS thread (see ops/blas_threads.py)
        with blas_threads_for(2.0 * x.shape[1] * r.size) if xp is np else contextlib.nullcontext():
            for t in range(x.shape[0]):
                new_state = step_fn(projected[t], state, extra, xp)
                active = (t < lengths).reshape(-1, 1)
                state = [xp.where(active, new, old) for new, old in zip(new_state, state)]
                out[t] = xp.where(active, new_state[0], 0)
        return out, state

    def _clip(self, value: Any, xp: Any) -> Any:
        return value if self.clip is None else xp.clip(value, -self.clip, self.clip)

    def _rnn_step(self, xw: Any, state: list[Any], extra: dict[str, Any], xp: Any) -> list[Any]:
        (f,) = extra["functions"]
        return [f(self._clip(xw + state[0] @ extra["r"].T + extra["rb"], xp))]

    def _gru_step(self, xw: Any, state: list[Any], extra: dict[str, Any], xp: Any) -> list[Any]:
        f, g = extra["functions"]
        h_prev = state[0]
        r, rb = extra["r"], extra["rb"]
        size = h_prev.shape[1]
        rz, rr, rh = r[:size], r[size : 2 * size], r[2 * size :]
        bz, br, bh = rb[:size], rb[size : 2 * size], rb[2 * size :]
        z = f(self._clip(xw[:, :size] + h_prev @ rz.T + bz, xp))
        reset = f(self._clip(xw[:, size : 2 * size] + h_prev @ rr.T + br, xp))
        if self.linear_before_reset:
            candidate = xw[:, 2 * size :] + reset * (h_prev @ rh.T + bh)
        else:
            candidate = xw[:, 2 * size :] + (reset * h_prev) @ rh.T + bh
        h = g(self._clip(candidate, xp))
        return [(1 - z) * h + z * h_prev]

    def _lstm_step(self, xw: Any, state: list[Any], extra: dict[str, Any], xp: Any) -> list[Any]:
        f, g, h_fn = extra["functions"]
        h_prev, c_prev = state
        size = h_prev.shape[1]
        pre = xw + h_prev @ extra["r"].T + extra["rb"]
        p = extra["p"]
        pi, po, pf = (0, 0, 0) if p is None else (p[:size], p[size : 2 * size], p[2 * size :])
        i = f(self._clip(pre[:, :size] + pi * c_prev, xp))
        if self.input_forget:
            forget = 1 - i
        else:
            forget = f(self._clip(pre[:, 2 * size : 3 * size] + pf * c_prev, xp))
        c = forget * c_prev + i * g(self._clip(pre[:, 3 * size :], xp))
        o = f(self._clip(pre[:, size : 2 * size] + po * c, xp))
        return [o * h_fn(c), c]

    def _write_outputs(self, outputs: Sequence[Any], y: Any, finals: list[list[Any]]) -> None:
        outputs[0][...] = y.transpose(2, 0, 1, 3) if self.layout else y
        for k, out in enumerate(outputs[1:]):
            for d, state in enumerate(finals):
                if self.layout:
                    out[:, d] = state[k]
                else:
                    out[d] = state[k]


def _reverse_each(xp: Any, x: Any, lengths: Any) -> Any:
    """Reverse the first ``lengths[b]`` steps of each batch entry ``b`` of ``x`` ([steps, batch, ...])."""
    steps = x.shape[0]
    time = xp.arange(steps).reshape(steps, 1)
    source = xp.where(time < lengths.reshape(1, -1), lengths.reshape(1, -1) - 1 - time, time)
    index = source.reshape(source.shape + (1,) * (x.ndim - 2))
    return xp.take_along_axis(x, xp.broadcast_to(index, x.shape), axis=0)
