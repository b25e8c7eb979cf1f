"""plugrt.compile on the GPU: host arrays in and out, device arrays (CuPy, torch) used in place."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt

pytestmark = pytest.mark.gpu


def _model() -> object:
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"]),
             helper.make_node("NonZero", ["y"], ["nz"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3]),
                               helper.make_tensor_value_info("nz", TensorProto.INT64, [2, "k"])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_host_arrays_in_and_out_match_the_cpu() -> None:
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    cpu = plugrt.compile(_model(), device="cpu")({"x": x})
    gpu = plugrt.compile(_model(), device="cuda")({"x": x})
    assert isinstance(gpu["y"], np.ndarray)
    np.testing.assert_allclose(gpu["y"], cpu["y"], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(gpu["nz"], cpu["nz"])


def test_device_arrays_are_used_in_place() -> None:
    import cupy as cp
    import torch

    model = plugrt.compile(_model(), device="cuda")
    host = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    expected = plugrt.compile(_model(), device="cpu")({"x": host})
    for x in (cp.asarray(host), torch.as_tensor(host, device="cuda")):
        out = model({"x": x})
        assert isinstance(out["y"], cp.ndarray)
        np.testing.assert_allclose(cp.asnumpy(out["y"]), expected["y"], rtol=1e-5, atol=1e-6)
        assert torch.from_dlpack(out["y"]).shape == (3, 3)
