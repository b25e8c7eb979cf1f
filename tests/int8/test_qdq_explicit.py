"""Explicit quantization: Conv, Gemm and MatMul between Q/DQ pairs run in INT8 (exact INT32 sums), against
NumPy's integer arithmetic bit for bit and onnxruntime's QDQ execution within a stated tolerance."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import QUIET
from helpers import kinds as kinds_of
from onnx import TensorProto, helper, numpy_helper

import plugrt
from plugrt.engine.plan import EnginePlan

ort = pytest.importorskip("onnxruntime")
F = TensorProto.FLOAT
X_SCALE = np.float32(0.04)


def qdq_model(nodes, inputs, output_shape, inits, out="y"):
    """``x`` quantized to INT8 (``x_q``, scale X_SCALE) and dequantized to ``x_dq``, then ``nodes``."""
    inits = {"x_scale": X_SCALE, "zero8": np.int8(0), **inits}
    head = [
        helper.make_node("QuantizeLinear", ["x", "x_scale", "zero8"], ["x_q"]),
        helper.make_node("DequantizeLinear", ["x_q", "x_scale", "zero8"], ["x_dq"]),
    ]
    graph = helper.make_graph(
        head + nodes,
        "qdq",
        [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
        [helper.make_tensor_value_info(out, F, output_shape)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 10
    return model


def dq(name, axis=None):
    kwargs = {} if axis is None else {"axis": axis}
    return helper.make_node("DequantizeLinear", [f"{name}_q", f"{name}_scale"], [name], **kwargs)


def kinds(model) -> list[str]:
    builder = plugrt.Builder(QUIET)
    network = builder.create_network(0)
    assert plugrt.OnnxParser(network, QUIET).parse(model.SerializeToString())
    data = bytes(builder.build_serialized_network(network, builder.create_builder_config()))
    return kinds_of(EnginePlan.from_bytes(data))


def run(model, feeds):
    return plugrt.compile(model)(feeds)


def onnxruntime(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def quantized(x):
    return np.clip(np.rint(x / X_SCALE), -128, 127).astype(np.int8)


def conv_inits(rng, maps=8, channels=16, bits=8):
    limit = 2 ** (bits - 1)
    w = rng.integers(1 - limit, limit, (maps, channels, 3, 3)).astype(np.int8)
    w_scale = rng.uniform(0.002, 0.01, maps).astype(np.float32)
    bias = rng.integers(-3000, 3000, maps).astype(np.int32)
    return {"w_q": w, "w_scale": w_scale, "b_q": bias, "b_scale": (X_SCALE * w_scale).astype(np.float32)}


def conv_reference(x, inits):
    """The INT8 convolution (pads 1): exact integer sums, then ``acc * x_scale * w_scale + bias`` in float32."""
    q = np.pad(quantized(x).astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    w = inits["w_q"].astype(np.int64)
    n, _, h, wd = x.shape
    acc = np.zeros((n, w.shape[0], h, wd), np.int64)
    for i in range(3):
        for j in range(3):
            acc += np.einsum("nchw,mc->nmhw", q[:, :, i : i + h, j : j + wd], w[:, :, i, j])
    multiplier = (inits["w_scale"] * X_SCALE).reshape(1, -1, 1, 1)
    bias = (inits["b_q"].astype(np.float32) * inits["b_scale"]).reshape(1, -1, 1, 1)
    return acc.astype(np.float32) * multiplier + bias


def test_qdq_conv_runs_in_int8_bit_exact_against_integer_arithmetic():
    rng = np.random.default_rng(0)
    inits = conv_inits(rng)
    nodes = [dq("w", axis=0), dq("b", axis=0), helper.make_node("Conv", ["x_dq", "w", "b"], ["y"], pads=[1] * 4)]
    model = qdq_model(nodes, [("x", [2, 16, 6, 5])], [2, 8, 6, 5], inits)
    layer_kinds = kinds(model)
    assert "int8_convolution" in layer_kinds and "convolution" not in layer_kinds
    assert "dequantize" not in layer_kinds  # the DQ layers only the INT8 product read are not built
    x = rng.standard_normal((2, 16, 6, 5)).astype(np.float32) * 2
    got = run(model, {"x": x})["y"]
    np.testing.assert_array_equal(got, conv_reference(x, inits))
    # onnxruntime multiplies the dequantized values in float32: the same up to float rounding
    np.testing.assert_allclose(got, onnxruntime(model, {"x": x}), rtol=1e-5, atol=1e-5)


def test_qdq_conv_chain_matches_onnxruntimes_fused_qlinear_conv():
    # Q -> DQ -> Conv -> Q -> DQ: onnxruntime fuses it into QLinearConv (integer math); plugrt runs the INT8
    # convolution, dequantizes and quantizes. Results agree except where float rounding meets a tie. The
    # weights use 7 bits, as onnxruntime's quantizer makes them on x86: its AVX2 kernels add pairs of
    # products in saturating INT16 (full-range pairs overflow there; plugrt's sums are exact).
    rng = np.random.default_rng(1)
    inits = {**conv_inits(rng, bits=7), "y_scale": np.float32(0.05)}
    nodes = [
        dq("w", axis=0),
        dq("b", axis=0),
        helper.make_node("Conv", ["x_dq", "w", "b"], ["c"], pads=[1] * 4),
        helper.make_node("QuantizeLinear", ["c", "y_scale", "zero8"], ["c_q"]),
        helper.make_node("DequantizeLinear", ["c_q", "y_scale", "zero8"], ["y"]),
    ]
    model = qdq_model(nodes, [("x", [1, 16, 7, 7])], [1, 8, 7, 7], inits)
    x = rng.standard_normal((1, 16, 7, 7)).astype(np.float32) * 2
    ours, theirs = run(model, {"x": x})["y"], onnxruntime(model, {"x": x})
    steps = np.rint(np.abs(ours - theirs) / inits["y_scale"])
    assert steps.max() <= 1 and np.mean(steps == 0) >= 0.99
    assert len(np.unique(ours)) > 50


def test_qdq_gemm_with_transposed_per_channel_weights_runs_in_int8():
    rng = np.random.default_rng(2)
    w = rng.integers(-127, 128, (6, 40)).astype(np.int8)  # [N, K]: transB
    inits = {
        "w_q": w,
        "w_scale": rng.uniform(0.002, 0.01, 6).astype(np.float32),
        "c": rng.standard_normal(6).astype(np.float32),
    }
    nodes = [dq("w", axis=0), helper.make_node("Gemm", ["x_dq", "w", "c"], ["y"], transB=1, alpha=0.5, beta=2.0)]
    model = qdq_model(nodes, [("x", [3, 40])], [3, 6], inits)
    assert "int8_gemm" in kinds(model)
    x = rng.standard_normal((3, 40)).astype(np.float32)
    got = run(model, {"x": x})["y"]
    acc = (quantized(x).astype(np.int64) @ w.T.astype(np.int64)).astype(np.float32)
    np.testing.assert_array_equal(
        got, acc * (inits["w_scale"] * np.float32(0.5) * X_SCALE) + inits["c"] * np.float32(2)
    )
    np.testing.assert_allclose(got, onnxruntime(model, {"x": x}), rtol=1e-5, atol=1e-5)


def test_qdq_matmul_of_two_activations_and_of_per_column_weights():
    rng = np.random.default_rng(3)
    w = rng.integers(-127, 128, (30, 5)).astype(np.int8)
    inits = {"w_q": w, "w_scale": rng.uniform(0.002, 0.01, 5).astype(np.float32), "z_scale": np.float32(0.1)}
    nodes = [
        dq("w", axis=1),
        helper.make_node("MatMul", ["x_dq", "w"], ["p"]),  # [4, 5]
        helper.make_node("QuantizeLinear", ["z", "z_scale", "zero8"], ["z_q"]),
        helper.make_node("DequantizeLinear", ["z_q", "z_scale", "zero8"], ["z_dq"]),
        helper.make_node("MatMul", ["x_dq", "z_dq"], ["y0"]),  # [4, 30] @ [30, 5]
        helper.make_node("Add", ["p", "y0"], ["y"]),
    ]
    model = qdq_model(nodes, [("x", [4, 30]), ("z", [30, 5])], [4, 5], inits)
    assert kinds(model).count("int8_matrix_multiply") == 2
    x, z = rng.standard_normal((4, 30)).astype(np.float32), rng.standard_normal((30, 5)).astype(np.float32)
    got = run(model, {"x": x, "z": z})["y"]
    xq = quantized(x).astype(np.int64)
    zq = np.clip(np.rint(z / inits["z_scale"]), -128, 127).astype(np.int64)
    p = (xq @ w.astype(np.int64)).astype(np.float32) * (inits["w_scale"] * X_SCALE)
    y0 = (xq @ zq).astype(np.float32) * np.float32(float(X_SCALE) * float(inits["z_scale"]))
    np.testing.assert_array_equal(got, p + y0)
    np.testing.assert_allclose(got, onnxruntime(model, {"x": x, "z": z}), rtol=1e-5, atol=1e-5)


def test_products_without_int8_qdq_inputs_stay_float():
    rng = np.random.default_rng(4)
    # a UINT8 activation (TensorRT's INT8 kernels take signed values) and float weights: FLOAT as before
    inits = {"w": rng.standard_normal((4, 16, 3, 3)).astype(np.float32), "zero_u8": np.uint8(0)}
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "x_scale", "zero_u8"], ["u_q"]),
        helper.make_node("DequantizeLinear", ["u_q", "x_scale", "zero_u8"], ["u_dq"]),
        helper.make_node("Conv", ["u_dq", "w"], ["c0"], pads=[1] * 4),
        helper.make_node("Conv", ["x_dq", "w"], ["c1"], pads=[1] * 4),
        helper.make_node("Add", ["c0", "c1"], ["y"]),
    ]
    model = qdq_model(nodes, [("x", [1, 16, 4, 4])], [1, 4, 4, 4], inits)
    assert kinds(model).count("convolution") == 2 and "int8_convolution" not in kinds(model)
    x = rng.standard_normal((1, 16, 4, 4)).astype(np.float32)
    np.testing.assert_allclose(run(model, {"x": x})["y"], onnxruntime(model, {"x": x}), rtol=1e-4, atol=1e-4)
