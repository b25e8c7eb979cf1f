"""An execution context whose I/O tensors move to new addresses (same shapes) binds again only the layers that
read or write them; shape changes and data-dependent shapes still bind every layer."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt
from plugrt.engine.executor import Executor


def _model():  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), f"w{k}") for k in (1,)]
    inits.append(numpy_helper.from_array(rng.standard_normal((4, 4, 1, 1)).astype(np.float32), "w2"))
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a"], ["b"]),
        helper.make_node("Conv", ["b", "w2"], ["c"], kernel_shape=[1, 1]),
        helper.make_node("Sigmoid", ["c"], ["d"]),
        helper.make_node("Conv", ["d", "w2"], ["y"], kernel_shape=[1, 1]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4, 8, 8])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_moved_outputs_bind_only_the_layers_that_write_them(monkeypatch):
    engine = plugrt.compile(_model(), shapes={"x": ((1, 3, 8, 8), (2, 3, 8, 8), (2, 3, 8, 8))}).engine
    bound: list[str] = []
    real = Executor._bind_step

    def spy(self, step):  # type: ignore[no-untyped-def]
        bound.append(step.layer.name)
        real(self, step)

    monkeypatch.setattr(Executor, "_bind_step", spy)
    context = engine.create_execution_context()
    x = np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)
    context.set_input_shape("x", x.shape)
    context.set_tensor_address("x", x.ctypes.data)
    outputs = [np.empty((2, 4, 8, 8), np.float32) for _ in range(3)]
    context.set_tensor_address("y", outputs[0].ctypes.data)
    context.execute_async_v3(0)
    layers = [layer.name for layer in engine.plan.layers if layer.kind != "constant"]
    assert set(layers) <= set(bound)  # the first run binds every layer
    last = engine.plan.layers[-1].name
    bound.clear()
    context.set_tensor_address("y", outputs[1].ctypes.data)
    context.execute_async_v3(0)
    assert bound == [last]  # only the layer writing y
    bound.clear()
    context.execute_async_v3(0)
    assert bound == []
    x2 = x.copy()
    context.set_tensor_address("x", x2.ctypes.data)
    context.set_tensor_address("y", outputs[2].ctypes.data)
    context.execute_async_v3(0)
    assert sorted(bound) == sorted([engine.plan.layers[0].name, last])  # the layers reading x, writing y
    np.testing.assert_array_equal(outputs[0], outputs[1])
    np.testing.assert_array_equal(outputs[0], outputs[2])
    bound.clear()
    x1 = x[:1].copy()
    context.set_input_shape("x", x1.shape)  # a new shape: every layer again
    context.set_tensor_address("x", x1.ctypes.data)
    y1 = np.empty((1, 4, 8, 8), np.float32)
    context.set_tensor_address("y", y1.ctypes.data)
    context.execute_async_v3(0)
    assert set(layers) <= set(bound)
    np.testing.assert_allclose(y1, outputs[0][:1], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("keep", [True, False])
def test_compiled_calls_with_new_output_arrays_give_the_same_results(keep):
    compiled = plugrt.compile(_model(), shapes={"x": ((1, 3, 8, 8), (2, 3, 8, 8), (2, 3, 8, 8))})
    x = np.random.default_rng(2).standard_normal((2, 3, 8, 8)).astype(np.float32)
    kept = [compiled(x=x)["y"] for _ in range(4)] if keep else []
    first = compiled(x=x)["y"]
    for _ in range(3):
        np.testing.assert_array_equal(compiled(x=x)["y"], first)
    for y in kept:
        np.testing.assert_array_equal(y, first)
