"""Plugins in INT8: negotiation offers INT8 under BuilderFlag.INT8, PluginTensorDesc.scale carries each
tensor's scale (build and run), and the data arrive quantized with it; a V2Ext plugin learns INT8 from
the types configure_plugin gets."""

from __future__ import annotations

import json

import numpy as np
import pytest

import plugrt as trt

X_RANGE, Y_RANGE = 2.0, 1.0


class Int8ReluV2(trt.IPluginV2DynamicExt):
    """y = relu(x) on INT8 data: q_y = clip(rint(max(q_x, 0) * scale_x / scale_y)); records the scales it is given."""

    def __init__(self):
        trt.IPluginV2DynamicExt.__init__(self)
        self.plugin_type = "Int8ReluTest"
        self.plugin_version = "1"
        self.num_outputs = 1
        self.plugin_namespace = ""
        self.seen = {"negotiation": [], "configure": [], "enqueue": []}

    def get_output_datatype(self, index, input_types):
        return input_types[0]

    def clone(self):
        copy = Int8ReluV2()
        copy.seen = self.seen
        return copy

    def get_output_dimensions(self, output_index, inputs, expr_builder):
        return trt.DimsExprs(inputs[0])

    def supports_format_combination(self, pos, in_out, num_inputs):
        desc = in_out[pos]
        if desc.type == trt.DataType.INT8:
            self.seen["negotiation"].append((pos, desc.scale))
        return desc.type == trt.DataType.INT8 and desc.format == trt.TensorFormat.LINEAR

    def configure_plugin(self, inp, out):
        self.seen["configure"].append((inp[0].desc.type, inp[0].desc.scale, out[0].desc.type, out[0].desc.scale))

    def get_workspace_size(self, inp, out):
        return 0

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        self.seen["enqueue"].append((input_desc[0].scale, output_desc[0].scale))
        x = trt.as_array(inputs[0], input_desc[0])
        y = trt.as_array(outputs[0], output_desc[0])
        assert x.dtype == np.int8 and y.dtype == np.int8
        ratio = input_desc[0].scale / output_desc[0].scale
        y[...] = np.clip(np.rint(np.maximum(x.astype(np.float32), 0) * ratio), -128, 127).astype(np.int8)

    def serialize(self):
        return json.dumps({}).encode()


class Int8ReluV2Creator(trt.IPluginCreator):
    def __init__(self):
        trt.IPluginCreator.__init__(self)
        self.name = "Int8ReluTest"
        self.plugin_version = "1"
        self.plugin_namespace = ""
        self.field_names = trt.PluginFieldCollection()
        self.made = []

    def create_plugin(self, name, fc):
        plugin = Int8ReluV2()
        self.made.append(plugin)
        return plugin

    def deserialize_plugin(self, name, data):
        plugin = Int8ReluV2()
        self.made.append(plugin)
        return plugin


class Int8ScaleV2Ext(trt.IPluginV2Ext):
    """A V2Ext plugin that takes INT8 or FLOAT; records the types configure_plugin gives."""

    def __init__(self):
        trt.IPluginV2Ext.__init__(self)
        self.num_outputs = 1
        self.plugin_type = "Int8ScaleV2ExtTest"
        self.plugin_version = "1"
        self.plugin_namespace = ""
        self.types = {}
        self.dims = []

    def get_output_shape(self, index, input_shapes):
        return trt.Dims(input_shapes[0])

    def get_output_data_type(self, index, input_types):
        return input_types[0]

    def supports_format(self, dtype, format):
        return dtype in (trt.DataType.INT8,) and format == trt.TensorFormat.LINEAR

    def configure_plugin(self, input_shapes, output_shapes, input_types, output_types, input_is_broadcasted,
                         output_is_broadcasted, format, max_batch_size):
        self.types["configure"] = (list(input_types), list(output_types))
        self.dims = list(input_shapes[0])

    def execute_async(self, batch_size, inputs, outputs, workspace, stream_handle):
        desc = trt.PluginTensorDesc(trt.Dims([batch_size, *self.dims]), trt.DataType.INT8)
        trt.as_array(outputs[0], desc)[...] = trt.as_array(inputs[0], desc)
        return 0

    def serialize(self):
        return json.dumps(self.dims).encode()

    def clone(self):
        copy = Int8ScaleV2Ext()
        copy.types, copy.dims = self.types, list(self.dims)
        return copy


class Int8ScaleV2ExtCreator(trt.IPluginCreator):
    def __init__(self):
        trt.IPluginCreator.__init__(self)
        self.name = "Int8ScaleV2ExtTest"
        self.plugin_version = "1"
        self.plugin_namespace = ""
        self.field_names = trt.PluginFieldCollection()

    def create_plugin(self, name, fc):
        return Int8ScaleV2Ext()

    def deserialize_plugin(self, name, data):
        plugin = Int8ScaleV2Ext()
        plugin.dims = json.loads(bytes(data))
        return plugin


@pytest.fixture(scope="module")
def creators():
    registry = trt.get_plugin_registry()
    made = [Int8ReluV2Creator(), Int8ScaleV2ExtCreator()]
    for creator in made:
        registry.register_creator(creator, "")
    yield made
    for creator in made:
        registry.deregister_creator(creator)


def _run(data: bytes, x: np.ndarray) -> np.ndarray:
    engine = trt.Runtime(trt.Logger(trt.Logger.ERROR)).deserialize_cuda_engine(data)
    context = engine.create_execution_context()
    y = np.empty(x.shape, np.float32)
    context.set_tensor_address("x", x.ctypes.data)
    context.set_tensor_address("y", y.ctypes.data)
    assert context.execute_async_v3(0)
    return y


def _network(plugin, ranges=True):
    builder = trt.Builder(trt.Logger(trt.Logger.ERROR))
    network = builder.create_network(0)
    x = network.add_input("x", trt.DataType.FLOAT, (2, 8))
    layer = network.add_plugin_v2([x], plugin)
    y = layer.get_output(0)
    y.name = "y"
    network.mark_output(y)
    if ranges:
        x.set_dynamic_range(-X_RANGE, X_RANGE)
        y.set_dynamic_range(-Y_RANGE, Y_RANGE)
    config = builder.create_builder_config()
    config.set_flag(trt.BuilderFlag.INT8)
    return builder, network, config


def test_a_plugin_gets_each_tensors_scale_and_quantized_data(creators):
    plugin = creators[0].create_plugin("relu", trt.PluginFieldCollection())
    builder, network, config = _network(plugin)
    data = bytes(builder.build_serialized_network(network, config))
    sx, sy = X_RANGE / 127, Y_RANGE / 127
    assert (0, pytest.approx(sx)) in plugin.seen["negotiation"]
    assert (1, pytest.approx(sy)) in plugin.seen["negotiation"]
    assert plugin.seen["configure"][-1] == (trt.DataType.INT8, pytest.approx(sx), trt.DataType.INT8, pytest.approx(sy))
    x = np.linspace(-3, 3, 16, dtype=np.float32).reshape(2, 8)
    y = _run(data, x)
    runtime_plugin = creators[0].made[-1]
    assert runtime_plugin.seen["enqueue"] == [(pytest.approx(sx), pytest.approx(sy))]
    qx = np.clip(np.rint(x / sx), -128, 127)
    expected = np.clip(np.rint(np.maximum(qx, 0) * sx / sy), -128, 127) * sy
    np.testing.assert_allclose(y, expected, rtol=1e-6)
    assert np.abs(y - np.clip(np.maximum(x, 0), 0, Y_RANGE)).max() <= sy  # within one step of relu, saturated at 1


def test_without_a_range_the_plugin_sees_scale_one_and_a_warning_is_logged(creators):
    plugin = creators[0].create_plugin("relu", trt.PluginFieldCollection())
    builder, network, config = _network(plugin, ranges=False)
    messages = []

    class Recorder(trt.ILogger):
        def log(self, severity, msg):
            messages.append(msg)

    builder = trt.Builder(Recorder())
    builder.build_serialized_network(network, config)
    assert plugin.seen["configure"][-1][1] == 1.0
    assert any("'x' has no INT8 scale" in m and "set_dynamic_range" in m for m in messages)


def test_a_v2ext_plugin_learns_int8_from_configure_plugin(creators):
    plugin = creators[1].create_plugin("copy", trt.PluginFieldCollection())
    builder = trt.Builder(trt.Logger(trt.Logger.ERROR))
    network = builder.create_network(0)
    x = network.add_input("x", trt.DataType.FLOAT, (2, 8))
    x.set_dynamic_range(-1.0, 1.0)
    layer = network.add_plugin_v2([x], plugin)
    y = layer.get_output(0)
    y.name = "y"
    y.set_dynamic_range(-1.0, 1.0)
    network.mark_output(y)
    config = builder.create_builder_config()
    config.set_flag(trt.BuilderFlag.INT8)
    data = bytes(builder.build_serialized_network(network, config))
    assert plugin.types["configure"] == ([trt.DataType.INT8], [trt.DataType.INT8])
    x_value = np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8)
    np.testing.assert_allclose(_run(data, x_value), np.rint(x_value * 127) / 127, atol=1e-6)
