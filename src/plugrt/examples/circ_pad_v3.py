"""The circular-padding plugin as an IPluginV3 (TensorRT 10 style).

Fields travel through ``get_fields_to_serialize`` and come back through the
creator's ``create_plugin(name, fc, TensorRTPhase.RUNTIME)``. Importing this
module registers the creator.
"""

from __future__ import annotations

import numpy as np

import plugrt as trt
from plugrt.examples import register_once


class CircPadPluginV3(trt.IPluginV3, trt.IPluginV3OneCore, trt.IPluginV3OneBuild, trt.IPluginV3OneRuntime):
    """Pads the last len(pads)//2 dimensions circularly."""

    def __init__(self, fc: trt.PluginFieldCollection | None = None) -> None:
        trt.IPluginV3.__init__(self)
        trt.IPluginV3OneCore.__init__(self)
        trt.IPluginV3OneBuild.__init__(self)
        trt.IPluginV3OneRuntime.__init__(self)
        self.num_outputs = 1
        self.plugin_namespace = ""
        self.plugin_name = "CircPadPluginV3"
        self.plugin_version = "1"
        self.pads: list[int] = []
        self.widths: list[tuple[int, int]] = []
        if fc is not None:
            for field in fc:
                if field.name == "pads":
                    self.pads = [int(v) for v in field.data]

    def get_capability_interface(self, type: trt.PluginCapabilityType) -> object:  # noqa: A002
        return self

    def get_output_data_types(self, input_types: list[trt.DataType]) -> list[trt.DataType]:
        return [input_types[0]]

    def get_output_shapes(
        self, inputs: list[trt.DimsExprs], shape_inputs: list[trt.DimsExprs], exprBuilder: trt.IExprBuilder
    ) -> list[trt.DimsExprs]:
        out = trt.DimsExprs(inputs[0])
        rank = len(out)
        for i in range(len(self.pads) // 2):
            extra = exprBuilder.constant(self.pads[2 * i] + self.pads[2 * i + 1])
            out[rank - i - 1] = exprBuilder.operation(trt.DimensionOperation.SUM, inputs[0][rank - i - 1], extra)
        return [out]

    def supports_format_combination(self, pos: int, in_out: list[trt.DynamicPluginTensorDesc], num_inputs: int) -> bool:
        desc = in_out[pos].desc
        if desc.format != trt.TensorFormat.LINEAR:
            return False
        if pos == 0:
            return desc.type in (trt.DataType.FLOAT, trt.DataType.HALF)
        return desc.type == in_out[0].desc.type

    def configure_plugin(self, inp: list[trt.DynamicPluginTensorDesc], out: list[trt.DynamicPluginTensorDesc]) -> None:
        pass

    def on_shape_change(self, inp: list[trt.PluginTensorDesc], out: list[trt.PluginTensorDesc]) -> None:
        rank = len(inp[0].dims)
        self.widths = [(0, 0)] * (rank - len(self.pads) // 2)
        self.widths += [(self.pads[2 * i], self.pads[2 * i + 1]) for i in reversed(range(len(self.pads) // 2))]

    def enqueue(
        self,
        input_desc: list[trt.PluginTensorDesc],
        output_desc: list[trt.PluginTensorDesc],
        inputs: list[int],
        outputs: list[int],
        workspace: int,
        stream: int,
    ) -> None:
        x = trt.as_array(inputs[0], input_desc[0])
        trt.as_array(outputs[0], output_desc[0])[...] = np.pad(x, self.widths, mode="wrap")

    def attach_to_context(self, context: trt.IPluginResourceContext) -> CircPadPluginV3:
        return self.clone()

    def get_fields_to_serialize(self) -> trt.PluginFieldCollection:
        return trt.PluginFieldCollection(
            [trt.PluginField("pads", np.array(self.pads, dtype=np.int32), trt.PluginFieldType.INT32)]
        )

    def set_tactic(self, tactic: int) -> None:
        pass

    def clone(self) -> CircPadPluginV3:
        copy = CircPadPluginV3()
        copy.plugin_namespace = self.plugin_namespace
        copy.pads = list(self.pads)
        copy.widths = list(self.widths)
        return copy


class CircPadPluginV3Creator(trt.IPluginCreatorV3One):
    """Creates CircPadPluginV3 for building and for running."""

    def __init__(self) -> None:
        trt.IPluginCreatorV3One.__init__(self)
        self.name = "CircPadPluginV3"
        self.plugin_namespace = ""
        self.plugin_version = "1"
        self.field_names = trt.PluginFieldCollection(
            [trt.PluginField("pads", np.array([], dtype=np.int32), trt.PluginFieldType.INT32)]
        )

    def create_plugin(self, name: str, fc: trt.PluginFieldCollection, phase: trt.TensorRTPhase) -> CircPadPluginV3:
        plugin = CircPadPluginV3(fc)
        plugin.plugin_namespace = self.plugin_namespace
        return plugin


def register(namespace: str = "") -> CircPadPluginV3Creator:
    """Register the creator once (idempotent) and return it."""
    return register_once(CircPadPluginV3Creator, namespace)  # type: ignore[no-any-return]

register()
