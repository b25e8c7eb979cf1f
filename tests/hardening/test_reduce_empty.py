"""ReduceMean over an empty axis is 0 (as onnxruntime), without a NumPy warning."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper

import plugrt as trt


@pytest.mark.parametrize("op, expected", [("ReduceMean", 0.0), ("ReduceMax", -np.inf), ("ReduceMin", np.inf),
                                          ("ReduceProd", 1.0)])
def test_reduce_over_an_empty_axis(op: str, expected: float, capfd: pytest.CaptureFixture[str]) -> None:
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"], axes=[1], keepdims=0)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 0])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = trt.compile(model)({"x": np.zeros((2, 0), np.float32)})["y"]
    np.testing.assert_array_equal(y, np.full(2, expected, np.float32))
    assert "Warning" not in capfd.readouterr().err
