"""``InstanceNormalization_TRT`` versions 1 and 2 (IPluginV2DynamicExt).

``y = scales[c] * (x - mean) / sqrt(var + epsilon) + bias[c]`` with mean and variance
per image and channel over the spatial dimensions (input ``[N, C, H(, W)]`` or
``[N, C, D, H, W]``); with ``relu`` > 0 negative outputs are multiplied by ``alpha``
(a leaky ReLU; alpha 0 is a ReLU). Versions 1 and 2 compute the same thing (TensorRT's
differ only in their CUDA kernels).

``scales``/``bias`` go to backend memory in ``initialize()`` through
:class:`~plugrt.plugins._norm.DeviceWeights` (the same lifecycle as the LayerNorm
example: clones of an initialized plugin upload copies of their own); ``enqueue`` reads
them there, on the engine's device like everything else it computes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import plugrt as trt

from ._base import FLOAT_TYPES, LibraryCreator, check_dim, plugin_arrays
from ._norm import DeviceWeights, leaky_relu, standardize
from ._schema import FLOAT, FLOATS, INT, FieldSpec, Schema, at_least
from ._workspace import WorkspaceLayout

__all__ = [
    "InstanceNormalizationPlugin",
    "InstanceNormalizationPluginCreator",
    "InstanceNormalizationPluginV2",
    "InstanceNormalizationPluginV2Creator",
]

_MAGIC, _FORMAT = 0x494E4F52, 1  # "INOR"
FIELDS = (
    FieldSpec(
        "epsilon",
        FLOAT,
        1e-5,
        at_least(0.0),
        ambiguous="TensorRT's creator defaults it to 0, the ONNX InstanceNormalization it implements to 1e-5",
    ),
    FieldSpec("scales", FLOATS, doc="one scale per channel"),
    FieldSpec("bias", FLOATS, doc="one bias per channel"),
    FieldSpec("relu", INT, 0, at_least(0), doc="> 0: apply a leaky ReLU with slope alpha"),
    FieldSpec("alpha", FLOAT, 0.0),
)


class InstanceNormalizationPlugin(trt.IPluginV2DynamicExt):
    """Instance normalization with per-channel scale and bias, optionally followed by a leaky ReLU."""

    NAME, VERSION = "InstanceNormalization_TRT", "1"
    SCHEMA = Schema(NAME, FIELDS)

    def __init__(self, params: dict[str, Any]) -> None:
        trt.IPluginV2DynamicExt.__init__(self)
        self.num_outputs = 1
        self.plugin_type, self.plugin_version, self.plugin_namespace = self.NAME, self.VERSION, ""
        self.params = dict(params)
        self.weights = DeviceWeights(scales=params["scales"], bias=params["bias"])
        channels = self.weights.host["scales"].size
        if channels == 0 or channels != self.weights.host["bias"].size:
            raise trt.FieldError(
                f"{self.NAME}: fields 'scales' and 'bias' must hold the same non-zero number of values, "
                f"got {channels} and {self.weights.host['bias'].size}"
            )

    def get_output_datatype(self, index: int, input_types: list[trt.DataType]) -> trt.DataType:
        return input_types[0]

    def get_output_dimensions(
        self, output_index: int, inputs: list[trt.DimsExprs], exprBuilder: trt.IExprBuilder
    ) -> trt.DimsExprs:
        if len(inputs[0]) not in (3, 4, 5):
            raise trt.ShapeError(f"{self.NAME}: expects an input [N, C, ...] of rank 3 to 5, got rank {len(inputs[0])}")
        return trt.DimsExprs(inputs[0])

    def supports_format_combination(self, pos: int, in_out: list[trt.PluginTensorDesc], num_inputs: int) -> bool:
        desc = in_out[pos]
        return desc.format == trt.TensorFormat.LINEAR and desc.type in FLOAT_TYPES and desc.type == in_out[0].type

    def configure_plugin(self, inp: list[trt.DynamicPluginTensorDesc], out: list[trt.DynamicPluginTensorDesc]) -> None:
        check_dim(
            self.NAME, "input dim 1 (channels = len(scales))", inp[0].desc.dims[1], self.weights.host["scales"].size
        )

    def initialize(self) -> int:
        self.weights.upload()
        return 0

    def terminate(self) -> None:
        self.weights.release()

    def destroy(self) -> None:
        self.terminate()

    @staticmethod
    def _layout(dims: trt.Dims) -> WorkspaceLayout:
        shape = tuple(dims)
        return WorkspaceLayout().add("rows", (shape[0] * shape[1], int(np.prod(shape[2:]))), np.float32)

    def get_workspace_size(
        self, input_desc: list[trt.PluginTensorDesc], output_desc: list[trt.PluginTensorDesc]
    ) -> int:
        return self._layout(input_desc[0].dims).nbytes

    def enqueue(
        self,
        input_desc: list[trt.PluginTensorDesc],
        output_desc: list[trt.PluginTensorDesc],
        inputs: list[int],
        outputs: list[int],
        workspace: int,
        stream: int,
    ) -> int:
        with plugin_arrays(inputs, input_desc, outputs, output_desc, stream) as (xp, (x,), (y,)):
            rows = self._layout(input_desc[0].dims).bind(workspace, xp=xp)["rows"]
            standardize(x.reshape(rows.shape), self.params["epsilon"], out=rows, xp=xp)
            per_image = rows.reshape(x.shape[0], x.shape[1], -1)
            per_image *= self.weights.device("scales")[:, None]
            per_image += self.weights.device("bias")[:, None]
            if self.params["relu"] > 0:
                leaky_relu(xp, rows, self.params["alpha"])
            xp.copyto(y, rows.reshape(y.shape), casting="same_kind")
        return 0

    def serialize(self) -> bytes:
        writer = trt.SerializationWriter(magic=_MAGIC, version=_FORMAT)
        writer.write_str(self.VERSION)
        self.SCHEMA.write(writer, self.params)
        return writer.to_bytes()

    @classmethod
    def deserialize(cls, data: bytes) -> InstanceNormalizationPlugin:
        reader = trt.SerializationReader(data, magic=_MAGIC, version=_FORMAT)
        version = reader.read_str()
        if version != cls.VERSION:
            raise trt.SerializationError(f"{cls.NAME}: bytes of version {version!r} given to version {cls.VERSION!r}")
        plugin = cls(cls.SCHEMA.read(reader))
        reader.finish()
        return plugin

    def clone(self) -> InstanceNormalizationPlugin:
        copy = type(self)(self.params)
        copy.plugin_namespace = self.plugin_namespace
        if self.weights.uploaded:  # initialized: the clone gets backend copies of its own
            copy.initialize()
        return copy


class InstanceNormalizationPluginV2(InstanceNormalizationPlugin):
    """Version 2: same fields, same result."""

    VERSION = "2"


class InstanceNormalizationPluginCreator(LibraryCreator):
    """Creator of ``InstanceNormalization_TRT`` version 1."""

    plugin_class = InstanceNormalizationPlugin


class InstanceNormalizationPluginV2Creator(LibraryCreator):
    """Creator of ``InstanceNormalization_TRT`` version 2."""

    plugin_class = InstanceNormalizationPluginV2
