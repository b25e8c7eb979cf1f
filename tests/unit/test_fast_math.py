"""The float32 erf / GELU kernels: within 0.55 ulp of float64 erf, at least as accurate as onnxruntime's."""

from __future__ import annotations

import math

import numpy as np
import pytest

from plugrt.ops.activation import ActivationOperator
from plugrt.ops.fast_math import BLOCK, erf_into, gelu_erf_into
from plugrt.ops.unary import UnaryOperator

_erf64 = np.vectorize(math.erf, otypes=[np.float64])


def _points() -> np.ndarray:
    dense = np.linspace(-6, 6, 120_001, dtype=np.float32)
    tiny = np.array([0.0, -0.0, 1e-30, -1e-20, 1e-7, 3.9199, 3.9201, np.inf, -np.inf], np.float32)
    return np.concatenate([dense, tiny])


def _ulps(got: np.ndarray, exact: np.ndarray) -> float:
    finite = np.isfinite(exact)
    spacing = np.spacing(np.abs(exact[finite]).astype(np.float32)).astype(np.float64)
    return float((np.abs(got[finite].astype(np.float64) - exact[finite]) / spacing).max())


def test_erf_is_within_0_55_ulp_of_float64() -> None:
    x = _points()
    out = np.empty_like(x)
    erf_into(x, out)
    assert _ulps(out, _erf64(x.astype(np.float64))) <= 0.55
    assert out[-2] == 1.0 and out[-1] == -1.0


def test_erf_is_at_least_as_accurate_as_onnxruntime() -> None:
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Erf", ["x"], ["y"])],
        "erf",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 10
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.linspace(-4, 4, 80_001, dtype=np.float32)
    exact = _erf64(x.astype(np.float64))
    theirs = session.run(None, {"x": x})[0]
    ours = np.empty_like(x)
    erf_into(x, ours)
    assert _ulps(ours, exact) <= _ulps(theirs, exact)


def test_gelu_matches_float64_and_handles_blocks_views_and_float16() -> None:
    x = np.linspace(-8, 8, 3 * BLOCK + 17, dtype=np.float32)
    x64 = x.astype(np.float64)
    exact = 0.5 * x64 * (1 + _erf64(x64 / math.sqrt(2)))
    out = np.empty_like(x)
    gelu_erf_into(x, out)
    # relative, or absolute where 1 + erf cancels (1e-7: the precision of 1 + erf in float32, as in onnxruntime)
    np.testing.assert_allclose(out, exact, rtol=3e-7, atol=1e-7)
    assert np.all(out[x < -5.6] == 0) or np.abs(out[x < -5.6]).max() < 1e-7
    strided = np.empty((x.size, 2), np.float32)[:, 0]  # a non-contiguous output
    gelu_erf_into(x, strided)
    np.testing.assert_array_equal(strided, out)
    in_place = x.copy()
    gelu_erf_into(in_place, in_place)
    np.testing.assert_array_equal(in_place, out)
    half = np.empty(x.size, np.float16)
    ActivationOperator({"type": "GELU_ERF"}).run([x.astype(np.float16)], [half])
    np.testing.assert_allclose(half, exact, rtol=2e-3, atol=1e-3)


def test_the_unary_erf_operator_uses_the_kernel_for_float32_and_float64_stays_exact() -> None:
    x = np.linspace(-3, 3, 1001)
    out64 = np.empty_like(x)
    UnaryOperator({"op": "ERF"}).run([x], [out64])
    np.testing.assert_allclose(out64, _erf64(x), rtol=1e-13, atol=1e-15)
    out32 = np.empty(x.size, np.float32)
    UnaryOperator({"op": "ERF"}).run([x.astype(np.float32)], [out32])
    assert _ulps(out32, _erf64(x.astype(np.float32).astype(np.float64))) <= 0.55


@pytest.mark.parametrize("shift", [0.0, 55.0, -59.0, 100.0, -300.0])
def test_last_axis_softmax_matches_float64_with_and_without_the_subtraction(shift: float) -> None:
    """Rows whose maximum is within +-60 skip subtracting it; others subtract; both match float64."""
    from plugrt.ops.softmax import SoftmaxOperator

    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 5, 7000)) * 4 + shift).astype(np.float32)  # several blocks of rows
    x[0, 0, :] += 80  # one row far off: its block subtracts
    op = SoftmaxOperator({"axes": 1 << 2})
    op.prepare([x.shape], [x.shape])
    out = np.empty_like(x)
    op.run([x], [out])
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis=-1, keepdims=True), rtol=2e-6, atol=1e-12)
    op.run([x], [x])  # in place
    np.testing.assert_array_equal(x, out)


@pytest.mark.parametrize("shift", [0.0, 8.0, 30.0, -12.0])
def test_half_softmax_is_finite_where_its_exp_would_overflow(shift: float) -> None:
    """HALF rows always subtract their maximum: exp overflows HALF past 11 and underflows below -17."""
    from plugrt.ops.softmax import SoftmaxOperator

    rng = np.random.default_rng(1)
    x = (rng.standard_normal((4, 64)) * 3 + shift).astype(np.float16)
    op = SoftmaxOperator({"axes": 1 << 1})
    op.prepare([x.shape], [x.shape])
    out = np.empty_like(x)
    op.run([x], [out])
    assert np.isfinite(out).all()
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(out.astype(np.float64), e / e.sum(axis=-1, keepdims=True), rtol=2e-3, atol=2e-4)


def test_pow_by_small_integers_imports_as_products() -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    import plugrt as trt

    for power in (1.0, 2.0, 3.0, 4.0, 2.5):
        graph = helper.make_graph(
            [helper.make_node("Pow", ["x", "p"], ["y"])],
            "pow",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3])],
            [numpy_helper.from_array(np.array(power, np.float32), "p")],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
        model.ir_version = 10
        compiled = trt.compile(onnx.ModelProto.FromString(model.SerializeToString()))
        uses_power = any(layer.params.get("op") == "POW" for layer in compiled.engine.plan.layers)
        assert uses_power == (power == 2.5)
        x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(4, 3)
        np.testing.assert_allclose(compiled(x)["y"], np.power(x.astype(np.float64), power), rtol=1e-6)
