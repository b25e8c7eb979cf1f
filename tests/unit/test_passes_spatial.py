"""The ``spatial_pooling`` rule: ``ReduceMean`` / ``ReduceMax`` over H and W of an ``[N, C, H, W]`` tensor, keeping
them (how ``torch.onnx.export`` writes ``adaptive_avg_pool2d(x, 1)`` at opset 18), becomes ``global_pooling``.

Each fused engine is compared with the same model built with the rule off: MAX bit-identical, AVERAGE within a
few ulp (the sum runs over ``H*W`` values as one axis)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt
from plugrt.builder.fusion import DISABLE_ENV, PASS_NAMES

RNG = np.random.default_rng(31)


def _model(op: str, axes: list[int], keepdims: int, shape: tuple[int, ...], extra: list | None = None):
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node(op, ["r", "axes"], ["p"], keepdims=keepdims),
        helper.make_node("Neg", ["p"], ["y"]),
        *(extra or []),
    ]
    graph = helper.make_graph(
        nodes,
        "spatial",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(axes, np.int64), "axes")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 10
    return model


def _both(model, monkeypatch, x: np.ndarray, torch: str = "0"):
    monkeypatch.setenv("PLUGRT_TORCH", torch)
    monkeypatch.setenv(DISABLE_ENV, "")
    fused = plugrt.compile(model)
    monkeypatch.setenv(DISABLE_ENV, "spatial_pooling")
    plain = plugrt.compile(model)
    return fused, fused({"x": x})["y"], plain, plain({"x": x})["y"]


def _kinds(compiled) -> list[str]:
    return [layer.kind for layer in compiled.engine.plan.layers if layer.kind != "constant"]


def test_the_rule_is_a_named_pass() -> None:
    assert "spatial_pooling" in PASS_NAMES and PASS_NAMES.index("spatial_pooling") < PASS_NAMES.index(
        "squeeze_excitation"
    )


@pytest.mark.parametrize("axes", [[2, 3], [-1, -2], [3, 2]], ids=["2,3", "negative", "reversed"])
@pytest.mark.parametrize("op", ["ReduceMean", "ReduceMax"])
def test_a_spatial_reduction_that_keeps_its_axes_is_global_pooling(op: str, axes: list[int], monkeypatch) -> None:
    x = RNG.standard_normal((2, 5, 7, 9)).astype(np.float32)
    fused, got, plain, want = _both(_model(op, axes, 1, x.shape), monkeypatch, x)
    assert "global_pooling" in _kinds(fused) and "reduce" not in _kinds(fused)
    assert "reduce" in _kinds(plain) and "global_pooling" not in _kinds(plain)
    (pooling,) = [layer for layer in fused.engine.plan.layers if layer.kind == "global_pooling"]
    assert pooling.params["mode"] == ("MAX" if op == "ReduceMax" else "AVERAGE")
    assert got.shape == want.shape == (2, 5, 1, 1)
    if op == "ReduceMax":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=4e-7, atol=1e-7)
        np.testing.assert_allclose(got, -np.maximum(x, 0).mean(axis=(2, 3), keepdims=True), rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize(
    "op, axes, keepdims, shape",
    [
        ("ReduceMean", [2, 3], 0, (2, 5, 7, 9)),  # the axes are dropped: [N, C], not global pooling's [N, C, 1, 1]
        ("ReduceMean", [1, 2], 1, (2, 5, 7, 9)),  # not the spatial axes
        ("ReduceMean", [3], 1, (2, 5, 7, 9)),  # one spatial axis
        ("ReduceMean", [1, 2], 1, (2, 5, 7)),  # rank 3
        ("ReduceSum", [2, 3], 1, (2, 5, 7, 9)),  # no pooling mode sums
    ],
    ids=["dropped-axes", "other-axes", "one-axis", "rank-3", "sum"],
)
def test_other_reductions_stay_reductions(op: str, axes: list[int], keepdims: int, shape, monkeypatch) -> None:
    x = RNG.standard_normal(shape).astype(np.float32)
    fused, got, _, want = _both(_model(op, axes, keepdims, shape), monkeypatch, x)
    assert "global_pooling" not in _kinds(fused) and "reduce" in _kinds(fused)
    np.testing.assert_array_equal(got, want)


def test_a_squeeze_excitation_block_written_with_reduce_mean_fuses(monkeypatch) -> None:
    """The SE rule anchors on global pooling: a block whose pooling is ``ReduceMean`` over H and W now fuses too."""
    pytest.importorskip("torch")
    c, m = 8, 4
    constants = {
        "axes": np.asarray([2, 3], np.int64),
        "w1": (RNG.standard_normal((m, c, 1, 1)) * 0.3).astype(np.float32),
        "b1": RNG.standard_normal(m).astype(np.float32),
        "w2": (RNG.standard_normal((c, m, 1, 1)) * 0.3).astype(np.float32),
        "b2": RNG.standard_normal(c).astype(np.float32),
    }
    nodes = [
        helper.make_node("ReduceMean", ["x", "axes"], ["p"], keepdims=1),
        helper.make_node("Conv", ["p", "w1", "b1"], ["c1"], kernel_shape=[1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], kernel_shape=[1, 1]),
        helper.make_node("Sigmoid", ["c2"], ["s"]),
        helper.make_node("Mul", ["x", "s"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "se",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in constants.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 10
    x = RNG.standard_normal((1, c, 6, 6)).astype(np.float32)
    fused, got, plain, want = _both(model, monkeypatch, x, torch="1")
    assert _kinds(fused) == ["squeeze_excitation"]
    assert "squeeze_excitation" not in _kinds(plain)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
