"""Interop on the GPU: a TensorRT-style plugin whose enqueue launches a Triton kernel on the raw
pointers and stream it is given, and JAX arrays through ``plugrt.compile`` (DLPack, zero-copy)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper

import plugrt
import plugrt as trt

from testing_plugins import build, ensure_registered

pytestmark = pytest.mark.gpu
LOGGER = trt.Logger(trt.Logger.ERROR)


class _Pointer:
    """What Triton needs of a pointer argument: ``data_ptr()`` and a ``dtype``."""

    def __init__(self, address: int) -> None:
        import torch

        self.address, self.dtype = address, torch.float32

    def data_ptr(self) -> int:
        return self.address


def _triton_axpb() -> Any:
    import triton
    import triton.language as tl

    @triton.jit
    def axpb(x_ptr, y_ptr, n, a, b, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * a + b, mask=mask)

    return axpb


class TritonAxpb(trt.IPluginV2DynamicExt):
    """y = a * x + b, written as a TensorRT plugin with a Triton kernel."""

    KERNEL: Any = None

    def __init__(self, a: float = 2.0, b: float = 1.0) -> None:
        trt.IPluginV2DynamicExt.__init__(self)
        self.num_outputs, self.plugin_type, self.plugin_version = 1, "TritonAxpb", "1"
        self.a, self.b = a, b

    def get_output_datatype(self, index: int, input_types: list[trt.DataType]) -> trt.DataType:
        return input_types[0]

    def get_output_dimensions(self, output_index: int, inputs: list[trt.DimsExprs], builder: Any) -> trt.DimsExprs:
        return trt.DimsExprs(inputs[0])

    def supports_format_combination(self, pos: int, in_out: list[trt.PluginTensorDesc], num_inputs: int) -> bool:
        return in_out[pos].type == trt.float32 and in_out[pos].format == trt.TensorFormat.LINEAR

    def configure_plugin(self, inp: Any, out: Any) -> None:
        pass

    def enqueue(self, input_desc: Any, output_desc: Any, inputs: Any, outputs: Any, workspace: int, stream: int) -> int:
        import torch

        if TritonAxpb.KERNEL is None:
            TritonAxpb.KERNEL = _triton_axpb()
        n = trt.volume(input_desc[0].dims)
        with torch.cuda.stream(torch.cuda.ExternalStream(stream)):
            TritonAxpb.KERNEL[(-(-n // 256),)](_Pointer(inputs[0]), _Pointer(outputs[0]), n, self.a, self.b, BLOCK=256)
        return 0

    def serialize(self) -> bytes:
        return np.array([self.a, self.b], np.float64).tobytes()

    def clone(self) -> TritonAxpb:
        return TritonAxpb(self.a, self.b)


class TritonAxpbCreator(trt.IPluginCreator):
    def __init__(self) -> None:
        trt.IPluginCreator.__init__(self)
        self.name, self.plugin_version, self.plugin_namespace = "TritonAxpb", "1", ""
        self.field_names = trt.PluginFieldCollection()

    def create_plugin(self, name: str, field_collection: Any) -> TritonAxpb:
        return TritonAxpb()

    def deserialize_plugin(self, name: str, data: bytes) -> TritonAxpb:
        a, b = np.frombuffer(bytes(data), np.float64)
        return TritonAxpb(float(a), float(b))


def test_triton_plugin_runs_on_the_engine_stream() -> None:
    pytest.importorskip("triton")
    import cupy as cp

    creator = ensure_registered(TritonAxpbCreator())
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (-1, 1000))
    layer = network.add_plugin_v2([x], creator.create_plugin("axpb", trt.PluginFieldCollection()))
    layer.get_output(0).name = "y"
    network.mark_output(layer.get_output(0))
    plan = build(network, builder, [{"x": ((1, 1000), (4, 1000), (8, 1000))}])
    context = trt.Runtime(LOGGER, device="cuda").deserialize_cuda_engine(plan).create_execution_context()
    host = np.random.default_rng(0).standard_normal((5, 1000)).astype(np.float32)
    xd, yd = cp.asarray(host), cp.zeros((5, 1000), np.float32)
    context.set_input_shape("x", (5, 1000))
    context.set_tensor_address("x", xd.data.ptr)
    context.set_tensor_address("y", yd.data.ptr)
    stream = cp.cuda.Stream(non_blocking=True)
    context.execute_async_v3(stream.ptr)
    stream.synchronize()
    np.testing.assert_allclose(cp.asnumpy(yd), host * 2 + 1, rtol=1e-6)


def test_jax_arrays_go_in_and_come_out_through_dlpack() -> None:
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("JAX sees no GPU")
    nodes = [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Mul", ["h", "x"], ["y"])]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 6])],
    )
    model = plugrt.compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), device="cuda")
    host = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    out = model({"x": jnp.asarray(host)})["y"]
    back = jnp.from_dlpack(out)
    np.testing.assert_allclose(np.asarray(back), np.maximum(host, 0) * host, rtol=1e-6)
