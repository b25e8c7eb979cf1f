"""Depthwise convolutions and squeeze-and-excitation blocks of channels-last runs as Numba-compiled loops
(``ops/depthwise_numba.py``, ``ops/squeeze_numba.py``).

Oracles: the NumPy tap-sum kernel (``ops/conv_taps.py``), bit for bit (``assert_array_equal``: equal up to the
sign of a zero) for the bias and the activations the loop fuses; the NumPy epilogue after it within 1 float32
ulp where it applies a transcendental activation (the same NumPy calls on the same sums); onnxruntime within
2e-6 of the output's largest value (other summation orders); the SE loop the NumPy SE kernel within 1e-5
(its mean sums in another order). Without numba (absent, or ``PLUGRT_NUMBA=0``)
the channels-last tactic keeps oneDNN's kernel and the results stay the NumPy engine's within tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt
from plugrt.core.types import TensorFormat
from plugrt.ops import conv, depthwise_numba
from plugrt.ops.conv import ConvolutionOperator, pack_conv_kernel
from plugrt.ops.hand_over import hand_over

numba = pytest.importorskip("numba", reason="needs numba (pip install 'plugrt[numba]')")

HWC = [TensorFormat.HWC, TensorFormat.HWC]


@pytest.fixture(autouse=True)
def _numba_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(depthwise_numba.ENV_SWITCH, raising=False)
    monkeypatch.setenv("PLUGRT_ONEDNN", "0")  # oneDNN's direct kernel comes first where it is installed


def _operator(c: int, kernel: tuple[int, int], multiplier: int = 1, bias: bool = True, seed: int = 0, **params):
    rng = np.random.default_rng(seed)
    maps = c * multiplier
    weights = {"kernel": pack_conv_kernel(rng.standard_normal((maps, 1, *kernel)).astype(np.float32), c)}
    if bias:
        weights["bias"] = rng.standard_normal(maps).astype(np.float32)
    params.setdefault("activation_alpha", 0.0)
    params.setdefault("activation_beta", 6.0)
    return ConvolutionOperator({"num_output_maps": maps, "kernel_shape": list(kernel), "group": c, **params}, weights)


def _out_shape(op: ConvolutionOperator, x_shape: tuple[int, ...]) -> tuple[int, ...]:
    sizes, _, _ = op.window.resolve(x_shape[2:])
    return (x_shape[0], op.maps, *sizes)


def _numpy_taps(op: ConvolutionOperator, x: np.ndarray, monkeypatch: pytest.MonkeyPatch, residual=None) -> np.ndarray:
    """The NumPy tap-sum kernel's result (at every map size)."""
    monkeypatch.setattr(conv, "TAPS_MIN_COLUMN_BYTES", 0)
    out = np.empty(_out_shape(op, x.shape), np.float32)
    inputs = [x] if residual is None else [x, residual]
    op.prepare([a.shape for a in inputs], [out.shape])
    assert op._depthwise is not None or all(k == 1 for k in op.window.kernel)  # a 1x1: one product per output
    op.run(inputs, [out])
    return out


def _loop(op: ConvolutionOperator, x: np.ndarray, residual: np.ndarray | None = None) -> np.ndarray:
    """The compiled loop's result, through the channels-last buffers (NCHW view of the HWC output)."""
    shape = _out_shape(op, x.shape)
    x_hwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    out = np.full((shape[0], *shape[2:], shape[1]), np.nan, np.float32)
    formats = HWC if residual is None else [TensorFormat.HWC, TensorFormat.LINEAR, TensorFormat.HWC]
    run = depthwise_numba.depthwise_channels_last(op, x_hwc, out, residual, formats)
    assert run is not None
    run()
    return out.transpose(0, 3, 1, 2)


#: (input shape, kernel, params): odd sizes, strides 1/2/(2, 1), dilation, padding at one end, channel counts
#: not a multiple of the vector width, one channel, a map narrower than the kernel, kernels above the unrolled size
SHAPES = {
    "3x3": ((1, 17, 9, 11), (3, 3), {"pads": [1, 1, 1, 1]}),
    "3x3_stride2": ((2, 33, 13, 10), (3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    "5x5_stride2_1": ((1, 24, 6, 21), (5, 5), {"pads": [2, 2, 2, 2], "strides": [2, 1]}),
    "5x5_short_map": ((1, 40, 2, 19), (5, 5), {"pads": [2, 2, 2, 2]}),
    "3x5_dilated": ((1, 5, 12, 14), (3, 5), {"pads": [2, 0, 1, 3], "dilations": [2, 1]}),
    "3x3_dilated_stride2": ((1, 16, 15, 15), (3, 3), {"pads": [2, 2, 2, 2], "dilations": [2, 2], "strides": [2, 2]}),
    "3x3_no_pad": ((1, 1, 7, 8), (3, 3), {}),
    "3x3_end_pad": ((1, 19, 8, 9), (3, 3), {"pads": [0, 0, 1, 1], "strides": [2, 2]}),
    "same_upper": ((1, 7, 9, 10), (3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    "7x7": ((1, 9, 11, 12), (7, 7), {"pads": [3, 3, 3, 3]}),
    "9x9_generic": ((1, 6, 12, 13), (9, 9), {"pads": [4, 4, 4, 4]}),
    "1x1": ((1, 20, 5, 6), (1, 1), {}),
    "wider_than_map": ((1, 4, 3, 3), (5, 5), {"pads": [3, 3, 3, 3]}),
}


@pytest.mark.parametrize("case", sorted(SHAPES))
@pytest.mark.parametrize("activation", ["", "RELU", "CLIP", "HARD_SWISH"])
def test_loop_is_the_numpy_tap_sums_bit_for_bit(case: str, activation: str, monkeypatch) -> None:
    shape, kernel, params = SHAPES[case]
    op = _operator(shape[1], kernel, activation=activation, **params)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(_loop(op, x), _numpy_taps(op, x, monkeypatch))


@pytest.mark.parametrize(
    ("activation", "alpha", "beta"),
    [("HARD_SIGMOID", 0.2, 0.5), ("LEAKY_RELU", 0.1, 0.0), ("CLIP", -0.7, 0.9), ("", 0.0, 0.0)],
)
@pytest.mark.parametrize("multiplier", [1, 2])
@pytest.mark.parametrize("bias", [True, False])
def test_activation_parameters_multiplier_and_no_bias(activation, alpha, beta, multiplier, bias, monkeypatch) -> None:
    params = {"pads": [1, 2, 1, 0], "strides": [1, 2], "activation": activation}
    op = _operator(6, (3, 3), multiplier, bias, activation_alpha=alpha, activation_beta=beta, **params)
    x = np.random.default_rng(2).standard_normal((2, 6, 9, 10)).astype(np.float32)
    np.testing.assert_array_equal(_loop(op, x), _numpy_taps(op, x, monkeypatch))


@pytest.mark.parametrize("activation", ["SIGMOID", "TANH"])
def test_activation_outside_the_loop_runs_as_numpy_does(activation: str, monkeypatch) -> None:
    op = _operator(12, (3, 3), pads=[1, 1, 1, 1], activation=activation, post_scale=1.5, post_shift=-0.25)
    x = np.random.default_rng(3).standard_normal((1, 12, 8, 9)).astype(np.float32)
    np.testing.assert_array_max_ulp(_loop(op, x), _numpy_taps(op, x, monkeypatch), maxulp=1)


def test_residual_and_scalar_map(monkeypatch) -> None:
    op = _operator(10, (3, 3), pads=[1, 1, 1, 1], activation="RELU", residual=True, post_scale=2.0, post_shift=0.5)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 10, 7, 8)).astype(np.float32)
    residual = rng.standard_normal((1, 10, 7, 8)).astype(np.float32)
    np.testing.assert_array_equal(_loop(op, x, residual), _numpy_taps(op, x, monkeypatch, residual))


def test_fused_activation_with_scalar_map(monkeypatch) -> None:
    op = _operator(18, (5, 5), pads=[2, 2, 2, 2], activation="HARD_SWISH", post_scale=0.5, post_shift=1.0)
    x = np.random.default_rng(5).standard_normal((1, 18, 6, 7)).astype(np.float32)
    np.testing.assert_array_equal(_loop(op, x), _numpy_taps(op, x, monkeypatch))


def test_reads_the_handed_over_tensor_and_empties_the_output_slot() -> None:
    torch = pytest.importorskip("torch")
    op = _operator(16, (3, 3), pads=[1, 1, 1, 1])
    x = np.random.default_rng(6).standard_normal((1, 16, 6, 7)).astype(np.float32)
    x_hwc, out = np.zeros((1, 6, 7, 16), np.float32), np.empty((1, 6, 7, 16), np.float32)
    run = depthwise_numba.depthwise_channels_last(op, x_hwc, out, None, HWC)
    assert run is not None
    hand_over(x_hwc).tensor = torch.from_numpy(x).contiguous(memory_format=torch.channels_last)  # not in the buffer
    hand_over(out).tensor = torch.zeros(1, 16, 6, 7)  # stale: the loop writes the buffer
    run()
    assert hand_over(out).tensor is None
    np.testing.assert_array_equal(out.transpose(0, 3, 1, 2), _loop(op, x))


def test_declines_what_it_does_not_compute(monkeypatch) -> None:
    op = _operator(8, (3, 3), pads=[1, 1, 1, 1])
    x, out = np.zeros((1, 5, 5, 8), np.float32), np.zeros((1, 5, 5, 8), np.float32)
    assert depthwise_numba.depthwise_channels_last(op, x, out, None, HWC) is not None
    linear = [TensorFormat.LINEAR, TensorFormat.HWC]
    assert depthwise_numba.depthwise_channels_last(op, x, out, None, linear) is None
    assert depthwise_numba.depthwise_channels_last(op, x.astype(np.float64), out, None, HWC) is None
    grouped = ConvolutionOperator(
        {"num_output_maps": 8, "kernel_shape": [3, 3], "group": 4, "pads": [1, 1, 1, 1]},
        {"kernel": pack_conv_kernel(np.ones((8, 2, 3, 3), np.float32), 4)},
    )
    assert depthwise_numba.depthwise_channels_last(grouped, x, out, None, HWC) is None
    monkeypatch.setattr(depthwise_numba, "NUMBA_MAX_MACS", 5 * 5 * 8 * 9 - 1)
    assert depthwise_numba.depthwise_channels_last(op, x, out, None, HWC) is None


@pytest.mark.parametrize("switch", ["0", "off", "false", "no"])
def test_switch_and_absent_numba_leave_the_layer_to_the_other_kernels(switch: str, monkeypatch) -> None:
    op = _operator(8, (3, 3), pads=[1, 1, 1, 1])
    x, out = np.zeros((1, 5, 5, 8), np.float32), np.zeros((1, 5, 5, 8), np.float32)
    monkeypatch.setenv(depthwise_numba.ENV_SWITCH, switch)
    assert not depthwise_numba.available()
    assert depthwise_numba.depthwise_channels_last(op, x, out, None, HWC) is None
    monkeypatch.delenv(depthwise_numba.ENV_SWITCH)
    monkeypatch.setattr(depthwise_numba, "_STATE", {"module": None, "tried": True})  # as where numba is absent
    assert not depthwise_numba.available()
    assert depthwise_numba.depthwise_channels_last(op, x, out, None, HWC) is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0, 3, 0), "kernel size 0x3; both sides must be at least 1"),
        ((3, -1, 0), "kernel size 3x-1; both sides must be at least 1"),
        ((3, 3, 6), "activation code 6; valid: 0 to 5"),
        ((3, 3, -1), "activation code -1; valid: 0 to 5"),
    ],
)
def test_loops_for_rejects_bad_arguments(args: tuple[int, int, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        depthwise_numba.loops().loops_for(*args)


def _chain_model() -> object:
    """1x1 -> depthwise 5x5 stride (2, 1) + hard-swish -> 1x1 + ReLU: the depthwise layer inside a channels-last run
    (PP-OCR cls's shapes, scaled down)."""
    rng = np.random.default_rng(7)
    inits, nodes = [], []

    def conv_node(x: str, y: str, c: int, m: int, k: int, group: int = 1, **attrs: object) -> None:
        inits.append(numpy_helper.from_array((rng.standard_normal((m, c // group, k, k)) * 0.3).astype(np.float32), y + "w"))
        inits.append(numpy_helper.from_array(rng.standard_normal(m).astype(np.float32), y + "b"))
        nodes.append(helper.make_node("Conv", [x, y + "w", y + "b"], [y], kernel_shape=[k, k], group=group, **attrs))

    conv_node("x", "c1", 8, 24, 1)
    conv_node("c1", "c2", 24, 24, 5, group=24, strides=[2, 1], pads=[2, 2, 2, 2])
    nodes.append(helper.make_node("HardSwish", ["c2"], ["h2"]))
    conv_node("h2", "c3", 24, 16, 1)
    nodes.append(helper.make_node("Relu", ["c3"], ["y"]))
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 6, 20])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 3, 20])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _runs_the_loop(context: object) -> bool:
    """Whether a convolution of ``context`` runs the compiled loop."""
    nodes = [step.node for step in context._executor.steps]  # type: ignore[attr-defined]
    kernels = [node._torch_call for node in nodes if isinstance(node, ConvolutionOperator)]
    return any(k is not None and k.__module__ == depthwise_numba.__name__ for k in kernels)


def test_engine_runs_the_loop_in_a_channels_last_run_and_loads_without_numba(monkeypatch) -> None:
    pytest.importorskip("torch")
    ort = pytest.importorskip("onnxruntime")
    model = _chain_model()
    x = np.random.default_rng(8).standard_normal((1, 8, 6, 20)).astype(np.float32)
    monkeypatch.setenv("PLUGRT_TORCH", "nhwc")
    engine = plugrt.compile(model, device="cpu")
    got = engine(x=x)["y"]
    assert _runs_the_loop(engine.context)
    expected = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, expected, rtol=0, atol=2e-6 * np.abs(expected).max())
    blob = engine.serialize()
    monkeypatch.setattr(depthwise_numba, "_STATE", {"module": None, "tried": True})  # numba absent where it loads
    context = plugrt.Runtime(plugrt.Logger(plugrt.Logger.ERROR)).deserialize_cuda_engine(blob).create_execution_context()
    out = np.empty_like(got)
    context.set_tensor_address("x", x.ctypes.data)
    context.set_tensor_address("y", out.ctypes.data)
    assert context.execute_async_v3(0)
    assert not _runs_the_loop(context)
    np.testing.assert_allclose(out, expected, rtol=0, atol=2e-6 * np.abs(expected).max())


def _squeeze(c: int, m: int, acts: tuple[str, str], bias: bool = True):
    from plugrt.ops.squeeze_excitation import SqueezeExcitationOperator

    rng = np.random.default_rng(c + m)
    weights = {"kernel1": rng.standard_normal((m, c)).astype(np.float32)}
    weights["kernel2"] = rng.standard_normal((c, m)).astype(np.float32)
    if bias:
        weights["bias1"] = rng.standard_normal(m).astype(np.float32)
        weights["bias2"] = rng.standard_normal(c).astype(np.float32)
    params = {"activation1": acts[0], "activation2": acts[1], "activation2_alpha": 0.2, "activation2_beta": 0.5}
    return SqueezeExcitationOperator(params, weights)


@pytest.mark.parametrize(
    ("shape", "m", "acts", "bias"),
    [
        ((1, 32, 6, 96), 8, ("RELU", "HARD_SIGMOID"), True),
        ((2, 200, 2, 9), 50, ("RELU", "HARD_SIGMOID"), True),
        ((1, 17, 5, 3), 4, ("", "CLIP"), False),
        ((3, 5, 1, 1), 1, ("LEAKY_RELU", ""), True),
    ],
)
def test_squeeze_excitation_loop_against_the_numpy_kernel(shape, m, acts, bias) -> None:
    """Within float32 rounding of the NumPy kernel (its mean sums pairwise, the loop in pixel order)."""
    from plugrt.ops.squeeze_numba import squeeze_excitation_channels_last

    op = _squeeze(shape[1], m, acts, bias)
    x = np.random.default_rng(9).standard_normal(shape).astype(np.float32)
    want = np.empty_like(x)
    op.run([x], [want])
    x_hwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    out = np.full_like(x_hwc, np.nan)
    run = squeeze_excitation_channels_last(op._acts, (op._w1, op._b1, op._w2, op._b2), x_hwc, out, HWC)
    assert run is not None
    hand_over(out).tensor = object()  # stale: the loop writes the buffer
    run()
    assert hand_over(out).tensor is None
    np.testing.assert_allclose(out.transpose(0, 3, 1, 2), want, rtol=1e-5, atol=2e-6 * np.abs(want).max())


def test_squeeze_excitation_loop_declines(monkeypatch) -> None:
    from plugrt.ops.squeeze_numba import squeeze_excitation_channels_last

    op = _squeeze(8, 2, ("RELU", "SIGMOID"))  # sigmoid: torch's kernel
    weights = (op._w1, op._b1, op._w2, op._b2)
    x, out = np.zeros((1, 3, 3, 8), np.float32), np.zeros((1, 3, 3, 8), np.float32)
    assert squeeze_excitation_channels_last(op._acts, weights, x, out, HWC) is None
    acts = [("RELU", 0.0, 0.0), ("HARD_SIGMOID", 0.2, 0.5)]
    assert squeeze_excitation_channels_last(acts, weights, x, out, HWC) is not None
    assert squeeze_excitation_channels_last(acts, weights, x, out, [TensorFormat.LINEAR, TensorFormat.HWC]) is None
    monkeypatch.setenv(depthwise_numba.ENV_SWITCH, "0")
    assert squeeze_excitation_channels_last(acts, weights, x, out, HWC) is None


def test_squeeze_loop_rejects_bad_activation_codes() -> None:
    module = depthwise_numba.compiled_module("squeeze_numba_loops")
    with pytest.raises(ValueError, match="activation code 7; valid: 0 to 5"):
        module.loop_for(1, 7)
