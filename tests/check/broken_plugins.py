"""Deliberately broken plugins (describe and serialize side): each makes one classic mistake.

``ScaleBias`` (y = x * scale + bias, IPluginV2DynamicExt) is written correctly;
every subclass breaks exactly one rule. ``broken_runtime_plugins`` holds the
mistakes made while running, and other families; ``broken_cases`` the table the
tests walk.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

import plugrt as trt

FLOATS = (trt.DataType.FLOAT, trt.DataType.HALF)
LINEAR = trt.TensorFormat.LINEAR


class ScaleBias(trt.IPluginV2DynamicExt):
    """y = x * scale + bias, any shape, FP32 or FP16. Correct."""

    TYPE = "CheckScaleBias"

    def __init__(self, scale: float = 1.0, bias: float = 0.0) -> None:
        trt.IPluginV2DynamicExt.__init__(self)
        self.num_outputs = 1
        self.plugin_type = self.TYPE
        self.plugin_version = "1"
        self.plugin_namespace = ""
        self.scale = scale
        self.bias = bias

    @classmethod
    def from_fields(cls, fc: trt.PluginFieldCollection) -> ScaleBias:
        values = {f.name: float(f.data[0]) for f in fc}
        return cls(values.get("scale", 1.0), values.get("bias", 0.0))

    @classmethod
    def from_bytes(cls, data: bytes) -> ScaleBias:
        reader = trt.SerializationReader(data, magic=0x53424941, version=1)
        plugin = cls(reader.read_f32(), reader.read_f32())
        reader.finish()
        return plugin

    def get_output_datatype(self, index, input_types):
        return input_types[0]

    def get_output_dimensions(self, output_index, inputs, exprBuilder):
        return trt.DimsExprs(inputs[0])

    def supports_format_combination(self, pos, in_out, num_inputs):
        desc = in_out[pos]
        if desc.format != LINEAR:
            return False
        if pos == 0:
            return desc.type in FLOATS
        return desc.type == in_out[0].type

    def compute(self, x: np.ndarray, y: np.ndarray) -> None:
        np.multiply(x, self.scale, out=y, casting="unsafe")
        y += self.bias

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        self.compute(trt.as_array(inputs[0], input_desc[0]), trt.as_array(outputs[0], output_desc[0]))
        return 0

    def serialize(self):
        writer = trt.SerializationWriter(magic=0x53424941, version=1)
        writer.write_f32(self.scale)
        writer.write_f32(self.bias)
        return writer.to_bytes()

    def clone(self):
        return type(self)(self.scale, self.bias)


class ScaleBiasCreator(trt.IPluginCreator):
    """Creates any ScaleBias variant; the variant decides how fields and bytes are read."""

    def __init__(self, plugin_class: type = ScaleBias) -> None:
        trt.IPluginCreator.__init__(self)
        self.plugin_class = plugin_class
        self.name = plugin_class.TYPE
        self.plugin_version = "1"
        self.field_names = trt.PluginFieldCollection(
            [
                trt.PluginField("scale", np.float32(1), trt.PluginFieldType.FLOAT32),
                trt.PluginField("bias", np.float32(0), trt.PluginFieldType.FLOAT32),
            ]
        )

    def create_plugin(self, name, fc):
        return self.plugin_class.from_fields(fc)

    def deserialize_plugin(self, name, data):
        return self.plugin_class.from_bytes(data)


# --- one broken variant per check -----------------------------------------------------------


class WrongIdentity(ScaleBias):
    TYPE = "CheckWrongIdentity"

    def __init__(self, scale=1.0, bias=0.0):
        super().__init__(scale, bias)
        self.plugin_type = "CheckWrongIdentiy"  # misspelt: the creator is CheckWrongIdentity


class IgnoresField(ScaleBias):
    TYPE = "CheckIgnoresField"

    @classmethod
    def from_fields(cls, fc):
        values = {f.name: float(f.data[0]) for f in fc}
        return cls(values.get("Scale", 1.0), values.get("bias", 0.0))  # wrong case: 'scale' is never read


class ShortWrite(ScaleBias):
    """Declares one more column than enqueue writes."""

    TYPE = "CheckShortWrite"

    def get_output_dimensions(self, output_index, inputs, exprBuilder):
        out = trt.DimsExprs(inputs[0])
        last = len(out) - 1
        out[last] = exprBuilder.operation(trt.DimensionOperation.SUM, inputs[0][last], exprBuilder.constant(1))
        return out

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        x = trt.as_array(inputs[0], input_desc[0])
        y = trt.as_array(outputs[0], output_desc[0])
        self.compute(x, y[..., : x.shape[-1]])
        return 0


class Overrun(ScaleBias):
    """Writes one row past the end of its output."""

    TYPE = "CheckOverrun"

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        x = trt.as_array(inputs[0], input_desc[0])
        d = output_desc[0]
        y = trt.as_array(outputs[0], trt.PluginTensorDesc(trt.Dims([d.dims[0] + 1, *d.dims[1:]]), d.type, d.format))
        self.compute(x, y[: x.shape[0]])
        y[x.shape[0] :] = 0
        return 0


class ModifiesInput(ScaleBias):
    TYPE = "CheckModifiesInput"

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        x = trt.as_array(inputs[0], input_desc[0])
        x *= self.scale  # in place on the input
        np.add(x, self.bias, out=trt.as_array(outputs[0], output_desc[0]), casting="unsafe")
        return 0


class CountingShapes(ScaleBias):
    TYPE = "CheckCountingShapes"

    def __init__(self, scale=1.0, bias=0.0):
        super().__init__(scale, bias)
        self.shape_calls = 0

    def get_output_dimensions(self, output_index, inputs, exprBuilder):
        self.shape_calls += 1  # state in a shape hook
        return trt.DimsExprs(inputs[0])


class WrongSize(ScaleBias):
    TYPE = "CheckWrongSize"

    @property
    def serialization_size(self):
        return len(self.serialize()) + 4  # counts a field serialize() no longer writes


class ForgetsBias(ScaleBias):
    TYPE = "CheckForgetsBias"

    @classmethod
    def from_bytes(cls, data):
        reader = trt.SerializationReader(data, magic=0x53424941, version=1)
        scale = reader.read_f32()
        reader.read_f32()  # bias read but dropped
        reader.finish()
        return cls(scale, 0.0)


class NoHeader(ScaleBias):
    """Raw struct packing: no magic, no length check."""

    TYPE = "CheckNoHeader"

    def serialize(self):
        return struct.pack("<ff", self.scale, self.bias)

    @classmethod
    def from_bytes(cls, data):
        scale, bias = struct.unpack_from("<ff", data)
        return cls(scale, bias)


class SharedState(ScaleBias):
    """Clones share one dict that configure_plugin writes."""

    TYPE = "CheckSharedState"

    def __init__(self, scale=1.0, bias=0.0):
        super().__init__(scale, bias)
        self.state: dict[str, Any] = {}

    def configure_plugin(self, inp, out):
        self.state["dims"] = tuple(inp[0].desc.dims)

    def clone(self):
        copy = SharedState(self.scale, self.bias)
        copy.state = self.state  # shared, not copied
        return copy


class CloneDropsBias(ScaleBias):
    TYPE = "CheckCloneDropsBias"

    def clone(self):
        return CloneDropsBias(self.scale)  # bias not copied


class NeverAccepts(ScaleBias):
    TYPE = "CheckNeverAccepts"

    def supports_format_combination(self, pos, in_out, num_inputs):
        return in_out[pos].type == trt.DataType.BF16  # a type nothing offers


class KeepsChoice(ScaleBias):
    TYPE = "CheckKeepsChoice"

    def supports_format_combination(self, pos, in_out, num_inputs):
        self.last_type = in_out[pos].type  # state in a format question
        return super().supports_format_combination(pos, in_out, num_inputs)


class DeclaresHalf(ScaleBias):
    TYPE = "CheckDeclaresHalf"

    def get_output_datatype(self, index, input_types):
        return trt.DataType.HALF  # but supports_format_combination wants the input's type


class PeeksAhead(ScaleBias):
    TYPE = "CheckPeeksAhead"

    def supports_format_combination(self, pos, in_out, num_inputs):
        desc = in_out[pos]
        if desc.format != LINEAR or desc.type not in FLOATS:
            return False
        return in_out[0].type == in_out[1].type  # position 0 reads position 1


class AssumesFloat(ScaleBias):
    """Accepts FP16 but always views buffers as FP32."""

    TYPE = "CheckAssumesFloat"

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        def as_float(d):
            return trt.PluginTensorDesc(d.dims, trt.DataType.FLOAT, d.format)

        self.compute(
            trt.as_array(inputs[0], as_float(input_desc[0])), trt.as_array(outputs[0], as_float(output_desc[0]))
        )
        return 0
