"""The LSTM's compiled time loop (the numba extra; the own kernel where PyTorch's tactic cannot run): its results
against a float64 reference and the NumPy loop, where it applies and where it must not."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt
from plugrt.ops import depthwise_numba, recurrent
from plugrt.ops.recurrent import RecurrentOperator
from plugrt.ops.recurrent_numba import compiled_lstm

pytestmark = pytest.mark.skipif(depthwise_numba.loops() is None, reason="numba is not installed")


@pytest.fixture(autouse=True)
def _without_onednn(monkeypatch: pytest.MonkeyPatch) -> None:
    """PyTorch's tactic as the loop serves it: oneDNN's LSTM primitive comes first where it is installed
    (tests/unit/test_onednn_rnn.py)."""
    monkeypatch.setenv("PLUGRT_ONEDNN", "0")


def _model(direction: str, hidden: int, inputs: int, extra: dict | None = None, initial: bool = False) -> object:
    dirs = 2 if direction == "bidirectional" else 1
    rng = np.random.default_rng(dirs * hidden)
    weights = {
        "W": rng.normal(0, 0.3, (dirs, 4 * hidden, inputs)),
        "R": rng.normal(0, 0.3, (dirs, 4 * hidden, hidden)),
        "B": rng.normal(0, 0.3, (dirs, 8 * hidden)),
    }
    names = ["x", "W", "R", "B"]
    feeds = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", "N", inputs])]
    if initial:
        names += ["", "h0", "c0"]
        feeds += [helper.make_tensor_value_info(n, TensorProto.FLOAT, [dirs, "N", hidden]) for n in ("h0", "c0")]
    node = helper.make_node(
        "LSTM", names, ["Y", "Y_h", "Y_c"], hidden_size=hidden, direction=direction, **(extra or {})
    )
    graph = helper.make_graph(
        [node],
        "lstm",
        feeds,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y", "Y_h", "Y_c")],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model, weights


def _reference(x, weights, direction, h0=None, c0=None):
    """ONNX's LSTM in float64, step by step."""
    w, r, b = (np.asarray(weights[k], np.float64) for k in ("W", "R", "B"))
    dirs, hidden = r.shape[0], r.shape[2]
    steps, batch = x.shape[:2]
    y = np.zeros((steps, dirs, batch, hidden))
    finals_h, finals_c = np.zeros((dirs, batch, hidden)), np.zeros((dirs, batch, hidden))
    for d in range(dirs):
        back = direction == "reverse" or d == 1
        h = np.zeros((batch, hidden)) if h0 is None else h0[d].astype(np.float64)
        c = np.zeros((batch, hidden)) if c0 is None else c0[d].astype(np.float64)
        for t in (range(steps - 1, -1, -1) if back else range(steps)):
            g = x[t] @ w[d].T + h @ r[d].T + b[d, : 4 * hidden] + b[d, 4 * hidden :]
            i, o, f = (1 / (1 + np.exp(-g[:, k * hidden : (k + 1) * hidden])) for k in range(3))
            c = f * c + i * np.tanh(g[:, 3 * hidden :])
            h = o * np.tanh(c)
            y[t, d] = h
        finals_h[d], finals_c[d] = h, c
    return y, finals_h, finals_c


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> list:
    """The compiled loops the recurrent operator made (None where the loop did not apply)."""
    made: list = []

    def recording(*args, **kwargs):
        made.append(compiled_lstm(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(recurrent, "compiled_lstm", recording)
    return made


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize(("batch", "hidden"), [(1, 16), (3, 37)])
@pytest.mark.parametrize("initial", [False, True])
def test_the_compiled_loop_matches_a_float64_reference_and_the_numpy_loop(
    direction: str, batch: int, hidden: int, initial: bool, spy: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    model, weights = _model(direction, hidden, 24, initial=initial)
    rng = np.random.default_rng(batch)
    dirs = 2 if direction == "bidirectional" else 1
    feeds = {"x": rng.normal(0, 1, (9, batch, 24)).astype(np.float32)}
    if initial:
        feeds.update({k: rng.normal(0, 0.5, (dirs, batch, hidden)).astype(np.float32) for k in ("h0", "c0")})
    monkeypatch.setenv(depthwise_numba.ENV_SWITCH, "1")
    got = plugrt.compile(model)(feeds)
    assert spy and all(made is not None for made in spy)
    want = _reference(feeds["x"].astype(np.float64), weights, direction, feeds.get("h0"), feeds.get("c0"))
    for name, value in zip(("Y", "Y_h", "Y_c"), want):
        np.testing.assert_allclose(got[name], value, rtol=0, atol=2e-6)
    spy.clear()
    monkeypatch.setenv(depthwise_numba.ENV_SWITCH, "0")  # the NumPy loop
    plain = plugrt.compile(model)(feeds)
    assert not any(spy)
    for name in ("Y", "Y_h", "Y_c"):
        np.testing.assert_allclose(got[name], plain[name], rtol=0, atol=2e-6)


@pytest.mark.parametrize(
    "extra",
    [{"clip": 1.0}, {"activations": ["Sigmoid", "Tanh", "Relu"]}, {"input_forget": 1}, {"layout": 1}],
    ids=["clip", "activations", "input_forget", "layout"],
)
def test_configurations_the_loop_does_not_compute_keep_the_numpy_loop(
    extra: dict, spy: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    model, _ = _model("forward", 8, 5, extra)
    x = np.random.default_rng(0).normal(0, 1, (4, 2, 5) if not extra.get("layout") else (2, 4, 5))
    plugrt.compile(model)({"x": x.astype(np.float32)})
    assert not any(spy)


@pytest.mark.parametrize(
    ("steps", "batch", "hidden", "compiled"),
    [(4, 1, 8, True), (4, 8, 8, True), (4, 9, 8, False), (9, 4, 8, False), (4, 2, 130, False), (9, 1, 300, True)],
)
def test_pytorchs_tactic_takes_the_loop_at_batch_1_and_for_short_small_cells(
    steps: int, batch: int, hidden: int, compiled: bool, spy: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch")
    monkeypatch.setenv("PLUGRT_TORCH", "always")  # (the suite turns it off by default)
    model, weights = _model("bidirectional", hidden, 5)
    x = np.random.default_rng(4).normal(0, 1, (steps, batch, 5)).astype(np.float32)
    got = plugrt.compile(model)({"x": x})
    assert spy and all((made is not None) is compiled for made in spy)
    want = _reference(x.astype(np.float64), weights, "bidirectional")
    for name, value in zip(("Y", "Y_h", "Y_c"), want):
        np.testing.assert_allclose(got[name], value, rtol=0, atol=5e-6)


def test_the_loop_declines_other_cells_and_types() -> None:
    gru = RecurrentOperator({"cell": "GRU", "hidden_size": 4})
    x, w, r = np.ones((3, 1, 2), np.float32), np.ones((1, 12, 2), np.float32), np.ones((1, 12, 4), np.float32)
    assert compiled_lstm(gru, [x, w, r], [np.empty((3, 1, 1, 4), np.float32), np.empty((1, 1, 4), np.float32)]) is None
    lstm = RecurrentOperator({"cell": "LSTM", "hidden_size": 4})
    w, r = np.ones((1, 16, 2), np.float64), np.ones((1, 16, 4), np.float64)
    outputs = [np.empty((3, 1, 1, 4)), np.empty((1, 1, 4)), np.empty((1, 1, 4))]
    assert compiled_lstm(lstm, [x.astype(np.float64), w, r], outputs) is None  # DOUBLE: the NumPy loop


def test_weights_given_at_run_time_are_read_at_each_call(spy: list, monkeypatch: pytest.MonkeyPatch) -> None:
    """W, R and B as graph inputs (ONNX's node tests give them so): new values at the same addresses are used."""
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    hidden, inputs, dirs = 6, 4, 2
    node = helper.make_node("LSTM", ["x", "W", "R", "B"], ["Y", "Y_h", "Y_c"], hidden_size=hidden, direction="bidirectional")
    shapes = {"x": [5, 2, inputs], "W": [dirs, 4 * hidden, inputs], "R": [dirs, 4 * hidden, hidden], "B": [dirs, 8 * hidden]}
    graph = helper.make_graph(
        [node],
        "lstm",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in shapes.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y", "Y_h", "Y_c")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    engine = plugrt.compile(model)
    rng = np.random.default_rng(11)
    feeds = {k: rng.normal(0, 0.5, v).astype(np.float32) for k, v in shapes.items()}
    buffers = {k: v.copy() for k, v in feeds.items()}
    for _ in range(2):
        for k in ("W", "R", "B"):  # new contents, same arrays
            buffers[k][...] = rng.normal(0, 0.5, shapes[k])
        got = engine(buffers)
        want = _reference(buffers["x"].astype(np.float64), buffers, "bidirectional")
        for name, value in zip(("Y", "Y_h", "Y_c"), want):
            np.testing.assert_allclose(got[name], value, rtol=0, atol=2e-6)
    assert spy and all(made is not None for made in spy)


@pytest.mark.parametrize(("initializers", "constant"), [(True, True), (False, False)])
def test_constant_recurrent_weights_are_transposed_once(
    initializers: bool, constant: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bindings tell the operator which inputs are engine constants (``Binding.constant``); only then is R's
    transpose kept across binds."""
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    asked: list[bool] = []

    def recording(*args, **kwargs):
        asked.append(kwargs.get("constant_weights", False))
        return compiled_lstm(*args, **kwargs)

    monkeypatch.setattr(recurrent, "compiled_lstm", recording)
    model, weights = _model("forward", 6, 4)
    x = np.random.default_rng(2).normal(0, 1, (5, 1, 4)).astype(np.float32)
    feeds = {"x": x}
    if not initializers:  # the weights as graph inputs instead
        graph = model.graph
        for init in list(graph.initializer):
            graph.input.append(helper.make_tensor_value_info(init.name, TensorProto.FLOAT, list(init.dims)))
            feeds[init.name] = numpy_helper.to_array(init)
        del graph.initializer[:]
    got = plugrt.compile(model)(feeds)
    assert asked and set(asked) == {constant}
    want = _reference(x.astype(np.float64), weights, "forward")
    np.testing.assert_allclose(got["Y"], want[0], rtol=0, atol=2e-6)


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_pytorchs_tactic_projects_the_inputs_with_weights_packed_once(
    direction: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under PyTorch's tactic (W, R and B engine constants) the compiled loop's input projection is oneDNN's
    linear over W packed once, the biases folded into it; a new sequence length binds again without packing."""
    pytest.importorskip("torch")
    from plugrt.ops import linear_weights, recurrent_numba
    from plugrt.ops.torch_cpu_linear import linear_available

    if not linear_available():
        pytest.skip("this torch has no oneDNN linear")
    packed: list[object] = []
    made: list[object] = []
    pack, project = linear_weights.PackedMatrix, recurrent_numba._packed_projections

    def packing(*args: object) -> object:
        packed.append(args)
        return pack(*args)  # type: ignore[arg-type]

    def projecting(*args: object) -> object:
        made.append(project(*args))  # type: ignore[arg-type]
        return made[-1]

    monkeypatch.setattr(recurrent_numba, "PACKED_PROJECTION_FLOPS", 0.0)  # (a small cell: packed all the same)
    monkeypatch.setattr(linear_weights, "PackedMatrix", packing)
    monkeypatch.setattr(recurrent_numba, "_packed_projections", projecting)
    monkeypatch.setenv("PLUGRT_TORCH", "always")
    model, weights = _model(direction, 12, 7)
    engine = plugrt.compile(model, shapes={"x": ((2, 1, 7), (5, 1, 7), (8, 1, 7))})
    dirs = 2 if direction == "bidirectional" else 1
    for steps in (5, 8, 5):
        x = np.random.default_rng(steps).normal(0, 1, (steps, 1, 7)).astype(np.float32)
        got = engine({"x": x})
        want = _reference(x.astype(np.float64), weights, direction)
        for name, value in zip(("Y", "Y_h", "Y_c"), want):
            np.testing.assert_allclose(got[name], value, rtol=0, atol=5e-6)
    assert made and all(kernels is not None for kernels in made), "the projection was not oneDNN's"
    assert len(packed) == dirs, f"W packed {len(packed)} times for {dirs} direction(s)"


def test_small_projections_stay_with_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below ``PACKED_PROJECTION_FLOPS`` (silero-vad's one step of 128 -> 512) oneDNN's call costs more than it
    saves: the projection stays NumPy's product."""
    pytest.importorskip("torch")
    from plugrt.ops import recurrent_numba

    made: list[object] = []
    project = recurrent_numba._packed_projections
    monkeypatch.setattr(recurrent_numba, "_packed_projections", lambda *a: made.append(project(*a)) or made[-1])
    monkeypatch.setenv("PLUGRT_TORCH", "always")
    model, weights = _model("forward", 12, 7)
    x = np.random.default_rng(0).normal(0, 1, (3, 1, 7)).astype(np.float32)
    got = plugrt.compile(model)({"x": x})
    assert made and all(kernels is None for kernels in made)
    np.testing.assert_allclose(got["Y"], _reference(x.astype(np.float64), weights, "forward")[0], rtol=0, atol=5e-6)


def test_the_loop_is_chosen_by_batch_length_and_size() -> None:
    from plugrt.ops.recurrent_numba import LOOP_MAX_HIDDEN_ALONE, LOOP_MAX_ROWS, loop_is_faster

    assert loop_is_faster(1000, 1, LOOP_MAX_HIDDEN_ALONE) and not loop_is_faster(1, 1, LOOP_MAX_HIDDEN_ALONE + 1)
    assert loop_is_faster(1, 8, 128) and loop_is_faster(LOOP_MAX_ROWS // 8, 8, 128)
    assert not loop_is_faster(LOOP_MAX_ROWS // 8 + 1, 8, 128)  # a long sequence at batch 8: PyTorch's
    assert not loop_is_faster(1, 9, 128) and not loop_is_faster(1, 2, 129)


@pytest.mark.parametrize("threads", [1, 2])
def test_two_directions_run_on_two_threads_where_the_engine_has_two(
    threads: int, spy: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long bidirectional loop (``SPLIT_MACS``) gives its reverse direction to the helper thread where the engine
    may use two threads, each direction with its own scratch: the results are the same as on one thread."""
    import threading

    from plugrt.ops import host_threads, recurrent_numba

    monkeypatch.setenv("PLUGRT_TORCH", "0")
    monkeypatch.setattr(recurrent_numba, "SPLIT_MACS", 0)
    monkeypatch.setattr(host_threads, "engine_threads", lambda: threads)
    ran: list[tuple[int, str]] = []
    pulled = host_threads.pulled_by_two
    both = threading.Barrier(2, timeout=10.0)

    def recording(count, work):  # type: ignore[no-untyped-def]
        def traced(item: int) -> None:
            ran.append((item, threading.current_thread().name))
            if threads == 2:  # each direction waits until the other has started: both run at once
                both.wait()
            work(item)

        pulled(count, traced)

    monkeypatch.setattr(recurrent_numba, "pulled_by_two", recording)
    model, weights = _model("bidirectional", 16, 6, initial=True)
    rng = np.random.default_rng(7)
    feeds = {"x": rng.normal(0, 1, (11, 3, 6)).astype(np.float32)}
    feeds.update({k: rng.normal(0, 0.5, (2, 3, 16)).astype(np.float32) for k in ("h0", "c0")})
    got = plugrt.compile(model)(feeds)
    assert spy and all(made is not None for made in spy)
    assert sorted(item for item, _ in ran) == [0, 1]
    here = threading.current_thread().name
    names = sorted(name for _, name in ran)
    assert names == [here, here] if threads == 1 else names[0] == here and names[1].startswith("plugrt-kernel")
    want = _reference(feeds["x"].astype(np.float64), weights, "bidirectional", feeds["h0"], feeds["c0"])
    for name, value in zip(("Y", "Y_h", "Y_c"), want):
        np.testing.assert_allclose(got[name], value, rtol=0, atol=2e-6)
