"""Weights laid out as their products take them (``ops/products.rows_first``): the NumPy recurrent loops read a
constant ``W`` and ``R`` so, weights given at run time as given."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt
from plugrt.ops import depthwise_numba, recurrent, recurrent_steps
from plugrt.ops.products import rows_first


def test_rows_first_keeps_shape_and_values_and_makes_each_transpose_contiguous() -> None:
    w = np.arange(2 * 6 * 4, dtype=np.float32).reshape(2, 6, 4)
    ordered = rows_first(w)
    assert ordered.shape == w.shape and np.array_equal(ordered, w)
    assert all(ordered[d].T.flags.c_contiguous for d in range(2))
    assert not ordered.flags.writeable
    x = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    np.testing.assert_array_equal(x @ ordered[1].T, x @ w[1].T)


def _lstm(cell: str, weights_as_inputs: bool) -> tuple[object, dict[str, np.ndarray]]:
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[cell]
    hidden, inputs = 5, 3
    rng = np.random.default_rng(1)
    weights = {
        "W": rng.normal(0, 0.4, (2, gates * hidden, inputs)).astype(np.float32),
        "R": rng.normal(0, 0.4, (2, gates * hidden, hidden)).astype(np.float32),
    }
    node = helper.make_node(cell, ["x", "W", "R"], ["Y"], hidden_size=hidden, direction="bidirectional")
    feeds = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 2, inputs])]
    if weights_as_inputs:
        feeds += [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape)) for k, v in weights.items()]
        initializers = []
    else:
        initializers = [numpy_helper.from_array(v, k) for k, v in weights.items()]
    graph = helper.make_graph(
        [node], "rnn", feeds, [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], initializers
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model, weights


@pytest.mark.parametrize("cell", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("weights_as_inputs", [False, True])
def test_the_numpy_loop_reads_constant_weights_rows_first(
    cell: str, weights_as_inputs: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    monkeypatch.setenv(depthwise_numba.ENV_SWITCH, "0")
    seen: list[tuple[np.ndarray, np.ndarray]] = []
    bound = recurrent_steps.bound_cells

    def recording(spec, x, w, r, *rest):  # type: ignore[no-untyped-def]
        seen.append((w, r))
        return bound(spec, x, w, r, *rest)

    monkeypatch.setattr(recurrent, "bound_cells", recording)
    model, weights = _lstm(cell, weights_as_inputs)
    x = np.random.default_rng(2).normal(size=(4, 2, 3)).astype(np.float32)
    feeds = {"x": x, **(weights if weights_as_inputs else {})}
    got = plugrt.compile(model)(feeds)["Y"]
    monkeypatch.setattr(recurrent, "bound_cells", bound)
    assert seen
    for w, r in seen:
        ordered = all(w[d].T.flags.c_contiguous and r[d].T.flags.c_contiguous for d in range(2))
        assert ordered is not weights_as_inputs  # inputs are read as given: their contents change between calls
        np.testing.assert_array_equal(w, weights["W"])
        np.testing.assert_array_equal(r, weights["R"])
    other, _ = _lstm(cell, not weights_as_inputs)  # the same cell read the other way
    want = plugrt.compile(other)({"x": x, **({} if weights_as_inputs else weights)})["Y"]
    assert got.shape == (4, 2, 2, 5)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
