"""QuantizeLinear / DequantizeLinear (zero point 0, as TensorRT takes them): against onnxruntime and NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt
from plugrt.onnx.importers.base import OnnxImportError

ort = pytest.importorskip("onnxruntime")
F, I8 = TensorProto.FLOAT, TensorProto.INT8


def qdq_conv_model(zero_point: int = 0):
    """Activations quantized per tensor, weights per output channel (int8), dequantized into a Conv."""
    rng = np.random.default_rng(0)
    weights = rng.integers(-127, 128, size=(4, 3, 3, 3)).astype(np.int8)
    inits = [
        numpy_helper.from_array(np.float32(0.05), "x_scale"),
        numpy_helper.from_array(np.int8(zero_point), "x_zero"),
        numpy_helper.from_array(weights, "w_q"),
        numpy_helper.from_array(np.array([0.01, 0.02, 0.005, 0.03], np.float32), "w_scale"),
        numpy_helper.from_array(np.zeros(4, np.int8), "w_zero"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zero"], ["x_q"]),
        helper.make_node("DequantizeLinear", ["x_q", "x_scale", "x_zero"], ["x_dq"]),
        helper.make_node("DequantizeLinear", ["w_q", "w_scale", "w_zero"], ["w"], axis=0),
        helper.make_node("Conv", ["x_dq", "w"], ["y"], pads=[1, 1, 1, 1]),
    ]
    graph = helper.make_graph(
        nodes, "qdq", [helper.make_tensor_value_info("x", F, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", F, [1, 4, 8, 8])], inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9  # every onnxruntime the tests run with reads it (1.23, the last for Python 3.10, stops at 11)
    return model


def test_qdq_conv_matches_onnxruntime():
    model = qdq_conv_model()
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32) * 3
    ours = plugrt.compile(model)({"x": x})["y"]
    theirs = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)


def test_quantize_rounds_half_to_even_and_saturates():
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])]
    inits = [numpy_helper.from_array(np.float32(0.5), "s"), numpy_helper.from_array(np.int8(0), "z")]
    graph = helper.make_graph(nodes, "q", [helper.make_tensor_value_info("x", F, [5])],
                              [helper.make_tensor_value_info("y", I8, [5])], inits)
    compiled = plugrt.compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]))
    got = compiled({"x": np.array([0.25, 0.75, -1.25, 100.0, -100.0], np.float32)})["y"]
    assert got.tolist() == [0, 2, -2, 127, -128]  # 0.5 -> 0, 1.5 -> 2, -2.5 -> -2, saturated at the ends


def test_non_zero_zero_point_is_rejected_naming_it():
    with pytest.raises(OnnxImportError, match=r"zero point \[3\.0\] is not 0.*symmetric"):
        plugrt.compile(qdq_conv_model(zero_point=3))


def test_blocked_scale_of_the_wrong_rank_is_rejected():
    nodes = [helper.make_node("DequantizeLinear", ["x", "s"], ["y"], axis=1, block_size=2)]
    inits = [numpy_helper.from_array(np.ones(2, np.float32), "s")]
    graph = helper.make_graph(nodes, "dq", [helper.make_tensor_value_info("x", I8, [2, 4])],
                              [helper.make_tensor_value_info("y", F, [2, 4])], inits)
    with pytest.raises(plugrt.PlugrtError, match="a blocked scale must have the input's rank 2, got 1"):
        plugrt.compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]))
