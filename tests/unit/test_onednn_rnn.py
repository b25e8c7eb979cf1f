"""ONNX's LSTM as oneDNN's LSTM primitive called directly (``ops/onednn_rnn.py``), inside PyTorch's tactic.

Oracle: onnxruntime on the same model (and the NumPy step loop, the engine built with the tactic off), within 2e-5
of the output's scale: oneDNN sums the two biases first and runs its own gate order (``i f c o``).
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt
from onednn_support import ONEDNN_TESTS, BusyMachine
from plugrt.ops import onednn
from plugrt.ops.recurrent import RecurrentOperator

pytestmark = [*ONEDNN_TESTS, pytest.mark.filterwarnings("ignore::UserWarning")]
torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")


def _model(
    direction: str,
    hidden: int,
    inputs: int,
    bias: bool = True,
    initial: bool = False,
    outputs: tuple[str, ...] = ("Y", "Y_h", "Y_c"),
    weights_as_inputs: bool = False,
    **attributes: object,
) -> object:
    dirs = 2 if direction == "bidirectional" else 1
    rng = np.random.default_rng(dirs * hidden + inputs)
    weights = {
        "W": rng.normal(0, 0.3, (dirs, 4 * hidden, inputs)).astype(np.float32),
        "R": rng.normal(0, 0.3, (dirs, 4 * hidden, hidden)).astype(np.float32),
    }
    if bias:
        weights["B"] = rng.normal(0, 0.3, (dirs, 8 * hidden)).astype(np.float32)
    names = ["x", "W", "R", "B" if bias else ""]
    feeds = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", "N", inputs])]
    if initial:
        names += ["", "h0", "c0"]
        feeds += [helper.make_tensor_value_info(n, TensorProto.FLOAT, [dirs, "N", hidden]) for n in ("h0", "c0")]
    if weights_as_inputs:
        feeds += [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape)) for k, v in weights.items()]
    node = helper.make_node("LSTM", names, list(outputs), hidden_size=hidden, direction=direction, **attributes)
    graph = helper.make_graph(
        [node],
        "lstm",
        feeds,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        [] if weights_as_inputs else [numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    _WEIGHTS[id(model)] = weights
    return model


#: each model's weights by its id (fed as inputs where the model takes them so)
_WEIGHTS: dict[int, dict[str, np.ndarray]] = {}


def _feeds(model: object, steps: int, batch: int, initial: bool = False) -> dict[str, np.ndarray]:
    graph = model.graph  # type: ignore[attr-defined]
    rng = np.random.default_rng(steps * 10 + batch)
    feeds = {}
    for value in graph.input:
        dims = [d.dim_value or {"T": steps, "N": batch}[d.dim_param] for d in value.type.tensor_type.shape.dim]
        feeds[value.name] = rng.standard_normal(dims).astype(np.float32)
    for name, weight in _WEIGHTS.get(id(model), {}).items():
        if name in feeds:
            feeds[name] = weight
    return feeds


def _lstm_kernel(engine: object) -> object:
    nodes = [step.node for step in engine.context._executor.steps]  # type: ignore[attr-defined]
    return next(node for node in nodes if isinstance(node, RecurrentOperator))._torch_call


def _check(model: object, feeds: dict[str, np.ndarray], monkeypatch: pytest.MonkeyPatch, direct: bool = True) -> None:
    monkeypatch.setenv("PLUGRT_TORCH", "always")
    engine = plugrt.compile(model, device="cpu")
    got = engine(**feeds)
    kernel = _lstm_kernel(engine)
    assert (kernel is not None and kernel.__module__ == "plugrt.ops.onednn_buffers") == direct
    names = [o.name for o in model.graph.output]  # type: ignore[attr-defined]
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)  # type: ignore[attr-defined]
    for name, expected in zip(names, want):
        np.testing.assert_allclose(got[name], expected, rtol=2e-5, atol=2e-5 * max(1.0, float(np.abs(expected).max())))


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize(("steps", "batch"), [(1, 1), (7, 3)])
def test_the_primitive_matches_onnxruntime(
    monkeypatch: pytest.MonkeyPatch, direction: str, steps: int, batch: int
) -> None:
    """Every direction, one step and several, batch 1 and 3: Y, Y_h and Y_c as onnxruntime's."""
    model = _model(direction, 16, 12)
    _check(model, _feeds(model, steps, batch), monkeypatch)


def test_initial_states_and_no_bias(monkeypatch: pytest.MonkeyPatch) -> None:
    """Given initial hidden and cell states, no bias input: as onnxruntime's."""
    model = _model("bidirectional", 8, 5, bias=False, initial=True)
    _check(model, _feeds(model, 6, 2), monkeypatch)


def test_only_the_sequence_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """A layer with Y alone (its final states go to scratch of the kernel's)."""
    model = _model("forward", 8, 4, outputs=("Y",))
    _check(model, _feeds(model, 5, 2), monkeypatch)


def test_new_inputs_in_the_same_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Call after call with new values at the same shapes, results follow the inputs."""
    model = _model("bidirectional", 8, 4)
    monkeypatch.setenv("PLUGRT_TORCH", "always")
    engine = plugrt.compile(model, device="cpu")
    session = ort.InferenceSession(model.SerializeToString())  # type: ignore[attr-defined]
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal((4, 2, 4)).astype(np.float32)
        np.testing.assert_allclose(engine(x=x)["Y"], session.run(["Y"], {"x": x})[0], rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize(
    "attributes",
    [{"clip": 2.0}, {"input_forget": 1}, {"activations": ["Sigmoid", "Tanh", "Relu"]}],
    ids=["clip", "input_forget", "activations"],
)
def test_declines_what_oneDNN_does_not_compute(monkeypatch: pytest.MonkeyPatch, attributes: dict) -> None:
    """A clip, a coupled input-forget gate, other activations: the layer runs another kernel (same results)."""
    model = _model("forward", 8, 4, **attributes)
    monkeypatch.setenv("PLUGRT_TORCH", "always")
    engine = plugrt.compile(model, device="cpu")
    feeds = _feeds(model, 3, 2)
    engine(**feeds)
    kernel = _lstm_kernel(engine)
    assert kernel is None or kernel.__module__ != "plugrt.ops.onednn_buffers"


def test_declines_weights_given_as_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    """W, R and B that are not engine constants are not reordered once: another kernel runs them."""
    model = _model("forward", 8, 4, weights_as_inputs=True)
    monkeypatch.setenv("PLUGRT_TORCH", "always")
    engine = plugrt.compile(model, device="cpu")
    feeds = _feeds(model, 3, 2)
    got = engine(**feeds)["Y"]
    kernel = _lstm_kernel(engine)
    assert kernel is None or kernel.__module__ != "plugrt.ops.onednn_buffers"
    want = ort.InferenceSession(model.SerializeToString()).run(["Y"], feeds)[0]  # type: ignore[attr-defined]
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_the_switch_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """PLUGRT_ONEDNN=0: PyTorch's fused LSTM (or the compiled loop) runs the layer, with the same results."""
    monkeypatch.setenv(onednn.ENV_SWITCH, "0")
    model = _model("bidirectional", 8, 4)
    _check(model, _feeds(model, 5, 2), monkeypatch, direct=False)


def test_the_numpy_kernels_weights_are_not_made(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bound to oneDNN's primitive, the layer does not also lay out W and R for its NumPy loop (memory the run
    never reads: 9 MB of a BiLSTM's); with oneDNN off the other kernels' are made as before."""
    model = _model("bidirectional", 16, 12)
    feeds = _feeds(model, 4, 2)
    monkeypatch.setenv("PLUGRT_TORCH", "always")
    for switch, direct in (("1", True), ("0", False)):
        monkeypatch.setenv(onednn.ENV_SWITCH, switch)
        engine = plugrt.compile(model, device="cpu")
        engine(**feeds)
        nodes = [step.node for step in engine.context._executor.steps]  # type: ignore[attr-defined]
        layer = next(node for node in nodes if isinstance(node, RecurrentOperator))
        derived = {slot[1] for slot in layer._torch_weights if slot[0] == "derived"}
        assert ("rows_first_w" in derived) != direct, derived
        assert layer._direct is None or not direct


# --- a busy machine -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize(
    ("batch", "initial", "outputs"),
    [(1, False, ("Y", "Y_h", "Y_c")), (5, True, ("Y", "Y_h", "Y_c")), (6, False, ("Y",))],
    ids=["batch1", "batch5_initial_states", "batch6_sequence_only"],
)
def test_on_a_busy_machine_directions_and_batch_slices_run_apart(
    monkeypatch: pytest.MonkeyPatch, direction: str, batch: int, initial: bool, outputs: tuple[str, ...]
) -> None:
    """Busy: one one-thread primitive per direction and slice of the batch (at most MAX_PARTS), pulled by two
    threads, each on its slice of the buffers in place: the quiet run's bits, onnxruntime's values. One direction
    over one sequence has nothing to split and runs whole."""
    from plugrt.ops import onednn_parts

    machine = BusyMachine(monkeypatch, part_flops=1.0)
    monkeypatch.setenv("PLUGRT_TORCH", "always")
    model = _model(direction, 16, 12, initial=initial, outputs=outputs)
    feeds = _feeds(model, 9, batch, initial=initial)
    engine = plugrt.compile(model, device="cpu")
    quiet = {k: np.array(v) for k, v in engine(**feeds).items()}
    machine.busy = True
    loaded = {k: np.array(v) for k, v in engine(**feeds).items()}
    dirs = 2 if direction == "bidirectional" else 1
    parts = dirs * min(batch, onednn_parts.MAX_PARTS // dirs)
    assert machine.pulled == ([parts] if parts >= 2 else [])
    want = ort.InferenceSession(model.SerializeToString()).run(list(outputs), feeds)  # type: ignore[attr-defined]
    for name, expected in zip(outputs, want):
        np.testing.assert_array_equal(loaded[name], quiet[name])
        np.testing.assert_allclose(
            loaded[name], expected, rtol=2e-5, atol=2e-5 * max(1.0, float(np.abs(expected).max()))
        )
