"""The CUDA backend: the same engines on the GPU, checked against the CPU results."""

from __future__ import annotations

import numpy as np
import pytest

import plugrt as trt
from plugrt.examples import circ_pad_v2, circ_pad_v3

from testing_plugins import build, fields

pytestmark = pytest.mark.gpu
LOGGER = trt.Logger(trt.Logger.ERROR)


def _run(engine: trt.ICudaEngine, inputs: dict[str, np.ndarray], stream: int = 0) -> dict[str, np.ndarray]:
    """Run on the engine's device; host arrays in and out."""
    import cupy as cp

    device = engine.backend.name
    context = engine.create_execution_context()
    keep = []
    outputs = {}
    for name, array in inputs.items():
        context.set_input_shape(name, array.shape)
        buffer = cp.asarray(array) if device == "cuda" else np.ascontiguousarray(array)
        keep.append(buffer)
        context.set_tensor_address(name, buffer.data.ptr if device == "cuda" else buffer.ctypes.data)
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        if engine.get_tensor_mode(name) == trt.TensorIOMode.OUTPUT:
            shape = tuple(context.get_tensor_shape(name))
            dtype = trt.nptype(engine.get_tensor_dtype(name))
            out = cp.zeros(shape, dtype) if device == "cuda" else np.zeros(shape, dtype)
            outputs[name] = out
            context.set_tensor_address(name, out.data.ptr if device == "cuda" else out.ctypes.data)
    context.execute_async_v3(stream)
    if device == "cuda":
        cp.cuda.Device().synchronize()
        return {k: cp.asnumpy(v) for k, v in outputs.items()}
    return outputs


def _both(network_fn, inputs, profiles=()):  # type: ignore[no-untyped-def]
    builder = trt.Builder(LOGGER)
    network = network_fn(builder.create_network(0))
    plan = build(network, builder, profiles)
    cpu = _run(trt.Runtime(LOGGER).deserialize_cuda_engine(plan), inputs)
    gpu = _run(trt.Runtime(LOGGER, device="cuda").deserialize_cuda_engine(plan), inputs)
    return cpu, gpu


def test_tensorrt_style_plugins_run_on_the_gpu_unchanged() -> None:
    v2, v3 = circ_pad_v2.register(), circ_pad_v3.register()

    def network(net):  # type: ignore[no-untyped-def]
        x = net.add_input("x", trt.float32, (-1, 3, -1))
        a = net.add_plugin_v2([x], v2.create_plugin("a", fields(pads=[1, 2])))
        b = net.add_plugin_v3(
            [a.get_output(0)], [], v3.create_plugin("b", fields(pads=[0, 1]), trt.TensorRTPhase.BUILD)
        )
        b.get_output(0).name = "y"
        net.mark_output(b.get_output(0))
        return net

    x = np.random.default_rng(0).standard_normal((2, 3, 5)).astype(np.float32)
    cpu, gpu = _both(network, {"x": x}, [{"x": ((1, 3, 1), (2, 3, 5), (4, 3, 9))}])
    np.testing.assert_array_equal(cpu["y"], gpu["y"])


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_standard_layers_match_the_cpu(dtype: type) -> None:
    trt_type = trt.float32 if dtype == np.float32 else trt.float16
    w = (np.random.default_rng(1).standard_normal((8, 8)) / 4).astype(dtype)

    def network(net):  # type: ignore[no-untyped-def]
        x = net.add_input("x", trt_type, (-1, 8))
        c = net.add_constant((8, 8), w)
        mm = net.add_matrix_multiply(x, trt.MatrixOperation.NONE, c.get_output(0), trt.MatrixOperation.TRANSPOSE)
        act = net.add_activation(mm.get_output(0), trt.ActivationType.GELU_ERF)
        add = net.add_elementwise(act.get_output(0), x, trt.ElementWiseOperation.SUM)
        sm = net.add_softmax(add.get_output(0))
        sm.axes = 1 << 1
        red = net.add_reduce(sm.get_output(0), trt.ReduceOperation.MAX, 1 << 1, True)
        un = net.add_unary(add.get_output(0), trt.UnaryOperation.ABS)
        cat = net.add_concatenation([un.get_output(0), red.get_output(0)])
        cat.axis = 1
        sh = net.add_shuffle(cat.get_output(0))
        sh.reshape_dims = (0, 9, 1)
        sh.second_transpose = (0, 2, 1)
        cast = net.add_cast(sh.get_output(0), trt.float32)
        cast.get_output(0).name = "y"
        net.mark_output(cast.get_output(0))
        return net

    x = np.random.default_rng(2).standard_normal((5, 8)).astype(dtype)
    cpu, gpu = _both(network, {"x": x}, [{"x": ((1, 8), (5, 8), (16, 8))}])
    tol = 1e-5 if dtype == np.float32 else 2e-2
    np.testing.assert_allclose(gpu["y"], cpu["y"], rtol=tol, atol=tol)


def test_cupy_plugin_gets_device_pointers_and_the_stream() -> None:
    """A plugin written the TensorRT way with CuPy: UnownedMemory + ExternalStream + RawKernel."""
    import cupy as cp

    kernel = cp.RawKernel(
        r"""
        extern "C" __global__ void scale(const float* x, float* y, float a, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) y[i] = a * x[i];
        }""",
        "scale",
    )
    seen_streams: list[int] = []

    class CupyScale(trt.IPluginV2DynamicExt):
        def __init__(self) -> None:
            super().__init__()
            self.plugin_type, self.plugin_version = "CupyScaleTest", "1"

        def get_output_dimensions(self, i, inputs, eb):  # type: ignore[no-untyped-def]
            return trt.DimsExprs(inputs[0])

        def supports_format_combination(self, pos, io, n):  # type: ignore[no-untyped-def]
            return io[pos].type == trt.float32 and io[pos].format == trt.TensorFormat.LINEAR

        def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):  # type: ignore[no-untyped-def]
            n = int(np.prod(tuple(input_desc[0].dims)))
            seen_streams.append(stream)
            x = cp.ndarray((n,), cp.float32, cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(inputs[0], n * 4, self), 0))
            y = cp.ndarray((n,), cp.float32, cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(outputs[0], n * 4, self), 0))
            with cp.cuda.ExternalStream(stream):
                kernel(((n + 255) // 256,), (256,), (x, y, np.float32(3.0), np.int32(n)))
            return 0

        def serialize(self) -> bytes:
            return b""

        def clone(self):  # type: ignore[no-untyped-def]
            return CupyScale()

    class Creator(trt.IPluginCreator):
        def __init__(self) -> None:
            super().__init__()
            self.name, self.plugin_version = "CupyScaleTest", "1"

        def create_plugin(self, name, fc):  # type: ignore[no-untyped-def]
            return CupyScale()

        def deserialize_plugin(self, name, data):  # type: ignore[no-untyped-def]
            return CupyScale()

    registry = trt.get_plugin_registry()
    creator = Creator()
    registry.register_creator(creator, "")
    try:
        builder = trt.Builder(LOGGER)
        net = builder.create_network(0)
        x = net.add_input("x", trt.float32, (4, 1000))
        layer = net.add_plugin_v2([x], CupyScale())
        layer.get_output(0).name = "y"
        net.mark_output(layer.get_output(0))
        engine = trt.Runtime(LOGGER, device="cuda").deserialize_cuda_engine(build(net, builder))
        stream = cp.cuda.Stream(non_blocking=True)
        x_val = np.random.default_rng(3).standard_normal((4, 1000)).astype(np.float32)
        y = _run(engine, {"x": x_val}, stream.ptr)
        np.testing.assert_allclose(y["y"], 3 * x_val, rtol=1e-6)
        assert seen_streams == [stream.ptr]
    finally:
        registry.deregister_creator(creator)


def test_device_malloc_on_cuda() -> None:
    buffer = trt.device_malloc(1024, device="cuda")
    assert buffer.ptr and buffer in trt.live_allocations()
    view = buffer.as_array((256,), np.float32)
    view[...] = 1
    assert float(view.sum()) == 256.0
    buffer.free()
    assert buffer not in trt.live_allocations()


def test_cuda_graph_replay_follows_new_data_and_recaptures_on_shape_change() -> None:
    import cupy as cp

    def network(net):  # type: ignore[no-untyped-def]
        x = net.add_input("x", trt.float32, (-1, 16))
        t = x
        for _ in range(8):
            t = net.add_activation(t, trt.ActivationType.TANH).get_output(0)
            t = net.add_elementwise(t, x, trt.ElementWiseOperation.SUM).get_output(0)
        t.name = "y"
        net.mark_output(t)
        return net

    builder = trt.Builder(LOGGER)
    plan = build(network(builder.create_network(0)), builder, [{"x": ((1, 16), (4, 16), (64, 16))}])
    engine = trt.Runtime(LOGGER, device="cuda").deserialize_cuda_engine(plan)
    cpu_engine = trt.Runtime(LOGGER).deserialize_cuda_engine(plan)
    context = engine.create_execution_context()
    context.use_cuda_graph = True
    stream = cp.cuda.Stream(non_blocking=True)
    rng = np.random.default_rng(5)
    for shape in [(4, 16), (4, 16), (4, 16), (9, 16), (9, 16)]:
        host = rng.standard_normal(shape).astype(np.float32)
        x = cp.asarray(host)
        y = cp.zeros(shape, cp.float32)
        context.set_input_shape("x", shape)
        context.set_tensor_address("x", x.data.ptr)
        context.set_tensor_address("y", y.data.ptr)
        context.execute_async_v3(stream.ptr)
        stream.synchronize()
        expected = _run(cpu_engine, {"x": host})["y"]
        np.testing.assert_allclose(cp.asnumpy(y), expected, rtol=1e-5, atol=1e-5)


def test_cuda_graph_needs_a_stream() -> None:
    import cupy as cp

    def network(net):  # type: ignore[no-untyped-def]
        x = net.add_input("x", trt.float32, (2, 2))
        y = net.add_identity(x).get_output(0)
        net.mark_output(y)
        return net

    builder = trt.Builder(LOGGER)
    engine = trt.Runtime(LOGGER, device="cuda").deserialize_cuda_engine(
        build(network(builder.create_network(0)), builder)
    )
    context = engine.create_execution_context()
    context.use_cuda_graph = True
    x, y = cp.zeros((2, 2), cp.float32), cp.zeros((2, 2), cp.float32)
    context.set_tensor_address(engine.get_tensor_name(0), x.data.ptr)
    context.set_tensor_address(engine.get_tensor_name(1), y.data.ptr)
    with pytest.raises(trt.ExecutionError, match="non-default stream"):
        context.execute_async_v3(0)
