"""A transpose whose output, stored HWC, holds its input's bytes in order becomes a reshape into that HWC tensor
when only channels-last layers read it (``builder/layouts.py`` ``_transposes_in_order``): TensorFlow exports'
NHWC -> NCHW ``Transpose`` before a convolution, magika's ``[N, H, C, 1]`` -> ``[N, C, H, 1]``."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt
from plugrt.core.types import TensorFormat
from plugrt.engine.plan import EnginePlan

try:
    import torch
except ImportError:  # the tests that need it skip
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch (pip install 'plugrt[torch]')")


def _model(shape: list[object], perm: list[int], kernel: list[int], extra_output: bool = False):
    """``x`` -> Transpose(perm) -> Conv(kernel) + Relu -> Conv 1x1 -> ``y`` (and the transposed ``t`` as an output)."""
    rng = np.random.default_rng(0)
    transposed = [shape[p] for p in perm]
    channels = int(transposed[1])  # type: ignore[call-overload]
    inits = [
        numpy_helper.from_array((rng.standard_normal((16, channels, *kernel)) * 0.2).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b1"),
        numpy_helper.from_array((rng.standard_normal((8, 16, 1, 1)) * 0.2).astype(np.float32), "w2"),
    ]
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=perm),
        helper.make_node("Conv", ["t", "w1", "b1"], ["c1"], kernel_shape=kernel),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["y"], kernel_shape=[1, 1]),
    ]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if extra_output:
        outputs.append(helper.make_tensor_value_info("t", TensorProto.FLOAT, None))
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)], outputs, inits
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _build(monkeypatch: pytest.MonkeyPatch, switch: str, model, shapes=None):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PLUGRT_TORCH", switch)
    return plugrt.compile(model, device="cpu", shapes=shapes)


def _transpose_layer(engine):  # type: ignore[no-untyped-def]
    plan = engine.engine.plan
    (layer,) = [layer for layer in plan.layers if layer.kind == "shuffle"]
    return plan, layer


CASES = [
    ("nhwc", ["n", 10, 12, 6], [0, 3, 1, 2], [3, 3]),  # TensorFlow's layout into a convolution
    ("magika", ["n", 40, 24, 1], [0, 2, 1, 3], [5, 1]),  # [N, H, C, 1] -> [N, C, H, 1]
]


@needs_torch
@pytest.mark.parametrize("name,shape,perm,kernel", CASES, ids=[c[0] for c in CASES])
def test_a_transpose_in_order_becomes_a_reshape_into_the_channels_last_run(monkeypatch, name, shape, perm, kernel):
    model = _model(shape, perm, kernel)
    dims = [2 if d == "n" else d for d in shape]
    shapes = {"x": (tuple([1, *dims[1:]]), tuple(dims), tuple([3, *dims[1:]]))}
    reference = _build(monkeypatch, "0", model, shapes)
    engine = _build(monkeypatch, "nhwc", model, shapes)
    plan, layer = _transpose_layer(engine)
    assert layer.params["first_transpose"][:4] == [0, 1, 2, 3]
    assert layer.params["reshape_dims"][0] == 0 and len(layer.params["reshape_dims"]) == 4
    assert plan.tensors[layer.outputs[0]].format == TensorFormat.HWC
    rng = np.random.default_rng(1)
    for batch in (2, 1, 3):
        x = rng.standard_normal((batch, *dims[1:])).astype(np.float32)
        np.testing.assert_allclose(engine(x=x)["y"], reference(x=x)["y"], rtol=1e-5, atol=1e-5)
    # the plan loads (the reshape's shape rule gives the logical shape) and runs where torch is off
    blob = engine.serialize()
    EnginePlan.from_bytes(blob)
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    runtime = plugrt.Runtime(plugrt.Logger(plugrt.Logger.ERROR))
    context = runtime.deserialize_cuda_engine(blob).create_execution_context()
    x = rng.standard_normal((2, *dims[1:])).astype(np.float32)
    want = reference(x=x)["y"]
    y = np.empty_like(want)
    context.set_input_shape("x", x.shape)
    context.set_tensor_address("x", x.ctypes.data)
    context.set_tensor_address("y", y.ctypes.data)
    assert context.execute_async_v3(0)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


@needs_torch
def test_a_transpose_out_of_order_stays_a_transpose(monkeypatch):
    """[N, W, H, C] -> [N, C, H, W]: stored HWC the bytes would be [N, H, W, C], not the input's order."""
    model = _model(["n", 12, 10, 6], [0, 3, 2, 1], [3, 3])
    engine = _build(monkeypatch, "nhwc", model, {"x": ((1, 12, 10, 6), (2, 12, 10, 6), (2, 12, 10, 6))})
    plan, layer = _transpose_layer(engine)
    assert layer.params["first_transpose"][:4] == [0, 3, 2, 1] and "reshape_dims" not in layer.params
    assert plan.tensors[layer.outputs[0]].format == TensorFormat.LINEAR
    x = np.random.default_rng(2).standard_normal((2, 12, 10, 6)).astype(np.float32)
    want = _build(monkeypatch, "0", model, {"x": ((1, 12, 10, 6), (2, 12, 10, 6), (2, 12, 10, 6))})(x=x)["y"]
    np.testing.assert_allclose(engine(x=x)["y"], want, rtol=1e-5, atol=1e-5)


@needs_torch
def test_a_transposed_tensor_the_caller_reads_stays_a_transpose(monkeypatch):
    model = _model([1, 10, 12, 6], [0, 3, 1, 2], [3, 3], extra_output=True)
    engine = _build(monkeypatch, "nhwc", model)
    plan, layer = _transpose_layer(engine)
    assert layer.params["first_transpose"][:4] == [0, 3, 1, 2]
    assert plan.tensors[layer.outputs[0]].format == TensorFormat.LINEAR
    x = np.random.default_rng(3).standard_normal((1, 10, 12, 6)).astype(np.float32)
    got = engine(x=x)
    np.testing.assert_array_equal(got["t"], x.transpose(0, 3, 1, 2))


def test_a_reshape_into_an_hwc_buffer_empties_its_hand_over_slot():
    """A stale tensor left in the slot of the address (the memory plan reuses it) is never read after it."""
    from plugrt.core.types import DataType
    from plugrt.nodes.base import Binding
    from plugrt.ops.hand_over import hand_over
    from plugrt.ops.shuffle import ShuffleOperator

    op = ShuffleOperator({"reshape_dims": [0, 6, 10, 1]})
    x = np.arange(60, dtype=np.float32).reshape(1, 10, 6, 1)
    out = np.zeros((1, 10, 1, 6), np.float32)  # logical [1, 6, 10, 1] stored [N, H, W, C]
    binding_in = Binding((1, 10, 6, 1), DataType.FLOAT, TensorFormat.LINEAR, 1.0, x.ctypes.data, x, None)
    binding_out = Binding((1, 6, 10, 1), DataType.FLOAT, TensorFormat.HWC, 1.0, out.ctypes.data, out, None)
    op.bind([binding_in], [binding_out], 0)
    hand_over(out).tensor = object()
    op.launch(0)
    assert hand_over(out).tensor is None
    np.testing.assert_array_equal(out.transpose(0, 3, 1, 2), x.transpose(0, 2, 1, 3))
