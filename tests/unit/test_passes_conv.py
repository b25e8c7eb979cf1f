"""The convolution rules of the graph optimizer and the hard-swish rule, on small hand-written ONNX graphs.

Every fused engine is compared with the same model built with ``PLUGRT_DISABLE_PASSES=all``
(NumPy kernels: ``PLUGRT_TORCH=0``, unless a test says otherwise). Tolerances: folded
affine maps 1e-5 of the output's largest value (the kernel is scaled once in float64, then
rounded); residual sums and activations applied by the convolution bit-identical on NumPy;
hard-swish bit-identical in PaddlePaddle's spelling, 1e-6 relative in ONNX's HardSwish
(``x * HardSigmoid(x)`` rounds ``x / 6 + 0.5`` differently); with the PyTorch tactic forced,
2e-5 of the output's largest value.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt
from plugrt.builder.fusion import DISABLE_ENV
from plugrt.core.errors import NetworkError, ShapeError
from plugrt.ops.conv import ConvolutionOperator
from plugrt.shape import constant

RNG = np.random.default_rng(23)
n = helper.make_node
MAPS = 6


def _model(nodes, constants, x_shape=(2, 4, 9, 9), outputs=("y",), opset=18):
    graph = helper.make_graph(
        nodes,
        "conv_passes",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in constants.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def _conv(out: str = "c", bias: bool = False, source: str = "x", **attrs) -> list:
    inputs = [source, "w", "b"] if bias else [source, "w"]
    return [n("Conv", inputs, [out], kernel_shape=[3, 3], pads=[1, 1, 1, 1], **attrs)]


def _weights(channels: int = 4) -> dict[str, np.ndarray]:
    return {"w": RNG.standard_normal((MAPS, channels, 3, 3)) * 0.3, "b": RNG.standard_normal(MAPS)}


def _x(shape=(2, 4, 9, 9)) -> np.ndarray:
    return (RNG.standard_normal(shape) * 2).astype(np.float32)


def _both(model, monkeypatch, x, torch: str = "0"):
    monkeypatch.setenv("PLUGRT_TORCH", torch)
    monkeypatch.setenv(DISABLE_ENV, "")
    fused = plugrt.compile(model)
    monkeypatch.setenv(DISABLE_ENV, "all")
    plain = plugrt.compile(model)
    return fused, fused({"x": x}), plain({"x": x})


def _computing(compiled) -> list:
    return [layer for layer in compiled.engine.plan.layers if layer.kind != "constant"]


def _close(got: np.ndarray, want: np.ndarray, tolerance: float) -> None:
    scale = float(np.abs(want).max())
    np.testing.assert_allclose(got, want, rtol=0, atol=tolerance * scale)


# --- conv_affine --------------------------------------------------------------------------------------------
AFFINE_CASES = {
    "paddle bn (Mul, Add)": ([n("Mul", ["c", "s"], ["m"]), n("Add", ["m", "t"], ["y"])], (1, MAPS, 1, 1)),
    "constant first": ([n("Mul", ["s", "c"], ["m"]), n("Add", ["t", "m"], ["y"])], (1, MAPS, 1, 1)),
    "rank 3 constants": ([n("Mul", ["c", "s"], ["m"]), n("Sub", ["m", "t"], ["y"])], (MAPS, 1, 1)),
    "scalar": ([n("Div", ["c", "s"], ["m"]), n("Sub", ["t", "m"], ["y"])], ()),
}


@pytest.mark.parametrize("bias", [False, True], ids=["no-bias", "bias"])
@pytest.mark.parametrize("case", AFFINE_CASES)
def test_per_map_affine_folds_into_the_convolution(case: str, bias: bool, monkeypatch) -> None:
    nodes, shape = AFFINE_CASES[case]
    constants = {**_weights(), "s": RNG.uniform(0.5, 2.0, shape), "t": RNG.standard_normal(shape)}
    fused, got, want = _both(_model(_conv(bias=bias) + nodes, constants), monkeypatch, _x())
    assert [layer.kind for layer in _computing(fused)] == ["convolution"]
    _close(got["y"], want["y"], 1e-5)


def test_an_affine_map_then_relu_folds_then_fuses(monkeypatch) -> None:
    nodes = [n("Mul", ["c", "s"], ["m"]), n("Add", ["m", "t"], ["a"]), n("Relu", ["a"], ["y"])]
    constants = {**_weights(), "s": RNG.uniform(0.5, 2, (1, MAPS, 1, 1)), "t": RNG.standard_normal((1, MAPS, 1, 1))}
    fused, got, want = _both(_model(_conv() + nodes, constants), monkeypatch, _x())
    (conv,) = _computing(fused)
    assert conv.params["activation"] == "RELU" and conv.params["has_bias"]
    _close(got["y"], want["y"], 1e-5)


@pytest.mark.parametrize(
    "nodes, shape, outputs",
    [
        ([n("Mul", ["c", "s"], ["y"])], (1, MAPS, 9, 9), ("y",)),  # not one value per map
        ([n("Div", ["s", "c"], ["y"])], (1, MAPS, 1, 1), ("y",)),  # s / conv is no affine map
        ([n("Mul", ["c", "s"], ["y"])], (1, MAPS, 1, 1), ("y", "c")),  # the convolution's result is an output
        ([n("Relu", ["c"], ["r"]), n("Mul", ["r", "s"], ["y"])], (1, MAPS, 1, 1), ("y",)),  # after an activation
    ],
    ids=["per-element", "constant-over-conv", "conv-is-output", "after-relu"],
)
def test_what_must_not_fold(nodes, shape, outputs, monkeypatch) -> None:
    constants = {**_weights(), "s": RNG.uniform(0.5, 2, shape)}
    fused, got, want = _both(_model(_conv() + nodes, constants, outputs=outputs), monkeypatch, _x())
    assert any(layer.kind == "elementwise" for layer in _computing(fused))
    for name in outputs:
        np.testing.assert_array_equal(got[name], want[name])


# --- batch normalization: affine maps folded in, then a chain ------------------------------------------------
def _norm(source: str = "x", out: str = "n", channels: int = 4) -> tuple[list, dict[str, np.ndarray]]:
    """An inference BatchNormalization of ``source`` (its statistics constants)."""
    constants = {
        "g": RNG.uniform(0.5, 2, channels),
        "beta": RNG.standard_normal(channels),
        "mu": RNG.standard_normal(channels),
        "var": RNG.uniform(0.5, 2, channels),
    }
    return [n("BatchNormalization", [source, "g", "beta", "mu", "var"], [out])], constants


def test_caffe2_densenet_norm_mul_add_relu_is_one_chain_step_pair(monkeypatch) -> None:
    """DenseNet-121 as Caffe2 exported it: BatchNormalization -> Mul(w) -> Add(b) -> Relu after a concatenation.
    The Mul and Add fold into the normalization's scale and shift, which then runs with the Relu as one chain."""
    norm, constants = _norm(source="cat", channels=8)
    nodes = [n("Concat", ["x", "x2"], ["cat"], axis=1), *norm]
    nodes += [n("Mul", ["n", "s"], ["m"]), n("Add", ["m", "t"], ["a"]), n("Relu", ["a"], ["y"])]
    constants |= {"x2": RNG.standard_normal((2, 4, 9, 9)), "s": RNG.uniform(0.5, 2, (1, 8, 1, 1))}
    constants["t"] = RNG.standard_normal((1, 8, 1, 1))
    fused, got, want = _both(_model(nodes, constants), monkeypatch, _x())
    (chain,) = [layer for layer in _computing(fused) if layer.kind != "concatenation"]
    assert chain.kind == "fused_elementwise" and set(chain.weights) == {"c0", "c1"}
    assert [step.get("binary", step.get("activation")) for step in chain.params["steps"]] == ["PROD", "SUM", "RELU"]
    _close(got["y"], want["y"], 1e-5)


def test_a_norm_then_relu_chains_bit_identically(monkeypatch) -> None:
    """Nothing to fold: the chain computes the normalization's two float32 operations, then the Relu."""
    norm, constants = _norm()
    model = _model([*norm, n("Relu", ["n"], ["y"])], constants, x_shape=(2, 4, 30, 40))
    fused, got, want = _both(model, monkeypatch, _x((2, 4, 30, 40)))
    (chain,) = _computing(fused)
    assert chain.kind == "fused_elementwise"
    np.testing.assert_array_equal(got["y"], want["y"])


@pytest.mark.parametrize(
    "nodes, outputs",
    [
        ([n("Relu", ["n"], ["y"])], ("y", "n")),  # the normalization's result is an output
        ([n("Mul", ["n", "n"], ["y"])], ("y",)),  # not by a constant: chained, not folded
    ],
    ids=["norm-is-output", "square"],
)
def test_a_norm_that_must_not_fold(nodes, outputs, monkeypatch) -> None:
    norm, constants = _norm()
    fused, got, want = _both(_model([*norm, *nodes], constants, outputs=outputs), monkeypatch, _x())
    kinds = sorted(layer.kind for layer in _computing(fused))
    assert kinds == (["activation", "batch_normalization"] if "n" in outputs else ["fused_elementwise"])
    for name in outputs:
        np.testing.assert_array_equal(got[name], want[name])


# --- hard_swish ---------------------------------------------------------------------------------------------
HARD_SWISH = {
    "paddle": [n("Add", ["x", "three"], ["a"]), n("Clip", ["a", "zero", "six"], ["b"]), n("Mul", ["x", "b"], ["d"]),
               n("Div", ["d", "six"], ["y"])],
    "relu6 first product": [n("Add", ["x", "three"], ["a"]), n("Clip", ["a", "zero", "six"], ["b"]),
                            n("Div", ["b", "six"], ["d"]), n("Mul", ["d", "x"], ["y"])],
    "onnx HardSwish": [n("HardSwish", ["x"], ["y"])],
}  # fmt: skip
HARD_SWISH_CONSTANTS = {"three": np.array(3.0), "zero": np.array(0.0), "six": np.array(6.0)}


@pytest.mark.parametrize("spelling", HARD_SWISH)
def test_hard_swish_spellings_become_one_activation(spelling: str, monkeypatch) -> None:
    x = _x((2, 5, 7, 11)) * 2
    x.reshape(-1)[:6] = [-3.0, 3.0, 0.0, -100.0, 100.0, 1.5]
    fused, got, want = _both(_model(HARD_SWISH[spelling], HARD_SWISH_CONSTANTS, x.shape), monkeypatch, x)
    (layer,) = _computing(fused)
    assert layer.kind == "activation" and layer.params["type"] == "HARD_SWISH"
    if spelling == "paddle":
        np.testing.assert_array_equal(got["y"], want["y"])
    else:
        np.testing.assert_allclose(got["y"], want["y"], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got["y"], x * np.clip(x + 3, 0, 6) / 6, rtol=1e-6, atol=1e-7)


def test_a_near_hard_swish_does_not_fuse(monkeypatch) -> None:
    constants = {**HARD_SWISH_CONSTANTS, "six": np.array(5.0)}
    fused, got, want = _both(_model(HARD_SWISH["paddle"], constants, (1, 3, 4, 4)), monkeypatch, _x((1, 3, 4, 4)))
    assert not any(layer.params.get("type") == "HARD_SWISH" for layer in _computing(fused))
    np.testing.assert_array_equal(got["y"], want["y"])


# --- conv_residual and conv_activation ----------------------------------------------------------------------
ACTIVATIONS = {
    "Relu": ([n("Relu", ["a"], ["y"])], "RELU"),
    "HardSigmoid": ([n("HardSigmoid", ["a"], ["y"], alpha=0.2, beta=0.5)], "HARD_SIGMOID"),
    "Sigmoid": ([n("Sigmoid", ["a"], ["y"])], "SIGMOID"),
    "LeakyRelu": ([n("LeakyRelu", ["a"], ["y"], alpha=0.1)], "LEAKY_RELU"),
    "HardSwish": ([n("HardSwish", ["a"], ["y"])], "HARD_SWISH"),
}


@pytest.mark.parametrize("torch", ["0", "always"], ids=["numpy", "torch"])
@pytest.mark.parametrize("group", [1, MAPS], ids=["dense", "depthwise"])
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_residual_and_activation_fuse_into_the_convolution(activation: str, group: int, torch: str, monkeypatch):
    if torch == "always":
        pytest.importorskip("torch")
    tail, kind = ACTIVATIONS[activation]
    channels = MAPS // group
    nodes = [*_conv(bias=True, group=group), n("Add", ["c", "x"], ["a"]), *tail]  # x is the shortcut
    x = _x((2, MAPS, 8, 8))
    fused, got, want = _both(_model(nodes, _weights(channels), x.shape, opset=20), monkeypatch, x, torch)
    (conv,) = _computing(fused)
    assert conv.kind == "convolution" and conv.params["residual"] and conv.params["activation"] == kind
    assert len(conv.inputs) == 2
    if torch == "0" and activation != "HardSwish":
        np.testing.assert_array_equal(got["y"], want["y"])  # the same float operations in the same order
    elif torch == "0":  # ONNX HardSwish imports as x * HardSigmoid(x): the hard_swish rule rounds otherwise
        np.testing.assert_allclose(got["y"], want["y"], rtol=1e-6, atol=1e-7)
    else:
        assert conv.tactic == 1
        _close(got["y"], want["y"], 2e-5)


def test_a_residual_read_elsewhere_still_fuses_but_a_broadcast_one_does_not(monkeypatch) -> None:
    x = _x((1, MAPS, 8, 8))
    nodes = [*_conv(bias=True), n("Add", ["c", "x"], ["y"]), *_conv("c2", source="x"), n("Add", ["c2", "r"], ["z"])]
    constants = {**_weights(MAPS), "r": RNG.standard_normal((1, MAPS, 1, 1))}
    model = _model(nodes, constants, x.shape, outputs=("y", "z"))
    fused, got, want = _both(model, monkeypatch, x)
    convs = [layer for layer in _computing(fused) if layer.kind == "convolution"]
    assert sorted(bool(c.params.get("residual")) for c in convs) == [False, True]  # z's constant folds as a bias
    for name in ("y", "z"):
        _close(got[name], want[name], 1e-5)


def test_depthwise_tap_sums_take_the_residual(monkeypatch) -> None:
    """Maps large enough for the tap-sum kernel (ops/conv_taps.py), with a residual and ReLU fused."""
    x = _x((1, MAPS, 240, 240))
    nodes = [*_conv(bias=True, group=MAPS), n("Add", ["x", "c"], ["a"]), n("Relu", ["a"], ["y"])]
    fused, got, want = _both(_model(nodes, _weights(1), x.shape), monkeypatch, x)
    (conv,) = _computing(fused)
    assert conv.params["residual"] and conv.params["activation"] == "RELU"
    np.testing.assert_array_equal(got["y"], want["y"])


def _operator(**params) -> ConvolutionOperator:
    return ConvolutionOperator(
        {"num_output_maps": 2, "kernel_shape": [1, 1], **params}, {"kernel": np.ones((1, 2, 2), np.float32)}
    )


def test_an_unknown_fused_activation_names_the_valid_ones() -> None:
    with pytest.raises(NetworkError, match="unknown fused activation 'GELU_ERF'; valid: RELU, CLIP, HARD_SWISH"):
        _operator(activation="GELU_ERF")


def test_a_residual_of_another_shape_is_refused() -> None:
    op = _operator(residual=True)
    x = [constant(1), constant(2), constant(3), constant(3)]
    with pytest.raises(ShapeError, match=r"the residual input has shape \['1', '2', '1', '1'\]; it must be the output"):
        op.output_shapes([x, [constant(1), constant(2), constant(1), constant(1)]], [None, None])
    with pytest.raises(NetworkError, match="expected 2 input"):
        op.output_types([plugrt.float32])


def test_squeeze_excitation_fuses_on_a_gpu_in_half_only(monkeypatch) -> None:
    """A CPU build fuses the block in FLOAT and HALF; a GPU build keeps a FLOAT block's layers (its fused kernel is
    many small launches there) and fuses a HALF one (which keeps a channels-last run unbroken there)."""
    import dataclasses

    from plugrt.builder.fusion import fuse_layers
    from plugrt.core.types import DataType
    rng = np.random.default_rng(2)
    constants = {
        "w1": rng.standard_normal((2, 4, 1, 1)),
        "b1": rng.standard_normal(2),
        "w2": rng.standard_normal((4, 2, 1, 1)),
        "b2": rng.standard_normal(4),
    }
    nodes = [
        helper.make_node("GlobalAveragePool", ["x"], ["g"]),
        helper.make_node("Conv", ["g", "w1", "b1"], ["s1"], kernel_shape=[1, 1]),
        helper.make_node("Relu", ["s1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["s2"], kernel_shape=[1, 1]),
        helper.make_node("Sigmoid", ["s2"], ["h"]),
        helper.make_node("Mul", ["x", "h"], ["y"]),
    ]
    monkeypatch.setenv(DISABLE_ENV, "all")  # the layers as built, for the rules to run on here
    compiled = plugrt.compile(_model(nodes, constants))
    compiled({"x": _x()})
    plan = compiled.engine.plan
    half = [dataclasses.replace(t, dtype=DataType.HALF) if t.dtype == DataType.FLOAT else t for t in plan.tensors]
    cases = ((plan.tensors, False, True), (plan.tensors, True, False), (half, False, True), (half, True, True))
    for tensors, gpu, fused in cases:
        layers = [copy.deepcopy(layer) for layer in plan.layers]
        out, *_ = fuse_layers(layers, list(tensors), list(plan.io), dict(plan.weights), disabled=(), gpu=gpu)
        assert ("squeeze_excitation" in [layer.kind for layer in out]) is fused, (gpu, tensors is half)
