"""The recurrent operator's direct launch (its step loop with every buffer made at bind) against its own
``run`` on the same inputs: the same values, bit for bit, for every cell, direction and optional input."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from plugrt.core.types import TensorFormat, from_nptype
from plugrt.nodes.base import Binding
from plugrt.ops.base import create_operator
from plugrt.ops.recurrent_steps import GATES


@pytest.fixture(autouse=True)
def _numpy_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """The NumPy step loop bound at bind, which these tests compare with ``run``: not the compiled LSTM the numba
    extra gives the own kernel (tests/unit/test_recurrent_numba.py)."""
    monkeypatch.setenv("PLUGRT_NUMBA", "0")

RNG = np.random.default_rng(11)


def _binding(array: np.ndarray) -> Binding:
    return Binding(tuple(array.shape), from_nptype(array.dtype), TensorFormat.LINEAR, 1.0, 0, array, lambda: None)


def _cell_inputs(
    cell: str, dirs: int, steps: int, batch: int, size: int, hidden: int, names: list[str], dtype: Any
) -> list[np.ndarray]:
    gates = GATES[cell]
    shapes = {
        "X": (steps, batch, size),
        "W": (dirs, gates * hidden, size),
        "R": (dirs, gates * hidden, hidden),
        "B": (dirs, 2 * gates * hidden),
        "initial_h": (dirs, batch, hidden),
        "initial_c": (dirs, batch, hidden),
        "P": (dirs, 3 * hidden),
    }
    return [(RNG.standard_normal(shapes[n]) * 0.5).astype(dtype) for n in names]


def _outputs(cell: str, dirs: int, steps: int, batch: int, hidden: int, dtype: Any) -> list[np.ndarray]:
    count = 3 if cell == "LSTM" else 2
    return [np.full((steps, dirs, batch, hidden), 7, dtype)] + [
        np.full((dirs, batch, hidden), 7, dtype) for _ in range(count - 1)
    ]


def _direct_and_run(params: dict[str, Any], inputs: list[np.ndarray], outputs: list[np.ndarray]) -> None:
    op = create_operator("recurrent", params, {})
    op.bind([_binding(a) for a in inputs], [_binding(o) for o in outputs], 0)
    launch, args = op.prepared_launch(0)
    assert launch != op.run, f"{params}: no direct launch"
    kept = [a.copy() for a in inputs]
    launch(*args)
    launch(*args)  # a second run of the same buffers
    for before, after in zip(kept, inputs):  # the initial states are read, never written
        np.testing.assert_array_equal(before, after)
    expected = [np.full_like(o, 7) for o in outputs]
    op.run(inputs, expected, np)
    for k, (got, want) in enumerate(zip(outputs, expected)):
        np.testing.assert_array_equal(got, want, err_msg=f"{params}: output {k}")


@pytest.mark.parametrize("cell", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("steps,batch", [(1, 1), (5, 3)])
def test_cells_bit_for_bit(cell: str, direction: str, steps: int, batch: int) -> None:
    dirs = 2 if direction == "bidirectional" else 1
    names = ["X", "W", "R", "B", "initial_h"] + (["initial_c"] if cell == "LSTM" else [])
    params = {"cell": cell, "direction": direction, "hidden_size": 6, "inputs": names}
    inputs = _cell_inputs(cell, dirs, steps, batch, 4, 6, names, np.float32)
    _direct_and_run(params, inputs, _outputs(cell, dirs, steps, batch, 6, np.float32))


@pytest.mark.parametrize(
    "names,extra",
    [
        (["X", "W", "R"], {}),  # zero initial states, no bias
        (["X", "W", "R", "B", "initial_h", "initial_c", "P"], {"clip": 0.5}),
        (["X", "W", "R", "B"], {"input_forget": True, "activations": ["HardSigmoid", "Tanh", "Softsign"]}),
    ],
)
def test_lstm_options_bit_for_bit(names: list[str], extra: dict[str, Any]) -> None:
    params = {"cell": "LSTM", "direction": "forward", "hidden_size": 5, "inputs": names, **extra}
    inputs = _cell_inputs("LSTM", 1, 3, 2, 4, 5, names, np.float32)
    _direct_and_run(params, inputs, _outputs("LSTM", 1, 3, 2, 5, np.float32))


def test_gru_linear_before_reset() -> None:
    names = ["X", "W", "R", "B"]
    params = {"cell": "GRU", "direction": "bidirectional", "hidden_size": 3, "inputs": names, "linear_before_reset": 1}
    inputs = _cell_inputs("GRU", 2, 4, 2, 3, 3, names, np.float32)
    _direct_and_run(params, inputs, _outputs("GRU", 2, 4, 2, 3, np.float32))


def test_empty_sequence_gives_the_initial_states() -> None:
    names = ["X", "W", "R", "B", "initial_h", "initial_c"]
    params = {"cell": "LSTM", "direction": "forward", "hidden_size": 2, "inputs": names}
    inputs = _cell_inputs("LSTM", 1, 0, 2, 3, 2, names, np.float32)
    outputs = _outputs("LSTM", 1, 0, 2, 2, np.float32)
    _direct_and_run(params, inputs, outputs)
    np.testing.assert_array_equal(outputs[1], inputs[4])
    np.testing.assert_array_equal(outputs[2], inputs[5])


@pytest.mark.parametrize(
    "params,dtype",
    [
        ({"layout": 1}, np.float32),  # batch-first tensors: transposed copies, as run makes them
        ({"inputs": ["X", "W", "R", "B", "sequence_lens"]}, np.float32),  # lengths are data
        ({}, np.float16),  # computed in FLOAT from HALF
    ],
)
def test_other_cells_keep_run(params: dict[str, Any], dtype: Any) -> None:
    names = params.get("inputs", ["X", "W", "R"])
    full = {"cell": "LSTM", "direction": "forward", "hidden_size": 2, "inputs": names, **params}
    op = create_operator("recurrent", full, {})
    arrays = _cell_inputs("LSTM", 1, 2, 2, 2, 2, [n for n in names if n != "sequence_lens"], dtype)
    if "sequence_lens" in names:
        arrays.append(np.array([2, 1], np.int32))
    op.bind([_binding(a) for a in arrays], [_binding(o) for o in _outputs("LSTM", 1, 2, 2, 2, dtype)], 0)
    assert op.prepared_launch(0)[0] == op.run
