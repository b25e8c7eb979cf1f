"""A circular-padding plugin written against TensorRT's Python API (IPluginV2DynamicExt).

Only the import line differs from a TensorRT plugin: change ``plugrt`` to
``tensorrt`` (and the NumPy work in ``enqueue`` to CuPy) and it runs there.
Importing this module registers the creator with the global registry.
"""

from __future__ import annotations

import numpy as np

import plugrt as trt
from plugrt.examples import register_once


class CircPadPlugin(trt.IPluginV2DynamicExt):
    """Pads the last len(pads)//2 dimensions circularly; pads = [before_k, after_k, ...] from the last dim."""

    def __init__(self, fc: trt.PluginFieldCollection | None = None) -> None:
        trt.IPluginV2DynamicExt.__init__(self)
        self.num_outputs = 1
        self.plugin_namespace = ""
        self.plugin_type = "CircPadPlugin"
        self.plugin_version = "1"
        self.pads: list[int] = []
        self.input_shape: tuple[int, ...] = ()
        if fc is not None:
            for field in fc:
                if field.name == "pads":
                    self.pads = [int(v) for v in field.data]
        if len(self.pads) % 2:
            raise ValueError(f"CircPadPlugin: pads needs an even number of values, got {self.pads}")

    def get_output_datatype(self, index: int, input_types: list[trt.DataType]) -> trt.DataType:
        return input_types[0]

    def get_output_dimensions(
        self, output_index: int, inputs: list[trt.DimsExprs], exprBuilder: trt.IExprBuilder
    ) -> trt.DimsExprs:
        out = trt.DimsExprs(inputs[0])
        rank = len(out)
        for i in range(len(self.pads) // 2):
            extra = exprBuilder.constant(self.pads[2 * i] + self.pads[2 * i + 1])
            out[rank - i - 1] = exprBuilder.operation(trt.DimensionOperation.SUM, inputs[0][rank - i - 1], extra)
        return out

    def supports_format_combination(self, pos: int, in_out: list[trt.PluginTensorDesc], num_inputs: int) -> bool:
        desc = in_out[pos]
        if desc.format != trt.TensorFormat.LINEAR:
            return False
        if pos == 0:
            return desc.type in (trt.DataType.FLOAT, trt.DataType.HALF)
        return desc.type == in_out[0].type

    def configure_plugin(self, inp: list[trt.DynamicPluginTensorDesc], out: list[trt.DynamicPluginTensorDesc]) -> None:
        self.input_shape = tuple(inp[0].desc.dims)

    def enqueue(
        self,
        input_desc: list[trt.PluginTensorDesc],
        output_desc: list[trt.PluginTensorDesc],
        inputs: list[int],
        outputs: list[int],
        workspace: int,
        stream: int,
    ) -> int:
        x = trt.as_array(inputs[0], input_desc[0])
        y = trt.as_array(outputs[0], output_desc[0])
        widths = [(0, 0)] * (x.ndim - len(self.pads) // 2)
        widths += [(self.pads[2 * i], self.pads[2 * i + 1]) for i in reversed(range(len(self.pads) // 2))]
        y[...] = np.pad(x, widths, mode="wrap")
        return 0

    def serialize(self) -> bytes:
        writer = trt.SerializationWriter(magic=0x43495243, version=1)
        writer.write_array(np.asarray(self.pads, dtype=np.int32))
        return writer.to_bytes()

    def clone(self) -> CircPadPlugin:
        copy = CircPadPlugin()
        copy.plugin_namespace = self.plugin_namespace
        copy.pads = list(self.pads)
        copy.input_shape = self.input_shape
        return copy


class CircPadPluginCreator(trt.IPluginCreator):
    """Creates CircPadPlugin from fields or from serialized bytes."""

    def __init__(self) -> None:
        trt.IPluginCreator.__init__(self)
        self.name = "CircPadPlugin"
        self.plugin_namespace = ""
        self.plugin_version = "1"
        self.field_names = trt.PluginFieldCollection(
            [trt.PluginField("pads", np.array([], dtype=np.int32), trt.PluginFieldType.INT32)]
        )

    def create_plugin(self, name: str, fc: trt.PluginFieldCollection) -> CircPadPlugin:
        plugin = CircPadPlugin(fc)
        plugin.plugin_namespace = self.plugin_namespace
        return plugin

    def deserialize_plugin(self, name: str, data: bytes) -> CircPadPlugin:
        reader = trt.SerializationReader(data, magic=0x43495243, version=1)
        plugin = CircPadPlugin()
        plugin.plugin_namespace = self.plugin_namespace
        plugin.pads = [int(v) for v in reader.read_array()]
        reader.finish()
        return plugin


def register(namespace: str = "") -> CircPadPluginCreator:
    """Register the creator once (idempotent) and return it."""
    return register_once(CircPadPluginCreator, namespace)  # type: ignore[no-any-return]

register()
