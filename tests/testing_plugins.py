"""Plugins used by the engine tests: a static-shape V2Ext plugin, and helpers to build and run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import plugrt as trt


class ScalePluginV2Ext(trt.IPluginV2Ext):
    """y = x * scale, implicit batch (IPluginV2Ext): the plugin sees dims without the batch."""

    def __init__(self, scale: float = 1.0) -> None:
        trt.IPluginV2Ext.__init__(self)
        self.num_outputs = 1
        self.plugin_type = "ScaleV2Ext"
        self.plugin_version = "1"
        self.plugin_namespace = ""
        self.scale = scale
        self.dims: list[int] = []
        self.dtype = trt.DataType.FLOAT

    def get_output_shape(self, index: int, input_shapes: list[trt.Dims]) -> trt.Dims:
        return trt.Dims(input_shapes[0])

    def supports_format(self, dtype: trt.DataType, format: trt.TensorFormat) -> bool:
        return dtype in (trt.DataType.FLOAT, trt.DataType.HALF) and format == trt.TensorFormat.LINEAR

    def configure_plugin(self, input_shapes: Any, output_shapes: Any, input_types: Any, output_types: Any,
                         input_is_broadcasted: Any, output_is_broadcasted: Any, format: Any, max_batch_size: int) -> None:
        self.dims = list(input_shapes[0])
        self.dtype = input_types[0]

    def execute_async(self, batch_size: int, inputs: list[int], outputs: list[int], workspace: int, stream_handle: int) -> int:
        shape = trt.Dims([batch_size, *self.dims])
        x = trt.as_array(inputs[0], trt.PluginTensorDesc(shape, self.dtype))
        y = trt.as_array(outputs[0], trt.PluginTensorDesc(shape, self.dtype))
        np.multiply(x, self.scale, out=y, casting="unsafe")
        return 0

    def serialize(self) -> bytes:
        writer = trt.SerializationWriter(magic=0x5343414C, version=1)
        writer.write_f32(self.scale)
        writer.write_i32(int(self.dtype))
        writer.write_array(np.asarray(self.dims, dtype=np.int64))
        return writer.to_bytes()

    def clone(self) -> ScalePluginV2Ext:
        copy = ScalePluginV2Ext(self.scale)
        copy.dims, copy.dtype = list(self.dims), self.dtype
        return copy


class ScaleV2ExtCreator(trt.IPluginCreator):
    """Creator of ScalePluginV2Ext (field: scale FLOAT32)."""

    def __init__(self) -> None:
        trt.IPluginCreator.__init__(self)
        self.name = "ScaleV2Ext"
        self.plugin_version = "1"
        self.field_names = trt.PluginFieldCollection([trt.PluginField("scale", np.float32(1), trt.PluginFieldType.FLOAT32)])

    def create_plugin(self, name: str, fc: trt.PluginFieldCollection) -> ScalePluginV2Ext:
        scale = 1.0
        for field in fc:
            if field.name == "scale":
                scale = float(field.data[0])
        return ScalePluginV2Ext(scale)

    def deserialize_plugin(self, name: str, data: bytes) -> ScalePluginV2Ext:
        reader = trt.SerializationReader(data, magic=0x5343414C, version=1)
        plugin = ScalePluginV2Ext(reader.read_f32())
        plugin.dtype = trt.DataType(reader.read_i32())
        plugin.dims = [int(v) for v in reader.read_array()]
        reader.finish()
        return plugin


def ensure_registered(creator: Any, namespace: str = "") -> Any:
    """Register ``creator`` unless an equal key is registered; return the registered one."""
    registry = trt.get_plugin_registry()
    for existing in registry.all_creators:
        if (existing.name, existing.plugin_version, existing.plugin_namespace) == (creator.name, creator.plugin_version, namespace):
            return existing
    registry.register_creator(creator, namespace)
    return creator


def fields(**values: Any) -> trt.PluginFieldCollection:
    """A field collection from keyword arguments (ints -> INT32 arrays, floats -> FLOAT32)."""
    collection = trt.PluginFieldCollection()
    for name, value in values.items():
        array = np.atleast_1d(np.asarray(value))
        kind = trt.PluginFieldType.FLOAT32 if array.dtype.kind == "f" else trt.PluginFieldType.INT32
        collection.append(trt.PluginField(name, array.astype(np.float32 if kind == trt.PluginFieldType.FLOAT32 else np.int32), kind))
    return collection


def build(network: trt.INetworkDefinition, builder: trt.Builder,
          profiles: Sequence[dict[str, tuple[Sequence[int], Sequence[int], Sequence[int]]]] = (),
          flags: Sequence[trt.BuilderFlag] = ()) -> bytes:
    """Build ``network`` with the given profiles ({input: (min, opt, max)}) and flags."""
    config = builder.create_builder_config()
    for flag in flags:
        config.set_flag(flag)
    for shapes in profiles:
        profile = builder.create_optimization_profile()
        for name, (lo, opt, hi) in shapes.items():
            profile.set_shape(name, lo, opt, hi)
        config.add_optimization_profile(profile)
    return builder.build_serialized_network(network, config)


def run(context: trt.IExecutionContext, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Set shapes and addresses, run, and return every output as a new array."""
    engine = context.engine
    for name, array in inputs.items():
        assert context.set_input_shape(name, array.shape)
        context.set_tensor_address(name, array.ctypes.data)
    outputs = {}
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        if engine.get_tensor_mode(name) == trt.TensorIOMode.OUTPUT:
            out = np.zeros(tuple(context.get_tensor_shape(name)), dtype=trt.nptype(engine.get_tensor_dtype(name)))
            context.set_tensor_address(name, out.ctypes.data)
            outputs[name] = out
    context.execute_async_v3(0)
    return outputs


def circ_pad_network(builder: trt.Builder) -> trt.INetworkDefinition:
    """x [-1, 4] -> the example CircPadPlugin (IPluginV2DynamicExt, pads [1, 1]) in layer 'pad' -> output."""
    from plugrt.examples import circ_pad_v2

    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (-1, 4))
    layer = network.add_plugin_v2([x], circ_pad_v2.register().create_plugin("pad", fields(pads=[1, 1])))
    layer.name = "pad"
    network.mark_output(layer.get_output(0))
    return network
