"""The PyTorch tactic's kernels against the NumPy kernels: one ONNX model built with PLUGRT_TORCH=0 (NumPy
only) and with PLUGRT_TORCH=always (torch wherever its kernel applies, untimed), same inputs.

Tolerance: float32 results within 2e-5 relative to the output's largest magnitude (measured: convolutions
up to 1e-6, transcendental functions 1 ulp, recurrent layers 1e-6); every layer the test expects on torch
is checked to have recorded tactic 1 in the plan. Skipped without torch.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

pytest.importorskip("torch")

import plugrt
from plugrt.ops.torch_cpu import NUMPY_TACTIC, TORCH_TACTIC
from plugrt.ops.torch_cpu_kernels import NUMPY_AS_FAST

TOLERANCE = 2e-5
RNG = np.random.default_rng(7)


def _model(nodes, inputs, initializers, outputs, opset=17):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)) for name, shape in inputs.items()],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in outputs],
        [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in initializers.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def both(monkeypatch, model, feeds):
    """(NumPy engine's outputs, torch engine's outputs, torch engine's layer tactics by kind)."""
    results = []
    for flag in ("0", "always"):
        monkeypatch.setenv("PLUGRT_TORCH", flag)
        engine = plugrt.compile(model, device="cpu")
        results.append((engine(feeds), engine))
    (ours, _), (theirs, torch_engine) = results
    tactics = [(layer.kind, layer.tactic) for layer in torch_engine.engine.plan.layers]
    return ours, theirs, tactics


def assert_close(ours, theirs):
    for name in ours:
        expected, got = np.asarray(ours[name], np.float64), np.asarray(theirs[name], np.float64)
        assert got.shape == expected.shape
        scale = max(float(np.abs(expected).max()), 1e-30)
        assert float(np.abs(expected - got).max()) <= TOLERANCE * scale, name


def _conv_case(x_shape, w_shape, activation=None, **attrs):
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], **attrs)]
    inits = {"w": RNG.standard_normal(w_shape) * 0.3, "b": RNG.standard_normal(w_shape[0])}
    out = "c"
    if activation == "Relu":
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
        out = "y"
    elif activation == "Clip":
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["y"]))
        inits.update(lo=np.array(0.0), hi=np.array(6.0))
        out = "y"
    return _model(nodes, {"x": x_shape}, inits, [out]), {"x": RNG.standard_normal(x_shape).astype(np.float32)}


@pytest.mark.parametrize(
    "x_shape, w_shape, activation, attrs",
    [
        ((2, 8, 12, 12), (16, 8, 3, 3), None, {"pads": [1, 1, 1, 1]}),
        ((1, 16, 20, 20), (16, 1, 3, 3), "Clip", {"pads": [1, 1, 1, 1], "group": 16, "strides": [2, 2]}),
        ((1, 16, 20, 20), (16, 1, 5, 5), "Relu", {"pads": [2, 2, 2, 2], "group": 16}),
        ((1, 12, 9, 9), (24, 3, 3, 3), "Relu", {"group": 4, "dilations": [2, 2], "pads": [2, 2, 2, 2]}),
        ((1, 8, 10, 10), (4, 8, 1, 1), None, {}),
        ((2, 4, 30), (6, 4, 5), "Relu", {"pads": [2, 2], "strides": [2]}),
        ((1, 3, 6, 6, 6), (4, 3, 3, 3, 3), None, {"pads": [1, 1, 1, 1, 1, 1]}),
        ((1, 8, 11, 11), (8, 8, 3, 3), None, {"auto_pad": "SAME_UPPER"}),
    ],
    ids=["dense", "depthwise-stride-clip", "depthwise-5x5-relu", "grouped-dilated", "pointwise", "1d", "3d", "same"],
)
def test_convolution_matches_numpy(monkeypatch, x_shape, w_shape, activation, attrs):
    model, feeds = _conv_case(x_shape, w_shape, activation, kernel_shape=list(w_shape[2:]), **attrs)
    ours, theirs, tactics = both(monkeypatch, model, feeds)
    assert [t for k, t in tactics if k == "convolution"] == [TORCH_TACTIC]
    assert_close(ours, theirs)


@pytest.mark.parametrize("pads, strides", [([0, 0, 1, 1], [2, 2]), ([2, 0, 0, 1], [1, 1])], ids=["tf-same", "mixed"])
def test_convolution_with_asymmetric_padding(monkeypatch, pads, strides):
    model, feeds = _conv_case(
        (1, 6, 9, 10), (6, 1, 3, 3), "Clip", kernel_shape=[3, 3], pads=pads, strides=strides, group=6
    )
    ours, theirs, tactics = both(monkeypatch, model, feeds)
    assert [t for k, t in tactics if k == "convolution"] == [TORCH_TACTIC]
    assert_close(ours, theirs)


@pytest.mark.parametrize("group, bias, activation", [(1, False, None), (2, True, "Relu"), (1, True, None)])
def test_a_uniform_kernel_convolution_on_torch_keeps_its_maps_bit_identical(monkeypatch, group, bias, activation):
    """A kernel whose elements are all one value (the ONNX light models' ConstantOfShape weights) takes the torch
    tactic: the maps of each group are made bit-identical before the bias, as the NumPy kernel makes them."""
    nodes = [helper.make_node("Conv", ["x", "w", *(["b"] if bias else [])], ["c"], kernel_shape=[2, 2], group=group)]
    out = "c"
    if activation:
        nodes.append(helper.make_node(activation, ["c"], ["y"]))
        out = "y"
    inits = {"w": np.full((6, 4 // group, 2, 2), 0.25), **({"b": np.arange(6.0) * 0.1} if bias else {})}
    model = _model(nodes, {"x": (2, 4, 5, 5)}, inits, [out])
    ours, theirs, tactics = both(monkeypatch, model, {"x": RNG.standard_normal((2, 4, 5, 5)).astype(np.float32)})
    assert ("convolution", TORCH_TACTIC) in tactics
    assert_close(ours, theirs)
    if not bias:  # without a bias the maps of a group are one map, bit for bit
        split = np.asarray(theirs[out]).reshape(2, group, 6 // group, -1)
        assert (split == split[:, :, :1]).all()


def test_convolution_kernel_given_as_input(monkeypatch):
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    model = _model(nodes, {"x": (1, 4, 7, 7), "w": (6, 4, 3, 3)}, {}, ["y"])
    feeds = {"x": RNG.standard_normal((1, 4, 7, 7)).astype(np.float32)}
    feeds["w"] = RNG.standard_normal((6, 4, 3, 3)).astype(np.float32)
    ours, theirs, tactics = both(monkeypatch, model, feeds)
    assert ("convolution", TORCH_TACTIC) in tactics
    assert_close(ours, theirs)


@pytest.mark.parametrize(
    "x_shape, w_shape, attrs, on_torch",
    [
        ((1, 8, 6, 6), (8, 4, 2, 2), {"strides": [2, 2]}, True),  # PP-OCR det's upsampling
        ((2, 6, 5, 7), (6, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 0]}, True),
        ((1, 6, 5, 5), (6, 2, 3, 3), {"group": 3, "dilations": [2, 2], "pads": [2, 2, 2, 2]}, True),
        ((2, 4, 9), (4, 5, 4), {"strides": [3], "pads": [1, 1]}, True),
        ((1, 2, 3, 3, 3), (2, 3, 2, 2, 2), {"strides": [2, 2, 2]}, True),
        ((1, 4, 5, 5), (4, 3, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}, True),
        ((1, 4, 5, 5), (4, 3, 3, 3), {"strides": [2, 2], "pads": [0, 0, 1, 1]}, False),  # ends padded unlike
    ],
    ids=["stride-2", "pads-output-padding", "grouped-dilated", "1d", "3d", "same-upper", "asymmetric"],
)
def test_deconvolution_matches_numpy(monkeypatch, x_shape, w_shape, attrs, on_torch):
    nodes = [helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], kernel_shape=list(w_shape[2:]), **attrs)]
    channels = w_shape[1] * attrs.get("group", 1)
    inits = {"w": RNG.standard_normal(w_shape) * 0.3, "b": RNG.standard_normal(channels)}
    model = _model(nodes, {"x": x_shape}, inits, ["y"])
    ours, theirs, tactics = both(monkeypatch, model, {"x": RNG.standard_normal(x_shape).astype(np.float32)})
    assert tactics == [("deconvolution", TORCH_TACTIC)]  # chosen; the kernel declines what torch pads otherwise
    assert_close(ours, theirs)
    if not on_torch:
        from plugrt.ops.deconv import DeconvolutionOperator
        from plugrt.ops.torch_cpu_kernels import deconvolution

        engine = plugrt.compile(model, device="cpu")
        layer = engine.engine.plan.layers[-1]
        op = DeconvolutionOperator(layer.params, {k: engine.engine.plan.weights[v] for k, v in layer.weights.items()})
        x = np.zeros(x_shape, np.float32)
        assert deconvolution(op, x, None, None, np.zeros(theirs["y"].shape, np.float32)) is None


def test_deconvolution_kernel_given_as_input(monkeypatch):
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["y"], kernel_shape=[3, 3], strides=[2, 2])]
    model = _model(nodes, {"x": (1, 4, 5, 5), "w": (4, 2, 3, 3)}, {}, ["y"])
    feeds = {"x": RNG.standard_normal((1, 4, 5, 5)).astype(np.float32)}
    feeds["w"] = RNG.standard_normal((4, 2, 3, 3)).astype(np.float32)
    ours, theirs, tactics = both(monkeypatch, model, feeds)
    assert tactics == [("deconvolution", TORCH_TACTIC)]
    assert_close(ours, theirs)


@pytest.mark.parametrize("op", ["Exp", "Log", "Sqrt", "Reciprocal", "Sin", "Cos", "Tan", "Atan", "Erf"])
def test_unary_matches_numpy(monkeypatch, op):
    x = RNG.standard_normal((3, 1000)).astype(np.float32)
    if op in ("Log", "Sqrt", "Reciprocal"):
        x = np.abs(x) + 0.1
    model = _model([helper.make_node(op, ["x"], ["y"])], {"x": x.shape}, {}, ["y"])
    ours, theirs, tactics = both(monkeypatch, model, {"x": x})
    # (NumPy's kernel is as fast for those of NUMPY_AS_FAST: PyTorch's is not offered on the CPU)
    assert tactics == [("unary", NUMPY_TACTIC if op.upper() in NUMPY_AS_FAST else TORCH_TACTIC)]
    assert_close(ours, theirs)


@pytest.mark.parametrize(
    "op, attrs",
    [
        ("Relu", {}),
        ("Sigmoid", {}),
        ("Tanh", {}),
        ("Gelu", {}),
        ("Gelu", {"approximate": "tanh"}),
        ("LeakyRelu", {"alpha": 0.1}),
        ("HardSigmoid", {"alpha": 1 / 6, "beta": 0.5}),
        ("HardSwish", {}),  # x * HardSigmoid(x), made one HARD_SWISH activation by the optimizer
    ],
)
def test_activation_matches_numpy(monkeypatch, op, attrs):
    x = (RNG.standard_normal((4, 777)) * 5).astype(np.float32)
    x[0, :4] = [-100.0, 100.0, 0.0, -0.0]
    model = _model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x.shape}, {}, ["y"], opset=20)
    ours, theirs, tactics = both(monkeypatch, model, {"x": x})
    assert tactics == [("activation", NUMPY_TACTIC if op.upper() in NUMPY_AS_FAST else TORCH_TACTIC)]
    assert_close(ours, theirs)


@pytest.mark.parametrize("axis", [-1, 1])
def test_softmax_matches_numpy(monkeypatch, axis):
    x = (RNG.standard_normal((2, 5, 33)) * 10).astype(np.float32)
    model = _model([helper.make_node("Softmax", ["x"], ["y"], axis=axis)], {"x": x.shape}, {}, ["y"])
    ours, theirs, tactics = both(monkeypatch, model, {"x": x})
    assert tactics == [("softmax", TORCH_TACTIC)]
    assert_close(ours, theirs)


def test_scaled_softmax_matches_numpy(monkeypatch):
    x = RNG.standard_normal((2, 4, 16, 16)).astype(np.float32)
    nodes = [helper.make_node("Mul", ["x", "s"], ["m"]), helper.make_node("Softmax", ["m"], ["y"], axis=-1)]
    model = _model(nodes, {"x": x.shape}, {"s": np.array(0.125)}, ["y"])
    ours, theirs, tactics = both(monkeypatch, model, {"x": x})
    assert ("softmax", TORCH_TACTIC) in tactics
    assert_close(ours, theirs)


@pytest.mark.parametrize(
    ("op", "x_shape", "affine", "attrs"),
    [
        ("LayerNormalization", (2, 7, 24), (24,), {"axis": -1, "epsilon": 1e-5}),
        ("LayerNormalization", (2, 3, 4, 5), (4, 5), {"axis": 2}),
        ("GroupNormalization", (2, 8, 5, 5), (8,), {"num_groups": 4}),
        ("InstanceNormalization", (2, 6, 9, 4), (6,), {"epsilon": 1e-3}),
    ],
)
def test_normalization_matches_numpy(monkeypatch, op, x_shape, affine, attrs):
    x = (RNG.standard_normal(x_shape) * 3 + 1).astype(np.float32)
    inits = {"s": RNG.standard_normal(affine), "b": RNG.standard_normal(affine)}
    opset = 21 if op == "GroupNormalization" else 17
    model = _model([helper.make_node(op, ["x", "s", "b"], ["y"], **attrs)], {"x": x.shape}, inits, ["y"], opset)
    ours, theirs, tactics = both(monkeypatch, model, {"x": x})
    assert ("normalization", TORCH_TACTIC) in tactics
    assert_close(ours, theirs)


def test_layer_norm_whose_scale_only_broadcasts_runs_numpy_kernel(monkeypatch):
    # a scale of shape [1, 24] broadcasts to the normalized [7, 24] (axis -2): torch's layer_norm would refuse it
    x = RNG.standard_normal((2, 7, 24)).astype(np.float32)
    inits = {"s": RNG.standard_normal((1, 24)), "b": RNG.standard_normal((1, 24))}
    node = helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-2)
    ours, theirs, _ = both(monkeypatch, _model([node], {"x": x.shape}, inits, ["y"]), {"x": x})
    assert_close(ours, theirs)


def _recurrent(cell, direction, layout, initial, hidden=16, size=8, steps=7, batch=3, **attrs):
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[cell]
    dirs = 2 if direction == "bidirectional" else 1
    inits = {
        "W": RNG.standard_normal((dirs, gates * hidden, size)) * 0.4,
        "R": RNG.standard_normal((dirs, gates * hidden, hidden)) * 0.4,
        "B": RNG.standard_normal((dirs, 2 * gates * hidden)) * 0.4,
    }
    x_shape = (batch, steps, size) if layout else (steps, batch, size)
    inputs, names = {"x": x_shape}, ["x", "W", "R", "B"]
    feeds = {"x": RNG.standard_normal(x_shape).astype(np.float32)}
    if initial:
        state = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
        inputs["h0"] = state
        names += ["", "h0"]
        feeds["h0"] = RNG.standard_normal(state).astype(np.float32)
    outs = ["y", "yh"] + (["yc"] if cell == "LSTM" else [])
    node = helper.make_node(cell, names, outs, hidden_size=hidden, direction=direction, layout=layout, **attrs)
    return _model([node], inputs, inits, outs, opset=14), feeds


@pytest.mark.parametrize("cell, attrs", [("LSTM", {}), ("GRU", {"linear_before_reset": 1}), ("RNN", {})])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("initial", [False, True], ids=["zero-state", "initial-h"])
def test_recurrent_matches_numpy(monkeypatch, cell, attrs, direction, layout, initial):
    model, feeds = _recurrent(cell, direction, layout, initial, **attrs)
    ours, theirs, tactics = both(monkeypatch, model, feeds)
    assert ("recurrent", TORCH_TACTIC) in tactics
    assert_close(ours, theirs)


def test_rnn_relu_matches_numpy(monkeypatch):
    model, feeds = _recurrent("RNN", "bidirectional", 0, False, activations=["Relu", "Relu"])
    ours, theirs, tactics = both(monkeypatch, model, feeds)
    assert ("recurrent", TORCH_TACTIC) in tactics
    assert_close(ours, theirs)


@pytest.mark.parametrize(
    "cell, direction, attrs",
    [
        ("GRU", "forward", {}),  # linear_before_reset 0: not PyTorch's GRU
        ("LSTM", "reverse", {}),
        ("LSTM", "forward", {"clip": 1.0}),
        ("LSTM", "forward", {"activations": ["Sigmoid", "Tanh", "Relu"]}),
        ("LSTM", "forward", {"input_forget": 1}),
    ],
    ids=["gru-reset-before", "reverse", "clip", "activations", "input-forget"],
)
def test_recurrent_semantics_torch_lacks_stay_on_numpy(monkeypatch, cell, direction, attrs):
    monkeypatch.setenv("PLUGRT_ONEDNN", "0")  # oneDNN's LSTM takes a reverse cell (tests/unit/test_onednn_rnn.py)
    model, feeds = _recurrent(cell, direction, 0, False, **attrs)
    ours, theirs, tactics = both(monkeypatch, model, feeds)
    assert ("recurrent", 0) in tactics
    assert_close(ours, theirs)


def test_recurrent_weights_that_are_inputs_stay_on_numpy(monkeypatch):
    model, feeds = _recurrent("LSTM", "forward", 0, False)
    graph = model.graph
    w = next(i for i in graph.initializer if i.name == "W")
    graph.input.append(helper.make_tensor_value_info("W", TensorProto.FLOAT, list(w.dims)))
    feeds["W"] = numpy_helper.to_array(w).copy()
    graph.initializer.remove(w)
    ours, theirs, tactics = both(monkeypatch, model, feeds)
    assert ("recurrent", 0) in tactics
    assert_close(ours, theirs)
