"""NVIDIA's Python plugin samples on the GPU, with CuPy kernels of the samples' shape (tests/compat on the device).

Mirrors ``circ_pad_plugin_cupy.py`` and ``non_zero_plugin.py`` run by Polygraphy's ``TrtRunner``
(``import tensorrt`` giving plugrt with ``plugrt.compat.install(device="cuda")``),
``aliased_io_plugin.py`` (in place, CuPy scatter-add on the engine's stream), the
multi-tactic sample (two CuPy tactics, timing cache), and the cookbook's ``add_scalar_cupy.py``
(a ``cp.RawKernel`` on ``cp.cuda.ExternalStream``). Each is checked against NumPy.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, save

import plugrt
import plugrt.compat

pytestmark = pytest.mark.gpu


def _cupy():  # type: ignore[no-untyped-def]
    import cupy as cp

    return cp


def _wrap(cp, ptr: int, shape, dtype):  # type: ignore[no-untyped-def]
    """The samples' UnownedMemory helper: a CuPy array over a device pointer."""
    size = int(np.prod(shape)) * np.dtype(dtype).itemsize
    mem = cp.cuda.UnownedMemory(ptr, size, None)
    return cp.ndarray(tuple(int(d) for d in shape), dtype=dtype, memptr=cp.cuda.MemoryPointer(mem, 0))


CIRC_PAD_SOURCE = r"""
extern "C" __global__ void circ_pad_float(const float* X, const int* all_pads, const int* orig_dims, float* Y,
                                          const int* Y_shape, const int* Y_len) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < *Y_len; i += blockDim.x * gridDim.x) {
        int i3 = i % Y_shape[3], i2 = (i / Y_shape[3]) % Y_shape[2];
        int i1 = (i / Y_shape[3] / Y_shape[2]) % Y_shape[1], i0 = i / Y_shape[3] / Y_shape[2] / Y_shape[1];
        int j0 = (i0 - all_pads[0] + orig_dims[0]) % orig_dims[0], j1 = (i1 - all_pads[2] + orig_dims[1]) % orig_dims[1];
        int j2 = (i2 - all_pads[4] + orig_dims[2]) % orig_dims[2], j3 = (i3 - all_pads[6] + orig_dims[3]) % orig_dims[3];
        Y[i] = X[orig_dims[3] * orig_dims[2] * orig_dims[1] * j0 + orig_dims[3] * orig_dims[2] * j1 + orig_dims[3] * j2 + j3];
    }
}
"""


def test_circ_pad_cupy_sample_with_polygraphy_trt_runner(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("polygraphy")
    cp = _cupy()
    trt = plugrt.compat.install(device="cuda")
    from polygraphy.backend.trt import CreateConfig, EngineFromNetwork, NetworkFromOnnxPath, TrtRunner
    from polygraphy.json import from_json, to_json

    kernel = cp.RawKernel(CIRC_PAD_SOURCE, "circ_pad_float")

    class CircPadPlugin(trt.IPluginV2DynamicExt):
        def __init__(self, fc=None):
            trt.IPluginV2DynamicExt.__init__(self)
            self.pads = []
            self.num_outputs, self.plugin_namespace = 1, ""
            self.plugin_type, self.plugin_version = "GpuCompatCircPad", "1"
            if fc is not None:
                self.pads = fc[0].data

        def get_output_datatype(self, index, input_types):
            return input_types[0]

        def get_output_dimensions(self, output_index, inputs, exprBuilder):
            out = trt.DimsExprs(inputs[0])
            for i in range(np.size(self.pads) // 2):
                out[len(out) - i - 1] = exprBuilder.operation(
                    trt.DimensionOperation.SUM, inputs[0][len(out) - i - 1], exprBuilder.constant(self.pads[i * 2] + self.pads[i * 2 + 1])
                )
            return out

        def serialize(self):
            return to_json({"pads": self.pads})

        def configure_plugin(self, inp, out):
            dims = np.array(list(inp[0].desc.dims))
            n = len(dims)
            all_pads, out_dims = np.zeros(2 * n), dims.copy()
            for i in range(np.size(self.pads) // 2):
                out_dims[n - i - 1] += self.pads[i * 2] + self.pads[i * 2 + 1]
                all_pads[2 * n - 2 * i - 2], all_pads[2 * n - 2 * i - 1] = self.pads[i * 2], self.pads[i * 2 + 1]
            self.all_pads_d = cp.asarray(all_pads, dtype=cp.int32)
            self.orig_dims_d = cp.asarray(dims, dtype=cp.int32)
            self.Y_shape_d = cp.asarray(out_dims, dtype=cp.int32)
            self.Y_len_d = cp.array([np.prod(out_dims)], dtype=cp.int32)
            self.n_out = int(np.prod(out_dims))

        def supports_format_combination(self, pos, in_out, num_inputs):
            desc = in_out[pos]
            return desc.format == trt.TensorFormat.LINEAR and desc.type == trt.DataType.FLOAT

        def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
            a = _wrap(cp, inputs[0], (int(np.prod(input_desc[0].dims)),), np.float32)
            c = _wrap(cp, outputs[0], (int(np.prod(output_desc[0].dims)),), np.float32)
            with cp.cuda.ExternalStream(stream):
                kernel(((self.n_out + 255) // 256,), (256,), (a, self.all_pads_d, self.orig_dims_d, c, self.Y_shape_d, self.Y_len_d))

        def clone(self):
            copy = CircPadPlugin()
            copy.__dict__.update(self.__dict__)
            return copy

    class CircPadPluginCreator(trt.IPluginCreator):
        def __init__(self):
            trt.IPluginCreator.__init__(self)
            self.name, self.plugin_namespace, self.plugin_version = "GpuCompatCircPad", "", "1"
            self.field_names = trt.PluginFieldCollection([trt.PluginField("pads", np.array([]), trt.PluginFieldType.INT32)])

        def create_plugin(self, name, fc):
            return CircPadPlugin(fc)

        def deserialize_plugin(self, name, data):
            plugin = CircPadPlugin()
            plugin.__dict__.update(dict(from_json(data.decode("utf-8"))))
            return plugin

    creator = CircPadPluginCreator()
    trt.get_plugin_registry().register_creator(creator, "")
    try:
        X = np.random.default_rng(0).normal(size=(100, 2, 32, 32)).astype(np.float32)
        path = str(tmp_path / "circ_pad.onnx")
        node = helper.make_node("GpuCompatCircPad", ["X"], ["Y"], pads=[1, 1, 1, 1])
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, X.shape)],
                                  [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
        save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)]), path)
        build_engine = EngineFromNetwork(NetworkFromOnnxPath(path, strongly_typed=True), CreateConfig())
        with TrtRunner(build_engine, "trt_runner") as runner:
            Y = runner.infer({"X": X})["Y"]
        np.testing.assert_array_equal(np.asarray(Y), np.pad(X, [[0, 0], [0, 0], [1, 1], [1, 1]], "wrap"))
    finally:
        trt.get_plugin_registry().deregister_creator(creator)
        plugrt.compat.install(device="cpu")


def test_non_zero_cupy_sample_with_polygraphy_trt_runner() -> None:
    pytest.importorskip("polygraphy")
    cp = _cupy()
    trt = plugrt.compat.install(device="cuda")
    from polygraphy.backend.trt import CreateConfig, TrtRunner, create_network, engine_from_network

    class NonZeroPlugin(trt.IPluginV3, trt.IPluginV3OneCore, trt.IPluginV3OneBuild, trt.IPluginV3OneRuntime):
        def __init__(self):
            trt.IPluginV3.__init__(self)
            trt.IPluginV3OneCore.__init__(self)
            trt.IPluginV3OneBuild.__init__(self)
            trt.IPluginV3OneRuntime.__init__(self)
            self.num_outputs, self.plugin_namespace, self.plugin_name, self.plugin_version = 2, "", "GpuCompatNonZero", "1"

        def get_capability_interface(self, type):
            return self

        def get_output_data_types(self, input_types):
            return [trt.DataType.INT32, trt.DataType.INT64]

        def get_output_shapes(self, inputs, shape_inputs, exprBuilder):
            dims = [trt.DimsExprs(2), trt.DimsExprs(0)]
            upper = exprBuilder.operation(trt.DimensionOperation.PROD, inputs[0][0], inputs[0][1])
            opt = exprBuilder.operation(trt.DimensionOperation.FLOOR_DIV, upper, exprBuilder.constant(2))
            dims[0][0] = exprBuilder.declare_size_tensor(1, opt, upper)
            dims[0][1] = exprBuilder.constant(2)
            return dims

        def get_fields_to_serialize(self):
            return trt.PluginFieldCollection([])

        def configure_plugin(self, inp, out):
            pass

        def on_shape_change(self, inp, out):
            pass

        def supports_format_combination(self, pos, in_out, num_inputs):
            wanted = [trt.DataType.FLOAT, trt.DataType.INT32, trt.DataType.INT64][pos]
            return in_out[pos].desc.format == trt.TensorFormat.LINEAR and in_out[pos].desc.type == wanted

        def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
            with cp.cuda.ExternalStream(stream):
                x = _wrap(cp, inputs[0], tuple(input_desc[0].dims), np.float32)
                found = cp.argwhere(x).astype(cp.int32)
                _wrap(cp, outputs[0], (int(x.size) * 2,), np.int32)[: found.size] = found.reshape(-1)
                _wrap(cp, outputs[1], (1,), np.int64)[...] = found.shape[0]

        def attach_to_context(self, context):
            return self.clone()

        def set_tactic(self, tactic):
            pass

        def clone(self):
            return NonZeroPlugin()

    class NonZeroPluginCreator(trt.IPluginCreatorV3One):
        def __init__(self):
            trt.IPluginCreatorV3One.__init__(self)
            self.name, self.plugin_namespace, self.plugin_version = "GpuCompatNonZero", "", "1"
            self.field_names = trt.PluginFieldCollection([])

        def create_plugin(self, name, fc, phase):
            return NonZeroPlugin()

    creator = NonZeroPluginCreator()
    trt.get_plugin_registry().register_creator(creator, "")
    try:
        rng = np.random.default_rng(1)
        builder, network = create_network(strongly_typed=True)
        x = network.add_input(name="X", dtype=trt.float32, shape=(64, 48))
        out = network.add_plugin_v3([x], [], creator.create_plugin("nz", trt.PluginFieldCollection([]), trt.TensorRTPhase.BUILD))
        out.get_output(0).name = "Y"
        network.mark_output(tensor=out.get_output(0))
        engine = engine_from_network((builder, network), CreateConfig())
        with TrtRunner(engine, "trt_runner") as runner:
            for density in (0.0, 0.3, 1.0, 0.7):  # one shape, other data: the size is recomputed each run
                X = (rng.random((64, 48)) < density).astype(np.float32)
                Y = np.asarray(runner.infer({"X": X})["Y"])
                Y = Y[np.lexsort(np.fliplr(Y).T)] if len(Y) else Y.reshape(0, 2)
                np.testing.assert_array_equal(Y, np.transpose(np.nonzero(X)))
    finally:
        trt.get_plugin_registry().deregister_creator(creator)
        plugrt.compat.install(device="cpu")


def _run_cuda(plan: bytes, inputs: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Run on the GPU with device copies of ``inputs``; returns (outputs, inputs after the run) on the host."""
    cp = _cupy()
    engine = plugrt.Runtime(plugrt.Logger(plugrt.Logger.ERROR), device="cuda").deserialize_cuda_engine(plan)
    context = engine.create_execution_context()
    device = {name: cp.asarray(array) for name, array in inputs.items()}
    outputs = {}
    for name, array in device.items():
        context.set_input_shape(name, array.shape)
        context.set_tensor_address(name, int(array.data.ptr))
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        if engine.get_tensor_mode(name) == plugrt.TensorIOMode.OUTPUT:
            outputs[name] = cp.full(tuple(context.get_tensor_shape(name)), 7, plugrt.nptype(engine.get_tensor_dtype(name)))
            context.set_tensor_address(name, int(outputs[name].data.ptr))
    stream = cp.cuda.Stream(non_blocking=True)
    context.execute_async_v3(stream.ptr)
    stream.synchronize()
    return {k: cp.asnumpy(v) for k, v in outputs.items()}, {k: cp.asnumpy(v) for k, v in device.items()}


def test_aliased_io_sample_in_place_on_the_gpu() -> None:
    cp = _cupy()
    trt = plugrt

    class ScatterAdd(trt.IPluginV3, trt.IPluginV3OneCore, trt.IPluginV3OneBuildV2, trt.IPluginV3OneRuntime):
        def __init__(self):
            trt.IPluginV3.__init__(self)
            trt.IPluginV3OneCore.__init__(self)
            trt.IPluginV3OneBuildV2.__init__(self)
            trt.IPluginV3OneRuntime.__init__(self)
            self.plugin_namespace, self.plugin_name, self.plugin_version, self.num_outputs = "", "GpuCompatScatterAdd", "1", 2

        def get_capability_interface(self, type):
            return self

        def get_output_data_types(self, input_types):
            return [input_types[0], trt.int64]

        def get_fields_to_serialize(self):
            return trt.PluginFieldCollection([])

        def get_output_shapes(self, inputs, shape_inputs, exprBuilder):
            return [inputs[0], trt.DimsExprs([inputs[0][0], exprBuilder.constant(1)])]

        def supports_format_combination(self, pos, in_out, num_inputs):
            desc = in_out[pos].desc
            return desc.format == trt.TensorFormat.LINEAR and desc.type == (trt.int64 if pos in (2, 4) else trt.float32)

        def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
            import cupyx

            assert inputs[0] == outputs[0]
            with cp.cuda.ExternalStream(stream):
                target = _wrap(cp, inputs[0], tuple(input_desc[0].dims), np.float32).reshape(-1)
                src = _wrap(cp, inputs[1], tuple(input_desc[1].dims), np.float32)
                idx = _wrap(cp, inputs[2], tuple(input_desc[2].dims), np.int64)
                counts = _wrap(cp, outputs[1], tuple(output_desc[1].dims), np.int64).reshape(-1)
                counts[...] = 0
                cupyx.scatter_add(target, idx - 1, src)
                cupyx.scatter_add(counts, idx - 1, cp.ones_like(idx))

        def attach_to_context(self, context):
            return self.clone()

        def set_tactic(self, tactic):
            pass

        def on_shape_change(self, inp, out):
            pass

        def configure_plugin(self, inp, out):
            pass

        def get_aliased_input(self, output_index):
            return 0 if output_index == 0 else -1

        def clone(self):
            return ScatterAdd()

    class Creator(trt.IPluginCreatorV3One):
        def __init__(self):
            trt.IPluginCreatorV3One.__init__(self)
            self.name, self.plugin_namespace, self.plugin_version = "GpuCompatScatterAdd", "", "1"
            self.field_names = trt.PluginFieldCollection([])

        def create_plugin(self, name, fc, phase):
            return ScatterAdd()

    creator = Creator()
    trt.get_plugin_registry().register_creator(creator, "")
    try:
        nodes = np.array([[1.0], [3.0], [5.0], [7.0]], np.float32)
        edges = np.array([[0, 1], [1, 2], [2, 3], [3, 0], [0, 2], [1, 3]], np.int64)
        builder = trt.Builder(trt.Logger(trt.Logger.ERROR))
        network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
        x = network.add_input("X", trt.float32, nodes.shape)
        src = network.add_input("src", trt.float32, (len(edges),))
        idx = network.add_input("idx", trt.int64, (len(edges),))
        layer = network.add_plugin_v3([x, src, idx], [], ScatterAdd())
        layer.get_output(0).name = "agg"
        layer.get_output(1).name = "counts"
        network.mark_output(layer.get_output(0))
        network.mark_output(layer.get_output(1))
        config = builder.create_builder_config()
        config.set_preview_feature(trt.PreviewFeature.ALIASED_PLUGIN_IO_10_03, True)
        plan = builder.build_serialized_network(network, config)
        inputs = {"X": np.zeros_like(nodes), "src": nodes[edges[:, 0], 0].copy(), "idx": edges[:, 1] + 1}
        out, after = _run_cuda(plan, inputs)
        expected = np.zeros(4, np.float32)
        np.add.at(expected, edges[:, 1], nodes[edges[:, 0], 0])
        np.testing.assert_allclose(out["agg"].reshape(-1), expected)
        np.testing.assert_array_equal(out["counts"].reshape(-1), np.bincount(edges[:, 1]))
        np.testing.assert_array_equal(after["X"], 0)  # the caller's device input is untouched
    finally:
        trt.get_plugin_registry().deregister_creator(creator)


ADD_SCALAR_SOURCE = r"""
extern "C" __global__ void addScalarKernel_float(const float* x, float* y, const float* scalar, const int* nElement) {
    int index = blockIdx.x * blockDim.x + threadIdx.x;
    if (index >= *nElement) return;
    y[index] = x[index] + *scalar;
}
"""


def test_cookbook_add_scalar_cupy_with_tactics_and_timing_cache() -> None:
    cp = _cupy()
    trt = plugrt
    kernel = cp.RawKernel(ADD_SCALAR_SOURCE, "addScalarKernel_float")
    timed: list[tuple[int, tuple[int, ...], tuple[int, ...]]] = []

    class AddScalar(trt.IPluginV3, trt.IPluginV3OneCore, trt.IPluginV3OneBuild, trt.IPluginV3OneRuntime):
        def __init__(self, scalar=0.0):
            trt.IPluginV3.__init__(self)
            trt.IPluginV3OneCore.__init__(self)
            trt.IPluginV3OneBuild.__init__(self)
            trt.IPluginV3OneRuntime.__init__(self)
            self.plugin_name, self.plugin_version, self.plugin_namespace, self.num_outputs = "GpuCompatAddScalar", "1", "", 1
            self.scalar, self.tactic, self.phase = scalar, 0, trt.TensorRTPhase.BUILD
            self.timing_cache_id = ""

        def get_capability_interface(self, plugin_capability_type) -> trt.IPluginCapability:
            return self

        def get_output_data_types(self, input_types):
            return [input_types[0]]

        def get_output_shapes(self, inputs, shape_inputs, expr_builder):
            return [trt.DimsExprs(inputs[0])]

        def supports_format_combination(self, pos, in_out, num_inputs):
            return in_out[pos].desc.type == trt.float32 and in_out[pos].desc.format == trt.TensorFormat.LINEAR

        def get_valid_tactics(self):
            return [1, 2]

        def set_tactic(self, tactic):
            self.tactic = tactic

        def on_shape_change(self, ptd_in, ptd_out):
            pass

        def configure_plugin(self, dptd_in, dptd_out):
            pass

        def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
            n = int(np.prod(np.array(input_desc[0].dims)))
            if self.phase == trt.TensorRTPhase.BUILD:
                timed.append((self.tactic, tuple(input_desc[0].dims), tuple(output_desc[0].dims)))
            x, y = _wrap(cp, inputs[0], (n,), np.float32), _wrap(cp, outputs[0], (n,), np.float32)
            with cp.cuda.ExternalStream(stream):
                if self.tactic == 1:
                    kernel(((n + 255) // 256, 1, 1), (256, 1, 1), (x, y, cp.asarray([self.scalar], cp.float32), cp.asarray([n], cp.int32)))
                else:
                    cp.add(x, cp.float32(self.scalar), out=y)

        def attach_to_context(self, resource_context):
            return self.clone()

        def get_fields_to_serialize(self):
            return trt.PluginFieldCollection([trt.PluginField("scalar", np.array(self.scalar, dtype=np.float32), trt.PluginFieldType.FLOAT32)])

        def clone(self):
            copy = AddScalar()
            copy.__dict__.update(self.__dict__)
            return copy

    class Creator(trt.IPluginCreatorV3One):
        def __init__(self):
            trt.IPluginCreatorV3One.__init__(self)
            self.name, self.plugin_version, self.plugin_namespace = "GpuCompatAddScalar", "1", ""
            self.field_names = trt.PluginFieldCollection([trt.PluginField("scalar", np.array([]), trt.PluginFieldType.FLOAT32)])

        def create_plugin(self, name, fc, phase):
            plugin = AddScalar(float(fc[0].data[0]) if len(fc) else 0.0)
            plugin.phase = phase
            return plugin

    creator = Creator()
    trt.get_plugin_registry().register_creator(creator, "")
    try:
        builder = trt.Builder(trt.Logger(trt.Logger.ERROR), device="cuda")  # tactics are timed on the GPU, as in TensorRT
        network = builder.create_network(0)
        x = network.add_input("inputT0", trt.float32, [-1, -1, -1])
        fields = trt.PluginFieldCollection([trt.PluginField("scalar", np.array(1.0, dtype=np.float32), trt.PluginFieldType.FLOAT32)])
        a = network.add_plugin_v3([x], [], creator.create_plugin("a", fields, trt.TensorRTPhase.BUILD))
        b = network.add_plugin_v3([a.get_output(0)], [], creator.create_plugin("b", fields, trt.TensorRTPhase.BUILD))
        b.get_output(0).name = "outputT0"
        network.mark_output(b.get_output(0))
        config = builder.create_builder_config()
        profile = builder.create_optimization_profile()
        profile.set_shape("inputT0", [1, 1, 1], [3, 4, 5], [6, 8, 10])
        config.add_optimization_profile(profile)
        plan = builder.build_serialized_network(network, config)
        assert len(timed) == 2 * 3 and {(i, o) for _, i, o in timed} == {((3, 4, 5), (3, 4, 5))}  # timed once, at opt
        data = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
        out, _ = _run_cuda(plan, {"inputT0": data})
        np.testing.assert_array_equal(out["outputT0"], data + 2)
    finally:
        trt.get_plugin_registry().deregister_creator(creator)
