"""LSTM, GRU and RNN imported and run, checked against onnxruntime (and the reference evaluator for layout 1)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper
from tensor_harness import Compiled, make_model, reference

import plugrt as trt
from ort_support import ORT_IS_OLD, ORT_VERSION

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
T, B, IN, H = 5, 3, 4, 6


def cell_model(
    cell: str,
    direction: str = "forward",
    *,
    layout: int = 0,
    lengths: bool = False,
    initial: bool = False,
    peepholes: bool = False,
    seed: int = 0,
    **attrs: Any,
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """One recurrent node with random weights (initializers) and a random X (the graph input)."""
    rng = np.random.default_rng(seed)
    gates, dirs = GATES[cell], 2 if direction == "bidirectional" else 1
    x = rng.standard_normal((B, T, IN) if layout else (T, B, IN)).astype(np.float32)
    state_shape = (B, dirs, H) if layout else (dirs, B, H)
    inits: dict[str, np.ndarray] = {
        "W": (rng.standard_normal((dirs, gates * H, IN)) * 0.5).astype(np.float32),
        "R": (rng.standard_normal((dirs, gates * H, H)) * 0.5).astype(np.float32),
        "B": (rng.standard_normal((dirs, 2 * gates * H)) * 0.3).astype(np.float32),
    }
    names = ["X", "W", "R", "B", "", "", "", ""]
    if lengths:
        inits["lens"] = np.array([T, 1, 3], np.int32)
        names[4] = "lens"
    if initial:
        inits["h0"] = rng.standard_normal(state_shape).astype(np.float32)
        names[5] = "h0"
        if cell == "LSTM":
            inits["c0"] = rng.standard_normal(state_shape).astype(np.float32)
            names[6] = "c0"
    if peepholes:
        inits["P"] = (rng.standard_normal((dirs, 3 * H)) * 0.5).astype(np.float32)
        names[7] = "P"
    while names[-1] == "":
        names.pop()
    outputs = ["Y", "Y_h", "Y_c"][: 3 if cell == "LSTM" else 2]
    extra = {"layout": layout} if layout else {}
    node = helper.make_node(cell, names, outputs, direction=direction, hidden_size=H, **extra, **attrs)
    model = make_model([node], {"X": (TP.FLOAT, list(x.shape))}, outputs, inits, opset=14, output_type=TP.FLOAT)
    return model, {"X": x}


def onnxruntime_outputs(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return list(session.run(None, feeds))


def assert_close(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("cell", sorted(GATES))
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("variant", ["plain", "lengths", "initial"])
def test_cells_match_onnxruntime(cell: str, direction: str, variant: str) -> None:
    model, feeds = cell_model(cell, direction, lengths=variant == "lengths", initial=variant == "initial")
    assert_close(Compiled(model)(feeds), onnxruntime_outputs(model, feeds))


@pytest.mark.parametrize(
    ("cell", "direction", "options"),
    [
        ("LSTM", "bidirectional", {"peepholes": True, "initial": True, "lengths": True}),
        ("LSTM", "forward", {"input_forget": 1}),
        ("LSTM", "forward", {"clip": 0.5, "lengths": True}),
        ("GRU", "bidirectional", {"linear_before_reset": 1, "lengths": True, "initial": True}),
        ("GRU", "reverse", {"clip": 0.3}),
        ("RNN", "forward", {"clip": 0.4, "initial": True}),
        ("LSTM", "forward", {"activations": ["HardSigmoid", "Elu", "Softsign"], "activation_alpha": [0.3, 0.7]}),
        (
            "GRU",
            "forward",
            {
                "activations": ["HardSigmoid", "ScaledTanh"],
                "activation_alpha": [0.3, 0.7],
                "activation_beta": [0.6, 1.2],
            },
        ),
        ("RNN", "bidirectional", {"activations": ["LeakyRelu", "HardSigmoid"], "activation_alpha": [0.3, 0.4]}),
        ("RNN", "forward", {"activations": ["Affine"], "activation_alpha": [0.5], "activation_beta": [0.2]}),
        ("RNN", "forward", {"activations": ["ThresholdedRelu"], "activation_alpha": [0.2]}),
        ("RNN", "reverse", {"activations": ["Softplus"]}),
        ("RNN", "forward", {"activations": ["Relu"]}),
        (
            "LSTM",
            "bidirectional",
            {
                "activations": ["Sigmoid", "Tanh", "Tanh", "HardSigmoid", "Tanh", "Softsign"],
                "activation_alpha": [0.3],
                "activation_beta": [0.4],
                "lengths": True,
            },
        ),
        ("GRU", "bidirectional", {"activations": ["Sigmoid", "Tanh", "Sigmoid", "Relu"], "peepholes": False}),
        ("LSTM", "bidirectional", {"peepholes": True, "clip": 0.7}),
    ],
)
def test_cell_attributes_match_onnxruntime(cell: str, direction: str, options: dict[str, Any]) -> None:
    if ORT_IS_OLD and direction == "bidirectional" and len(options.get("activations", ())) > 1:
        pytest.skip(f"onnxruntime {ORT_VERSION} applies per-direction RNN activations differently from ONNX")
    model, feeds = cell_model(cell, direction, **options)
    assert_close(Compiled(model)(feeds), onnxruntime_outputs(model, feeds))


@pytest.mark.parametrize("cell", sorted(GATES))
def test_batch_first_layout_matches_the_reference(cell: str) -> None:
    model, feeds = cell_model(cell, "bidirectional", layout=1, initial=True, seed=3)
    assert_close(Compiled(model)(feeds), reference(model, feeds))


def _with_lengths(cell: str, lens: list[int]) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    model, feeds = cell_model(cell, "bidirectional", lengths=True, initial=True, seed=2)
    for tensor in model.graph.initializer:
        if tensor.name == "lens":
            tensor.CopyFrom(onnx.numpy_helper.from_array(np.array(lens, np.int32), "lens"))
    return model, feeds


@pytest.mark.parametrize("cell", sorted(GATES))
@pytest.mark.parametrize("lens", [[T, T, T], [1, T, 2]])
def test_sequence_lengths_full_or_short(cell: str, lens: list[int]) -> None:
    """Lengths that all cover the sequence run unmasked; shorter ones keep their state past their end."""
    model, feeds = _with_lengths(cell, lens)
    assert_close(Compiled(model)(feeds), onnxruntime_outputs(model, feeds))


@pytest.mark.parametrize("cell", sorted(GATES))
def test_an_entry_of_length_zero_outputs_zeros_and_keeps_its_initial_state(cell: str) -> None:
    # onnxruntime zeroes the final state of such an entry instead; ONNX leaves it open
    model, feeds = _with_lengths(cell, [0, T, 2])
    got = Compiled(model)(feeds)
    want = onnxruntime_outputs(model, feeds)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=2e-6)
    assert not got[0][:, :, 0].any()
    initial = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    for final, theirs, name in zip(got[1:], want[1:], ["h0", "c0"]):
        np.testing.assert_array_equal(final[:, 0], initial[name][:, 0])
        np.testing.assert_allclose(final[:, 1:], theirs[:, 1:], rtol=1e-5, atol=2e-6)


def test_only_the_requested_outputs_are_bound() -> None:
    model, feeds = cell_model("LSTM", "forward")
    model.graph.node[0].output[:] = ["", "Y_h"]
    del model.graph.output[:]
    model.graph.output.append(helper.make_tensor_value_info("Y_h", TP.FLOAT, None))
    (y_h,) = Compiled(model)(feeds)
    np.testing.assert_allclose(y_h, onnxruntime_outputs(model, feeds)[0], rtol=1e-5, atol=2e-6)


def test_dynamic_sequence_and_batch() -> None:
    model, _ = cell_model("GRU", "bidirectional")
    model.graph.input[0].CopyFrom(helper.make_tensor_value_info("X", TP.FLOAT, ["T", "N", IN]))
    compiled = Compiled(model, {"X": ((1, 1, IN), (4, 2, IN), (9, 5, IN))})
    rng = np.random.default_rng(5)
    for steps, batch in [(4, 2), (9, 5), (1, 1), (3, 4)]:
        feeds = {"X": rng.standard_normal((steps, batch, IN)).astype(np.float32)}
        assert_close(compiled(feeds), onnxruntime_outputs(model, feeds))


@pytest.mark.parametrize(
    ("attrs", "message"),
    [
        ({"activations": ["Tanh", "Gelu"]}, "unknown activation 'Gelu'"),
        ({"activations": ["Tanh"]}, "needs 2 activations"),
        ({"layout": 2}, "layout must be 0 or 1"),
        ({"input_forget": 1}, "input_forget is an LSTM attribute"),
    ],
)
def test_bad_attributes_are_reported_by_the_parser(attrs: dict[str, Any], message: str) -> None:
    model, _ = cell_model("GRU", "forward", **attrs)
    network = trt.Builder(trt.Logger(trt.Logger.INTERNAL_ERROR)).create_network(0)
    from tensor_harness import parser_class

    parser = parser_class()(network, trt.Logger(trt.Logger.INTERNAL_ERROR))
    assert not parser.parse(model.SerializeToString())
    assert message in str(parser.get_error(0))
