"""Layer fusion in the builder: which pairs fuse, which don't, and that results stay those of the layers."""

from __future__ import annotations

import numpy as np
import pytest

import plugrt as trt
from plugrt.ops.base import create_operator
from plugrt.shape.builder import constant

from testing_plugins import build, run

LOGGER = trt.Logger(trt.Logger.ERROR)
RNG = np.random.default_rng(5)
PROD, SUM = trt.ElementWiseOperation.PROD, trt.ElementWiseOperation.SUM
NONE = trt.MatrixOperation.NONE


def _engine(network: trt.INetworkDefinition, builder: trt.Builder) -> trt.ICudaEngine:
    return trt.Runtime(LOGGER).deserialize_cuda_engine(build(network, builder))


def _layer_names(engine: trt.ICudaEngine) -> list[str]:
    return [layer.name for layer in engine.plan.layers]


def _attention_scores(scale_shape: tuple[int, ...], dtype: type = np.float32, also_output: bool = False) -> tuple:
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    trt_type = trt.float32 if dtype == np.float32 else trt.float16
    x = network.add_input("x", trt_type, (2, 3, 5, 7))
    scale = network.add_constant(scale_shape, np.full(scale_shape, 0.37, dtype))
    product = network.add_elementwise(x, scale.get_output(0), PROD)
    product.name = "scale"
    product.get_output(0).name = "scaled"
    softmax = network.add_softmax(product.get_output(0))
    softmax.axes = 1 << 3
    softmax.name = "softmax"
    softmax.get_output(0).name = "y"
    network.mark_output(softmax.get_output(0))
    if also_output:
        network.mark_output(product.get_output(0))
    return network, builder


def _reference_softmax(x: np.ndarray, scale: float) -> np.ndarray:
    z = x.astype(np.float64) * scale
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_mul_by_a_one_element_constant_then_softmax_fuses() -> None:
    engine = _engine(*_attention_scores((1, 1, 1, 1)))
    assert "scale + softmax" in _layer_names(engine)
    assert "scaled" not in [t.name for t in engine.plan.tensors]  # the product is gone from the engine
    x = RNG.normal(0, 3, (2, 3, 5, 7)).astype(np.float32)
    y = run(engine.create_execution_context(), {"x": x})["y"]
    np.testing.assert_allclose(y, _reference_softmax(x, np.float32(0.37)), rtol=1e-5, atol=1e-7)
    unfused = _engine(*_attention_scores((1, 1, 1, 1), also_output=True))
    assert "scale + softmax" not in _layer_names(unfused)  # the product is an output: no fusion
    np.testing.assert_array_equal(run(unfused.create_execution_context(), {"x": x})["y"], y)  # same float ops


def test_scaled_softmax_in_float16() -> None:
    engine = _engine(*_attention_scores((1, 1, 1, 1), np.float16))
    assert "scale + softmax" in _layer_names(engine)
    x = RNG.normal(0, 3, (2, 3, 5, 7)).astype(np.float16)
    y = run(engine.create_execution_context(), {"x": x})["y"]
    np.testing.assert_allclose(y, _reference_softmax(x, np.float16(0.37)), atol=2e-3)


def test_a_vector_scale_does_not_fuse() -> None:
    engine = _engine(*_attention_scores((1, 1, 1, 7)))
    assert _layer_names(engine)[-2:] == ["scale", "softmax"]


def _linear(bias_shape: tuple[int, ...], bias_type: type = np.float32, bias_first: bool = False, reuse: bool = False):
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (-1, 4, 6))
    w = network.add_constant((1, 6, 5), RNG.normal(0, 1, (1, 6, 5)).astype(np.float32))
    b = network.add_constant(bias_shape, RNG.normal(0, 1, bias_shape).astype(bias_type))
    mm = network.add_matrix_multiply(x, NONE, w.get_output(0), NONE)
    mm.name = "mm"
    b_out = b.get_output(0)
    if bias_type != np.float32:
        b_out = network.add_cast(b_out, trt.float32).get_output(0)
    pair = (b_out, mm.get_output(0)) if bias_first else (mm.get_output(0), b_out)
    add = network.add_elementwise(*pair, SUM)
    add.name = "bias"
    add.get_output(0).name = "y"
    network.mark_output(add.get_output(0))
    if reuse:  # the product feeds a second layer too
        other = network.add_unary(mm.get_output(0), trt.UnaryOperation.ABS)
        other.get_output(0).name = "abs"
        network.mark_output(other.get_output(0))
    profile = builder.create_optimization_profile()
    profile.set_shape("x", (1, 4, 6), (2, 4, 6), (3, 4, 6))
    config = builder.create_builder_config()
    config.add_optimization_profile(profile)
    plan = builder.build_serialized_network(network, config)
    weights = (w.weights.numpy().reshape(6, 5), b.weights.numpy().reshape(-1).astype(np.float32))
    return trt.Runtime(LOGGER).deserialize_cuda_engine(plan), weights


@pytest.mark.parametrize("bias_first", [False, True])
def test_matrix_multiply_then_bias_add_fuses(bias_first: bool) -> None:
    engine, (w, b) = _linear((1, 1, 5), bias_first=bias_first)
    assert "mm + bias" in _layer_names(engine)
    x = RNG.normal(0, 1, (3, 4, 6)).astype(np.float32)
    y = run(engine.create_execution_context(), {"x": x})["y"]
    np.testing.assert_array_equal(y, np.matmul(x, w) + b)  # the same two float32 operations


@pytest.mark.parametrize(
    ("shape", "kwargs"),
    [((1, 4, 5), {}), ((1, 1, 5), {"reuse": True}), ((1, 1, 5), {"bias_type": np.float16})],
    ids=["bias-with-rows", "product-used-twice", "converted-bias-still-fuses"],
)
def test_matrix_bias_fusion_conditions(shape: tuple[int, ...], kwargs: dict) -> None:
    engine, (w, b) = _linear(shape, **kwargs)
    names = _layer_names(engine)
    fused = "mm + bias" in names
    assert fused == (kwargs.get("bias_type") is not None)
    x = RNG.normal(0, 1, (2, 4, 6)).astype(np.float32)
    y = run(engine.create_execution_context(), {"x": x})["y"]
    want = np.matmul(x, w) + b.reshape(shape)
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)


def test_fused_operators_reject_bad_extra_inputs() -> None:
    softmax = create_operator("softmax", {"axes": 2, "scaled": True}, {})
    with pytest.raises(trt.ShapeError, match="scale must be a one-element tensor"):
        softmax.output_shapes([[constant(2), constant(3)], [constant(3)]], [None, None])
    with pytest.raises(trt.TypeMismatchError, match="scale must have the input's type FLOAT, got HALF"):
        softmax.output_types([trt.float32, trt.float16])
    with pytest.raises(trt.NetworkError, match="expected 2 input"):
        softmax.output_types([trt.float32])
    matmul = create_operator("matrix_multiply", {"op0": "NONE", "op1": "NONE", "bias": True}, {})
    shapes = [[constant(4), constant(6)], [constant(6), constant(5)]]
    with pytest.raises(trt.ShapeError, match=r"bias must have dims \[1, \.\.\., 1, 5\]"):
        matmul.output_shapes([*shapes, [constant(4), constant(5)]], [None] * 3)
    with pytest.raises(trt.TypeMismatchError, match="bias must have type FLOAT, got HALF"):
        matmul.output_types([trt.float32, trt.float32, trt.float16])
