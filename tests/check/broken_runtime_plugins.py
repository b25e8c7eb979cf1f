"""Deliberately broken plugins (run side, and the IPluginV2Ext and IPluginV3 families)."""

from __future__ import annotations

import time

import numpy as np
from broken_plugins import ScaleBias

import plugrt as trt
from plugrt.examples.circ_pad_v3 import CircPadPluginV3, CircPadPluginV3Creator
from plugrt.examples.nonzero_v3 import NonZeroPlugin, NonZeroPluginCreator

from testing_plugins import ScalePluginV2Ext, ScaleV2ExtCreator


class StaleShape(ScaleBias):
    """Remembers the first concrete shape it is configured with and never updates it."""

    TYPE = "CheckStaleShape"

    def __init__(self, scale=1.0, bias=0.0):
        super().__init__(scale, bias)
        self.shape: tuple[int, ...] | None = None

    def configure_plugin(self, inp, out):
        dims = tuple(inp[0].desc.dims)
        if self.shape is None and all(d >= 0 for d in dims):
            self.shape = dims

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        desc = trt.PluginTensorDesc(trt.Dims(self.shape), input_desc[0].type)
        self.compute(trt.as_array(inputs[0], desc), trt.as_array(outputs[0], desc))
        return 0

    def clone(self):
        copy = StaleShape(self.scale, self.bias)
        copy.shape = self.shape
        return copy


class FixedShapeConfigure(ScaleBias):
    """Sizes a buffer from the dims configure_plugin gets: -1 at build time."""

    TYPE = "CheckFixedShapeConfigure"

    def configure_plugin(self, inp, out):
        self.scratch = np.empty(tuple(inp[0].desc.dims), np.float32)


def _max_bytes(desc) -> int:
    return int(np.prod(tuple(desc.dims))) * 4


class SmallWorkspace(ScaleBias):
    TYPE = "CheckSmallWorkspace"

    def get_workspace_size(self, input_desc, output_desc):
        return _max_bytes(input_desc[0]) // 2  # half of what enqueue uses

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        scratch = trt.as_array(workspace, trt.PluginTensorDesc(input_desc[0].dims, trt.DataType.FLOAT))
        np.multiply(trt.as_array(inputs[0], input_desc[0]), self.scale, out=scratch, casting="unsafe")
        np.add(scratch, self.bias, out=trt.as_array(outputs[0], output_desc[0]), casting="unsafe")
        return 0


class DirtyWorkspace(SmallWorkspace):
    """Accumulates into the workspace without clearing it first."""

    TYPE = "CheckDirtyWorkspace"

    def get_workspace_size(self, input_desc, output_desc):
        return _max_bytes(input_desc[0])

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        scratch = trt.as_array(workspace, trt.PluginTensorDesc(input_desc[0].dims, trt.DataType.FLOAT))
        scratch += trt.as_array(inputs[0], input_desc[0]) * self.scale  # reads what it never wrote
        np.add(scratch, self.bias, out=trt.as_array(outputs[0], output_desc[0]), casting="unsafe")
        return 0


class UndeclaredWorkspace(ScaleBias):
    """Uses a workspace but declares none (the default get_workspace_size returns 0)."""

    TYPE = "CheckUndeclaredWorkspace"

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        scratch = trt.as_array(workspace, trt.PluginTensorDesc(input_desc[0].dims, trt.DataType.FLOAT))
        np.multiply(trt.as_array(inputs[0], input_desc[0]), self.scale, out=scratch, casting="unsafe")
        np.add(scratch, self.bias, out=trt.as_array(outputs[0], output_desc[0]), casting="unsafe")
        return 0


class LeakyInitialize(ScaleBias):
    TYPE = "CheckLeakyInitialize"

    def initialize(self):
        self.table = trt.device_malloc(1024)
        return 0

    def terminate(self):
        pass  # never frees self.table


class CloneFreesShared(ScaleBias):
    """Clones share the engine plugin's buffer, and a clone's destroy frees it."""

    TYPE = "CheckCloneFreesShared"

    def __init__(self, scale=1.0, bias=0.0):
        super().__init__(scale, bias)
        self.table = None

    def initialize(self):
        self.table = trt.device_malloc(8)
        self.table.as_array((1,), np.float32)[0] = self.bias
        return 0

    def terminate(self):
        if self.table is not None:
            self.table.free()

    def destroy(self):
        if self.table is not None:
            self.table.free()  # frees the buffer the engine's plugin still uses

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        bias = float(self.table.as_array((1,), np.float32)[0])
        y = trt.as_array(outputs[0], output_desc[0])
        np.multiply(trt.as_array(inputs[0], input_desc[0]), self.scale, out=y, casting="unsafe")
        y += bias
        return 0

    def clone(self):
        copy = CloneFreesShared(self.scale, self.bias)
        copy.table = self.table
        return copy


class SharedScratch(ScaleBias):
    """Every clone uses one class-level scratch array."""

    TYPE = "CheckSharedScratch"
    scratch = np.zeros(1 << 16, np.float64)

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        x = trt.as_array(inputs[0], input_desc[0])
        temp = SharedScratch.scratch[: x.size].reshape(x.shape)
        temp[...] = x
        time.sleep(0.0005)  # a pause (I/O, a device sync) lets another thread overwrite the shared scratch (sleep(0) need not switch threads on 3.10)
        self.compute(temp, trt.as_array(outputs[0], output_desc[0]))
        return 0


class Drifting(ScaleBias):
    TYPE = "CheckDrifting"

    def __init__(self, scale=1.0, bias=0.0):
        super().__init__(scale, bias)
        self.runs = 0

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        self.runs += 1
        y = trt.as_array(outputs[0], output_desc[0])
        self.compute(trt.as_array(inputs[0], input_desc[0]), y)
        y += 0.5 * self.runs
        return 0


class DefaultStreamOnly(ScaleBias):
    TYPE = "CheckDefaultStreamOnly"

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        if stream != 0:
            raise RuntimeError("kernel launched on the legacy default stream; synchronising with it failed")
        return super().enqueue(input_desc, output_desc, inputs, outputs, workspace, stream)


class WrongSign(ScaleBias):
    TYPE = "CheckWrongSign"

    def compute(self, x, y):
        np.multiply(x, self.scale, out=y, casting="unsafe")
        y -= self.bias


# --- the other families ----------------------------------------------------------------------


class V2ExtForgetsDims(ScalePluginV2Ext):
    """An implicit-batch plugin that does not serialize what configure_plugin told it."""

    def __init__(self, scale: float = 1.0) -> None:
        super().__init__(scale)
        self.plugin_type = "CheckV2ExtForgetsDims"

    def serialize(self):
        writer = trt.SerializationWriter(magic=0x5343414C, version=2)
        writer.write_f32(self.scale)
        return writer.to_bytes()

    def clone(self):
        copy = V2ExtForgetsDims(self.scale)
        copy.dims, copy.dtype = list(self.dims), self.dtype
        return copy


class V2ExtForgetsDimsCreator(ScaleV2ExtCreator):
    def __init__(self) -> None:
        super().__init__()
        self.name = "CheckV2ExtForgetsDims"

    def create_plugin(self, name, fc):
        return V2ExtForgetsDims(super().create_plugin(name, fc).scale)

    def deserialize_plugin(self, name, data):
        reader = trt.SerializationReader(data, magic=0x5343414C, version=2)
        plugin = V2ExtForgetsDims(reader.read_f32())
        reader.finish()
        return plugin  # dims and dtype are lost: the runtime plugin is never configured again


class V3DropsFields(CircPadPluginV3):
    def __init__(self, fc=None):
        super().__init__(fc)
        self.plugin_name = "CheckV3DropsFields"

    def get_fields_to_serialize(self):
        return trt.PluginFieldCollection()  # the pads are not saved

    def clone(self):
        copy = V3DropsFields()
        copy.pads, copy.widths = list(self.pads), list(self.widths)
        return copy


class V3DropsFieldsCreator(CircPadPluginV3Creator):
    def __init__(self) -> None:
        super().__init__()
        self.name = "CheckV3DropsFields"

    def create_plugin(self, name, fc, phase):
        return V3DropsFields(fc)


class V3AttachesItself(CircPadPluginV3):
    def __init__(self, fc=None):
        super().__init__(fc)
        self.plugin_name = "CheckV3AttachesItself"

    def attach_to_context(self, context):
        return self  # contexts would share one plugin

    def clone(self):
        copy = V3AttachesItself()
        copy.pads, copy.widths = list(self.pads), list(self.widths)
        return copy


class V3AttachesItselfCreator(CircPadPluginV3Creator):
    def __init__(self) -> None:
        super().__init__()
        self.name = "CheckV3AttachesItself"

    def create_plugin(self, name, fc, phase):
        return V3AttachesItself(fc)


class NonZeroOvercount(NonZeroPlugin):
    """Writes a count above the upper bound its shape hook declared."""

    def __init__(self) -> None:
        super().__init__()
        self.plugin_name = "CheckNonZeroOvercount"

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        super().enqueue(input_desc, output_desc, inputs, outputs, workspace, stream)
        trt.as_array(outputs[1], output_desc[1])[...] += 1000

    def clone(self):
        return NonZeroOvercount()


class NonZeroOvercountCreator(NonZeroPluginCreator):
    def __init__(self) -> None:
        super().__init__()
        self.name = "CheckNonZeroOvercount"

    def create_plugin(self, name, fc, phase):
        return NonZeroOvercount()
