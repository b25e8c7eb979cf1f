"""A data-dependent-shape plugin (IPluginV3): the indices of non-zero elements of a 2-D input.

Output 0 is ``[count, 2]`` (row, column) int32 indices; output 1 is a 0-d int32
size tensor holding ``count``. ``count`` is declared with
``declare_size_tensor(1, opt, upper)``: buffers are sized by ``upper`` and the
real shape is known only after ``enqueue``, so applications read output 0
through an ``IOutputAllocator``.
"""

from __future__ import annotations

import numpy as np

import plugrt as trt
from plugrt.examples import register_once


class NonZeroPlugin(trt.IPluginV3, trt.IPluginV3OneCore, trt.IPluginV3OneBuild, trt.IPluginV3OneRuntime):
    """Row-major non-zero indices of a 2-D tensor."""

    def __init__(self) -> None:
        trt.IPluginV3.__init__(self)
        trt.IPluginV3OneCore.__init__(self)
        trt.IPluginV3OneBuild.__init__(self)
        trt.IPluginV3OneRuntime.__init__(self)
        self.num_outputs = 2
        self.plugin_namespace = ""
        self.plugin_name = "NonZeroPlugin"
        self.plugin_version = "1"

    def get_capability_interface(self, type: trt.PluginCapabilityType) -> object:  # noqa: A002
        return self

    def get_output_data_types(self, input_types: list[trt.DataType]) -> list[trt.DataType]:
        return [trt.DataType.INT32, trt.DataType.INT32]

    def get_output_shapes(
        self, inputs: list[trt.DimsExprs], shape_inputs: list[trt.DimsExprs], exprBuilder: trt.IExprBuilder
    ) -> list[trt.DimsExprs]:
        upper = exprBuilder.operation(trt.DimensionOperation.PROD, inputs[0][0], inputs[0][1])
        opt = exprBuilder.operation(trt.DimensionOperation.FLOOR_DIV, upper, exprBuilder.constant(2))
        count = exprBuilder.declare_size_tensor(1, opt, upper)
        return [trt.DimsExprs([count, exprBuilder.constant(2)]), trt.DimsExprs(0)]

    def supports_format_combination(self, pos: int, in_out: list[trt.DynamicPluginTensorDesc], num_inputs: int) -> bool:
        desc = in_out[pos].desc
        if desc.format != trt.TensorFormat.LINEAR:
            return False
        if pos == 0:
            return desc.type in (trt.DataType.FLOAT, trt.DataType.HALF)
        return desc.type == trt.DataType.INT32

    def configure_plugin(self, inp: list[trt.DynamicPluginTensorDesc], out: list[trt.DynamicPluginTensorDesc]) -> None:
        pass

    def on_shape_change(self, inp: list[trt.PluginTensorDesc], out: list[trt.PluginTensorDesc]) -> None:
        pass

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
        rows, cols = np.nonzero(x)
        count = len(rows)
        # Output 0 is sized by the upper bound until the count is known: never write past it.
        capacity = output_desc[0].dims[0]
        if count > capacity:
            raise ValueError(f"NonZero: {count} non-zero elements, but the output holds at most {capacity}")
        indices = trt.as_array(outputs[0], trt.PluginTensorDesc(trt.Dims((count, 2)), trt.DataType.INT32))
        indices[:, 0] = rows
        indices[:, 1] = cols
        trt.as_array(outputs[1], output_desc[1])[...] = count

    def attach_to_context(self, context: trt.IPluginResourceContext) -> NonZeroPlugin:
        return self.clone()

    def get_fields_to_serialize(self) -> trt.PluginFieldCollection:
        return trt.PluginFieldCollection()

    def set_tactic(self, tactic: int) -> None:
        pass

    def clone(self) -> NonZeroPlugin:
        copy = NonZeroPlugin()
        copy.plugin_namespace = self.plugin_namespace
        return copy


class NonZeroPluginCreator(trt.IPluginCreatorV3One):
    """Creates NonZeroPlugin (no fields)."""

    def __init__(self) -> None:
        trt.IPluginCreatorV3One.__init__(self)
        self.name = "NonZeroPlugin"
        self.plugin_namespace = ""
        self.plugin_version = "1"
        self.field_names = trt.PluginFieldCollection()

    def create_plugin(self, name: str, fc: trt.PluginFieldCollection, phase: trt.TensorRTPhase) -> NonZeroPlugin:
        plugin = NonZeroPlugin()
        plugin.plugin_namespace = self.plugin_namespace
        return plugin


def register(namespace: str = "") -> NonZeroPluginCreator:
    """Register the creator once (idempotent) and return it."""
    return register_once(NonZeroPluginCreator, namespace)  # type: ignore[no-any-return]

register()
