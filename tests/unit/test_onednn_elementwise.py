"""oneDNN's eltwise, layer-normalization and global-pooling primitives called directly (``ops/onednn_elementwise.py``,
``ops/onednn_pooling.py``), and engines whose every layer oneDNN or NumPy runs, which never import torch. Skips
without the library."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper, save

import plugrt
from onednn_support import ONEDNN_TESTS
from plugrt.core.logger import ILogger, Severity
from plugrt.core.types import DataType, TensorFormat
from plugrt.ops import onednn
from plugrt.ops.activation import ActivationOperator
from plugrt.ops.normalization import NormalizationOperator
from plugrt.ops.onednn_elementwise import eltwise_onednn, layer_norm_onednn
from plugrt.ops.onednn_pooling import global_pooling_onednn
from plugrt.ops.pooling import GlobalPoolingOperator
from plugrt.ops.unary import UnaryOperator

pytestmark = ONEDNN_TESTS

RNG = np.random.default_rng(11)
LINEAR, HWC = TensorFormat.LINEAR, TensorFormat.HWC


@pytest.fixture(autouse=True)
def _tactic_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLUGRT_TORCH", "1")  # (the tactic's switch turns its direct kernels off too)


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf)(x)


REFERENCES = {
    "GELU_ERF": lambda x, a, b: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))),
    "GELU_TANH": lambda x, a, b: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3))),
    "SIGMOID": lambda x, a, b: 1.0 / (1.0 + np.exp(-x)),
    "TANH": lambda x, a, b: np.tanh(x),
    "LEAKY_RELU": lambda x, a, b: np.where(x >= 0, x, a * x),
    "HARD_SWISH": lambda x, a, b: x * np.clip(x / 6.0 + 0.5, 0.0, 1.0),
}


def _activation(kind: str, alpha: float = 0.0) -> ActivationOperator:
    return ActivationOperator({"type": kind, "alpha": alpha})


def _run_activation(op: ActivationOperator, x: np.ndarray, out: np.ndarray) -> None:
    kernel = op.direct_kernel([x], [out])
    assert kernel is not None
    kernel()


@pytest.mark.parametrize("kind", sorted(REFERENCES))
def test_activations_against_float64(kind: str) -> None:
    op = _activation(kind, 0.125)
    x = (RNG.standard_normal((37, 129)) * 4).astype(np.float32)
    out = np.full_like(x, np.nan)
    _run_activation(op, x, out)
    want = REFERENCES[kind](x.astype(np.float64), 0.125, 0.0)
    np.testing.assert_allclose(out, want, rtol=0, atol=2e-6 * np.maximum(1.0, np.abs(want)).max())
    _run_activation(op, x, x)  # in place
    np.testing.assert_array_equal(x, out)


def test_gelu_special_values_are_pytorch_s() -> None:
    """GELU of -inf is NaN in both forms and of +inf in the erf form, as PyTorch's kernel and onnxruntime's give."""
    x = np.array([np.nan, np.inf, -np.inf, 0.0], np.float32)
    for kind, want in (("GELU_ERF", [np.nan, np.nan, np.nan, 0.0]), ("GELU_TANH", [np.nan, np.inf, np.nan, 0.0])):
        out = np.empty_like(x)
        _run_activation(_activation(kind), x, out)
        np.testing.assert_array_equal(out, np.array(want, np.float32))


@pytest.mark.parametrize("kind", ["RELU", "CLIP", "HARD_SIGMOID"])
def test_activations_that_would_give_a_nan_a_number_stay_with_the_other_kernels(kind: str) -> None:
    op = _activation(kind)
    assert not op.direct_supports([DataType.FLOAT], [(4, 4)], [False])
    assert op.direct_kernel([np.zeros(4, np.float32)], [np.zeros(4, np.float32)]) is None
    x = np.array([np.nan], np.float32)  # (what oneDNN's eltwise would make of it: a number)
    out = np.empty_like(x)
    name, alpha, beta = onednn.ACTIVATIONS[kind](-1.0, 1.0)
    kernel = eltwise_onednn(name, alpha, beta, x, out)
    assert kernel is not None
    kernel()
    assert not np.isnan(out).any()


def test_square_root_and_the_unary_functions_it_declines() -> None:
    x = np.abs(RNG.standard_normal(1000)).astype(np.float32)
    out = np.empty_like(x)
    op = UnaryOperator({"op": "SQRT"})
    kernel = op.direct_kernel([x], [out])
    assert kernel is not None
    kernel()
    np.testing.assert_array_equal(out, np.sqrt(x))
    for name in ("EXP", "LOG", "ERF"):  # oneDNN's exp gives a NaN +inf; its log is off on subnormals
        unary = UnaryOperator({"op": name})
        assert not unary.direct_supports([DataType.FLOAT], [(4,)], [False])
        assert unary.direct_kernel([x], [out]) is None


def test_eltwise_declines_what_it_cannot_read() -> None:
    x = np.zeros((4, 6), np.float32)
    assert eltwise_onednn("tanh", 0, 0, x.astype(np.float64), np.zeros((4, 6))) is None
    assert eltwise_onednn("tanh", 0, 0, x[:, ::2], np.zeros((4, 3), np.float32)) is None  # not dense
    assert eltwise_onednn("tanh", 0, 0, x, np.zeros((4, 5), np.float32)) is None  # another size
    assert eltwise_onednn("tanh", 0, 0, np.zeros(0, np.float32), np.zeros(0, np.float32)) is None


def _reference_layer_norm(x: np.ndarray, axis: int, scale: np.ndarray | None, bias: np.ndarray | None) -> np.ndarray:
    axes = tuple(range(axis, x.ndim))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x64 - mean) / np.sqrt(var + 1e-5)
    return y * (1.0 if scale is None else scale) + (0.0 if bias is None else bias)


@pytest.mark.parametrize("axis", [-1, 1])
@pytest.mark.parametrize("bias", [True, False])
def test_layer_normalization_against_float64(axis: int, bias: bool) -> None:
    x = (RNG.standard_normal((3, 5, 48)) * 3 + 1).astype(np.float32)
    start = axis % x.ndim
    scale_value = RNG.standard_normal(x.shape[start:]).astype(np.float32)
    bias_value = RNG.standard_normal(x.shape[start:]).astype(np.float32) if bias else None
    op = NormalizationOperator({"mode": "layer", "axis": axis, "epsilon": 1e-5, "has_bias": bias})
    inputs = [x, scale_value, *([bias_value] if bias else [])]
    out = np.full_like(x, np.nan)
    kernel = layer_norm_onednn(op, inputs, out)
    assert kernel is not None
    kernel()
    want = _reference_layer_norm(x, start, scale_value, bias_value)
    np.testing.assert_allclose(out, want, rtol=0, atol=2e-5 * np.abs(want).max())


@pytest.mark.parametrize("mode, groups", [("instance", 0), ("group", 2), ("group", 1)])
@pytest.mark.parametrize("bias", [True, False])
def test_instance_and_group_normalization_against_float64(mode: str, groups: int, bias: bool) -> None:
    """Rows of a channel's (a group's) elements through the primitive, the per-channel scale and bias after it."""
    x = (RNG.standard_normal((2, 6, 5, 7)) * 2 + 3).astype(np.float32)
    scale, shift = RNG.standard_normal(6).astype(np.float32), RNG.standard_normal(6).astype(np.float32)
    params = {"mode": mode, "epsilon": 1e-5, "has_bias": bias, **({"num_groups": groups} if groups else {})}
    op = NormalizationOperator(params)
    out = np.full_like(x, np.nan)
    kernel = layer_norm_onednn(op, [x, scale, *([shift] if bias else [])], out)
    assert kernel is not None
    kernel()
    count = groups or 6
    grouped = x.astype(np.float64).reshape(2, count, -1)
    mean, var = grouped.mean(axis=2, keepdims=True), grouped.var(axis=2, keepdims=True)
    want = ((grouped - mean) / np.sqrt(var + 1e-5)).reshape(x.shape) * scale.reshape(1, 6, 1, 1)
    want = want + (shift.reshape(1, 6, 1, 1) if bias else 0.0)
    np.testing.assert_allclose(out, want, rtol=0, atol=2e-5 * np.abs(want).max())


def test_layer_normalization_declines_what_it_does_not_compute() -> None:
    x, out = np.zeros((2, 8), np.float32), np.zeros((2, 8), np.float32)
    scale = np.ones(8, np.float32)
    op = NormalizationOperator({"mode": "layer", "axis": -1, "epsilon": 1e-5, "has_bias": False})
    assert layer_norm_onednn(op, [x, np.ones((2, 8), np.float32)], out) is None  # a scale of another shape
    assert layer_norm_onednn(op, [x, np.ones((1, 8), np.float32)], out) is not None  # leading ones: taken
    assert layer_norm_onednn(op, [x, scale[::1].reshape(8)[::-1]], out) is None  # not dense
    assert layer_norm_onednn(op, [x.astype(np.float64), scale], out) is None
    assert layer_norm_onednn(op, [np.zeros((0, 8), np.float32), scale], np.zeros((0, 8), np.float32)) is None
    per_group = NormalizationOperator(
        {"mode": "group", "num_groups": 2, "per_group_affine": True, "epsilon": 1e-5, "has_bias": False}
    )
    assert not per_group.direct_supports([DataType.FLOAT] * 2, [(2, 8, 4), (2,)], [False, True])
    x3 = np.zeros((2, 8, 4), np.float32)
    assert layer_norm_onednn(per_group, [x3, np.ones(2, np.float32)], np.zeros_like(x3)) is None
    instance = NormalizationOperator({"mode": "instance", "epsilon": 1e-5, "has_bias": False})
    assert layer_norm_onednn(instance, [x3, np.ones(3, np.float32)], np.zeros_like(x3)) is None  # not one a channel


@pytest.mark.parametrize("mode", ["MAX", "AVERAGE"])
@pytest.mark.parametrize("shape", [(2, 16, 7, 5), (2, 16, 33), (1, 8, 3, 4, 5)])
def test_global_pooling_of_any_rank(mode: str, shape: tuple[int, ...]) -> None:
    op = GlobalPoolingOperator({"mode": mode})
    x = RNG.standard_normal(shape).astype(np.float32)
    out = np.full((*shape[:2], *([1] * (len(shape) - 2))), np.nan, np.float32)
    kernel = global_pooling_onednn(op.mode, x, out, [LINEAR, LINEAR])
    assert kernel is not None
    kernel()
    axes = tuple(range(2, len(shape)))
    want = x.max(axis=axes, keepdims=True) if mode == "MAX" else x.astype(np.float64).mean(axis=axes, keepdims=True)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
    if len(shape) == 4:  # channels-last input: the output [N, C, 1, 1] is the same bytes in either layout
        stored = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
        out[...] = np.nan
        kernel = global_pooling_onednn(op.mode, stored, out, [HWC, LINEAR])
        assert kernel is not None
        kernel()
        np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
    else:
        assert global_pooling_onednn(op.mode, x, out, [HWC, LINEAR]) is None  # HWC is 4-D only


def _write_models(folder: Path) -> list[Path]:
    """A small CNN (convolution, ReLU, MAX pool, global AVERAGE pool, Gemm) and a transformer block's pieces (MatMul
    with its bias, LayerNormalization, GELU) as ONNX files."""
    n = helper.make_node
    cnn = helper.make_graph(
        [
            n("Conv", ["x", "k", "kb"], ["c"], pads=[1, 1, 1, 1]),
            n("Relu", ["c"], ["r"]),
            n("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
            n("GlobalAveragePool", ["p"], ["g"]),
            n("Flatten", ["g"], ["f"]),
            n("Gemm", ["f", "w", "b"], ["y"], transB=1),
        ],
        "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [
            numpy_helper.from_array(RNG.standard_normal((8, 3, 3, 3)).astype(np.float32), "k"),
            numpy_helper.from_array(RNG.standard_normal(8).astype(np.float32), "kb"),
            numpy_helper.from_array(RNG.standard_normal((10, 8)).astype(np.float32), "w"),
            numpy_helper.from_array(RNG.standard_normal(10).astype(np.float32), "b"),
        ],
    )
    block = helper.make_graph(
        [
            n("MatMul", ["x", "w"], ["m"]),
            n("Add", ["m", "b"], ["h"]),
            n("LayerNormalization", ["h", "s", "t"], ["l"], axis=-1),
            n("Gelu", ["l"], ["y"]),
        ],
        "block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 7, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [
            numpy_helper.from_array(RNG.standard_normal((32, 48)).astype(np.float32), "w"),
            numpy_helper.from_array(RNG.standard_normal(48).astype(np.float32), "b"),
            numpy_helper.from_array(RNG.standard_normal(48).astype(np.float32), "s"),
            numpy_helper.from_array(RNG.standard_normal(48).astype(np.float32), "t"),
        ],
    )
    paths = []
    for name, graph in (("cnn", cnn), ("block", block)):
        path = folder / f"{name}.onnx"
        save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]), path)
        paths.append(path)
    return paths


def test_engines_that_oneDNN_runs_whole_never_import_torch(tmp_path: Path) -> None:
    """With PyTorch installed and its tactic on, a CNN and a transformer block whose layers oneDNN's direct kernels
    (or NumPy) run are built, timed, loaded and run without importing torch (~190 MB of memory), with onnxruntime's
    results."""
    pytest.importorskip("torch")
    ort = pytest.importorskip("onnxruntime")
    paths = _write_models(tmp_path)
    script = textwrap.dedent(
        """
        import sys
        import numpy as np
        import plugrt
        rng = np.random.default_rng(0)
        for path, shape in zip(sys.argv[1:3], [(2, 3, 16, 16), (2, 7, 32)]):
            model = plugrt.compile(path)
            x = rng.standard_normal(shape).astype(np.float32)
            np.save(path + ".x.npy", x)
            np.save(path + ".y.npy", model(x=x)["y"])
            tactics = sorted({layer.tactic for layer in model.engine.plan.layers})
            print(path, tactics)
        print("torch imported:", "torch" in sys.modules)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "PLUGRT_TORCH": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert "torch imported: False" in done.stdout, done.stdout
    for path in paths:
        x, got = np.load(f"{path}.x.npy"), np.load(f"{path}.y.npy")
        want = ort.InferenceSession(str(path)).run(None, {"x": x})[0]
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * np.abs(want).max())


class _Collect(ILogger):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[tuple[Severity, str]] = []

    def log(self, severity: Severity, msg: str) -> None:
        self.messages.append((severity, msg))


def _graph(op: str) -> object:
    graph = helper.make_graph(
        [helper.make_node(op, ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4096])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4096])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_without_torch_the_operators_with_a_direct_kernel_still_offer_the_tactic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where torch is absent but oneDNN's library is there, an operator with a direct kernel offers the tactic (run by
    that kernel, no warning at load), one without offers NumPy only; a plan whose tactic layers run PyTorch's kernels
    warns, as before."""
    from plugrt.ops import torch_cpu

    monkeypatch.setitem(torch_cpu._STATE, "tried", True)
    monkeypatch.setitem(torch_cpu._STATE, "module", None)
    assert not torch_cpu.available() and torch_cpu.direct_runs(np)
    assert _activation("SIGMOID").tactics([DataType.FLOAT], [(2, 4096)], [False]) == [0, 1]
    assert UnaryOperator({"op": "EXP"}).tactics([DataType.FLOAT], [(2, 4096)], [False]) == [0]
    monkeypatch.setenv("PLUGRT_TORCH", "always")
    for op, tactic in (("Sigmoid", 1), ("Exp", 0)):
        logger = _Collect()
        engine = plugrt.Runtime(logger).deserialize_cuda_engine(plugrt.compile(_graph(op)).serialize())
        assert [layer.tactic for layer in engine.plan.layers] == [tactic]
        assert not [m for s, m in logger.messages if s == Severity.WARNING]
    x = RNG.standard_normal((2, 4096)).astype(np.float32)
    compiled = plugrt.compile(_graph("Sigmoid"))
    np.testing.assert_allclose(compiled(x=x)["y"], 1 / (1 + np.exp(-x.astype(np.float64))), rtol=0, atol=1e-6)
    assert {getattr(fn, "__module__", "") for _, fn, _ in compiled.context._executor._calls} == {
        "plugrt.ops.onednn_buffers"
    }


def test_softmax_over_the_last_axis_and_its_special_values() -> None:
    """Within 2e-7 of float64 over the last axis; a row holding +inf or NaN is NaN there and 0 elsewhere (PyTorch's
    and NumPy's kernels make the whole row NaN), a row of -inf is NaN throughout; another axis is declined (oneDNN
    3.2 has only its reference kernel there); a scaled one is NumPy's product, then the primitive."""
    from plugrt.ops.onednn_elementwise import softmax_onednn
    from plugrt.ops.softmax import SoftmaxOperator

    x = (RNG.standard_normal((3, 5, 40)) * 10).astype(np.float32)
    out = np.empty_like(x)
    kernel = softmax_onednn(2, x, out)
    assert kernel is not None
    kernel()
    e = np.exp(x.astype(np.float64) - x.max(axis=2, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis=2, keepdims=True), rtol=0, atol=2e-7)
    special = np.array([[-np.inf] * 4, [1, np.inf, 2, 3], [1, np.nan, 2, 3], [1, -np.inf, 2, 3]], np.float32)
    got = np.empty_like(special)
    kernel = softmax_onednn(1, special, got)
    assert kernel is not None
    kernel()
    assert np.isnan(got[0]).all()
    for row in (1, 2):
        assert np.isnan(got[row, 1]) and np.array_equal(got[row, [0, 2, 3]], [0.0, 0.0, 0.0])
    np.testing.assert_allclose(got[3], [0.09003057, 0.0, 0.24472848, 0.6652409], rtol=1e-6)
    assert softmax_onednn(1, x, np.empty_like(x)) is None
    scaled = SoftmaxOperator({"axes": 4, "scaled": True})
    scaled.prepare([x.shape, ()], [x.shape])
    scale = np.array(0.37, np.float32)
    kernel = scaled.direct_kernel([x, scale], [out])
    assert kernel is not None
    kernel()
    unscaled = np.empty_like(x)
    softmax_onednn(2, x * scale, unscaled)()  # the unfused Mul, then the softmax: the same float operations
    np.testing.assert_array_equal(out, unscaled)
    assert not SoftmaxOperator({"axes": 2}).direct_supports([DataType.FLOAT], [(3, 5, 40)], [False])
