"""The recurrent operator: ONNX's LSTM, GRU and RNN cells over a sequence.

One operator kind, ``recurrent``, runs the three cells (``cell`` = LSTM, GRU
or RNN) forward, in reverse or in both directions, with per-batch sequence
lengths (steps past an entry's length output zeros and keep its state), initial
states, the ``activations`` attribute with its alphas and betas, ``clip``,
``layout`` 1 (batch first) and GRU's ``linear_before_reset``. Outputs are
always Y, Y_h and (LSTM only) Y_c; an importer uses those the node asks for.

Gate orders follow ONNX: LSTM ``i o f c``, GRU ``z r h``. Where PyTorch is installed and
its fused layers match ONNX's semantics (:mod:`plugrt.ops.torch_cpu_rnn`) the builder
times them against the NumPy step loop per layer (:mod:`plugrt.ops.torch_cpu`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..core.errors import NetworkError, ShapeError, TypeMismatchError
from ..core.types import DataType
from ..shape import IDimensionExpr, constant
from .base import InputShapes, InputValues, ShapeExprs, register_operator
from .blas_threads import blas_threads_for
from .elementwise import FLOAT_TYPES, label
from .onednn_rnn import lstm_onednn
from .params import param
from .products import rows_first
from .recurrent_numba import compiled_lstm
from .recurrent_steps import GATES, CellSpec, bound_cells, run_cells
from .rnn_activations import activation_functions
from .torch_cpu import Kernel, TorchOperator, direct_runs, runs_on
from .torch_cpu_rnn import recurrent as torch_recurrent
from .torch_cpu_rnn import supports as torch_recurrent_supports

__all__ = ["RECURRENT_INPUTS", "RecurrentOperator"]

#: ONNX's input names, in order; ``params["inputs"]`` lists the ones given.
RECURRENT_INPUTS = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P")
_DEFAULT_ACTIVATIONS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}
_DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}


@register_operator
class RecurrentOperator(TorchOperator):
    """params: ``cell``, ``inputs`` (names from RECURRENT_INPUTS, X W R first), ``direction``,
    ``hidden_size``, ``activations``, ``activation_alpha``, ``activation_beta``, ``clip``, ``layout``,
    ``linear_before_reset`` (GRU) and ``input_forget`` (LSTM)."""

    kind = "recurrent"
    cell: str = param(choices=GATES)
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
        self._spec = CellSpec(
            self.cell,
            tuple(self.direction == "reverse" or d == 1 for d in range(self.num_directions)),
            tuple(tuple(f) for f in self.functions),
            self.clip,
            self.linear_before_reset,
            self.input_forget,
        )

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
    def torch_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """FLOAT cells whose semantics PyTorch's fused layers share, with constant W, R and B."""
        return super().torch_supports(types, shapes, constant) and torch_recurrent_supports(self, constant)

    def direct_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """LSTMs as PyTorch's tactic takes them, a reverse one too (``ops/onednn_rnn.py``; PyTorch's own kernel has
        no reverse-only layer and declines it)."""
        return self.cell == "LSTM" and torch_recurrent_supports(self, constant, reverse=True)

    def direct_kernel(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> Kernel | None:
        """oneDNN's LSTM primitive called directly (:mod:`plugrt.ops.onednn_rnn`)."""
        return lstm_onednn(self, inputs, outputs)

    def torch_kernel(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> Kernel | None:
        """PyTorch's fused layer; an LSTM at batch 1 or a short, small one as the compiled loop where numba is
        installed (faster there: :func:`~plugrt.ops.recurrent_numba.loop_is_faster`, decided at bind by the shapes
        run)."""
        small = compiled_lstm(  # (the tactic requires constant W, R and B: torch_supports)
            self,
            inputs,
            outputs,
            faster_only=True,
            constant_weights=True,
            packed_projection=True,
        )
        return small if small is not None else torch_recurrent(self, inputs, outputs)

    @property
    def spec(self) -> CellSpec:
        """What the time loops need from the attributes."""
        return self._spec

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        given = dict(zip(self.inputs, inputs))
        x = given["X"]
        if self.layout:
            x = x.transpose(1, 0, 2)
        steps, batch = x.shape[0], x.shape[1]
        work = xp.float32 if x.dtype == np.float16 else x.dtype
        x = xp.ascontiguousarray(x, dtype=work)
        w, r = (given[name].astype(work, copy=False) for name in ("W", "R"))
        hidden = r.shape[2]
        lens = given.get("sequence_lens")
        lengths = None
        if lens is not None:
            lengths = lens.astype(xp.int64).reshape(batch)
            if bool((lengths >= steps).all()):
                lengths = None  # every entry runs every step: no masking
        states = [self._initial_state(given, name, batch, hidden, work, xp) for name in self._state_names]
        peepholes = given.get("P")
        bias = given.get("B")
        with blas_threads_for(2.0 * batch * r[0].size) if xp is np else contextlib.nullcontext():
            y, finals = run_cells(
                self._spec,
                x,
                w,
                r,
                None if bias is None else bias.astype(work, copy=False),
                lengths,
                states,
                None if peepholes is None else peepholes.astype(work, copy=False),
                xp,
            )
        self._write_outputs(outputs, y, finals)

    def direct_launch(
        self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any
    ) -> tuple[Callable[..., Any], tuple[Any, ...]] | None:
        """The NumPy step loop with its buffers made now (:func:`bound_cells`), for a sequence-major cell
        without sequence lengths whose tensors all have one type other than HALF (what :meth:`run` then
        computes, without its conversions, copies and allocations per run); where the second tactic cannot
        run (neither oneDNN's library nor PyTorch), an LSTM is the compiled loop where numba is installed
        (:mod:`plugrt.ops.recurrent_numba`)."""
        given = dict(zip(self.inputs, inputs))
        if xp is not np or self.layout or "sequence_lens" in given:
            return None
        if not (direct_runs(np) or runs_on(np)):  # without the library tactic, an LSTM is the compiled loop (numba)
            compiled = compiled_lstm(self, inputs, outputs, constant_weights=self._constant_weights())
            if compiled is not None:
                return compiled, ()
        arrays = [*inputs, *outputs]
        dtype = arrays[0].dtype
        if dtype == np.float16 or any(a.dtype != dtype or not a.flags.c_contiguous for a in arrays):
            return None
        x, r = given["X"], given["R"]
        batch, hidden = x.shape[1], r.shape[2]
        states = [
            given[name] if name in given else np.zeros((self.num_directions, batch, hidden), dtype)
            for name in self._state_names
        ]
        w = given["W"]
        if self._constant_weights():  # both as their products take them, made once (see rows_first)
            w = self.derived_weight("rows_first_w", (w.ctypes.data, w.shape, w.dtype), lambda: rows_first(given["W"]))
            r = self.derived_weight("rows_first_r", (r.ctypes.data, r.shape, r.dtype), lambda: rows_first(given["R"]))
        run = bound_cells(self._spec, x, w, r, given.get("B"), states, given.get("P"), outputs[0], outputs[1:], xp)
        flops = 2.0 * batch * r[0].size

        def launch() -> None:
            with blas_threads_for(flops):
                run()

        return launch, ()

    def _constant_weights(self) -> bool:
        """Whether this binding's ``W`` and ``R`` are engine constants (their derived forms may be kept)."""
        if not self.bound_constant:
            return False
        return all(self.bound_constant[self.inputs.index(name)] for name in ("W", "R"))

    @property
    def _state_names(self) -> tuple[str, ...]:
        return ("initial_h", "initial_c") if self.cell == "LSTM" else ("initial_h",)

    def _initial_state(self, given: dict[str, Any], name: str, batch: int, hidden: int, work: Any, xp: Any) -> Any:
        value = given.get(name)
        if value is None:
            return xp.zeros((self.num_directions, batch, hidden), dtype=work)
        return xp.array(value.transpose(1, 0, 2) if self.layout else value, dtype=work)  # a copy: stepped in place

    def _write_outputs(self, outputs: Sequence[Any], y: Any, finals: list[Any]) -> None:
        outputs[0][...] = y.transpose(2, 0, 1, 3) if self.layout else y
        for out, state in zip(outputs[1:], finals):
            out[...] = state.transpose(1, 0, 2) if self.layout else state
