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

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import FieldError, ShapeError
from ..interfaces.descriptors import DynamicPluginTensorDesc, PluginTensorDesc
from ..shape.builder import DimsExprs, IExprBuilder
from ._base import LibraryCreator, check_dim
from ._norm import DeviceWeights, leaky_relu, standardize
from ._scaffold import DynamicLibraryPlugin
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


class InstanceNormalizationPlugin(DynamicLibraryPlugin):
    """Instance normalization with per-channel scale and bias, optionally followed by a leaky ReLU.

    Its bytes start with the plugin version, as TensorRT's do.
    """

    NAME, VERSION = "InstanceNormalization_TRT", "1"
    MAGIC, FORMAT, TAG = _MAGIC, _FORMAT, VERSION
    SCHEMA = Schema(NAME, FIELDS)

    def __init__(self, params: dict[str, Any]) -> None:
        super().__init__(params)
        self.weights = DeviceWeights(scales=params["scales"], bias=params["bias"])
        channels = self.weights.host["scales"].size
        if channels == 0 or channels != self.weights.host["bias"].size:
            raise FieldError(
                f"{self.NAME}: fields 'scales' and 'bias' must hold the same non-zero number of values, "
                f"got {channels} and {self.weights.host['bias'].size}"
            )

    def get_output_dimensions(
        self, output_index: int, inputs: list[DimsExprs], exprBuilder: IExprBuilder
    ) -> DimsExprs:
        if len(inputs[0]) not in (3, 4, 5):
            raise ShapeError(f"{self.NAME}: expects an input [N, C, ...] of rank 3 to 5, got rank {len(inputs[0])}")
        return DimsExprs(inputs[0])

    def configure_plugin(self, inp: list[DynamicPluginTensorDesc], out: list[DynamicPluginTensorDesc]) -> None:
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

    def workspace_layout(self, input_desc: Sequence[PluginTensorDesc]) -> WorkspaceLayout:
        shape = tuple(input_desc[0].dims)
        return WorkspaceLayout().add("rows", (shape[0] * shape[1], int(np.prod(shape[2:]))), np.float32)

    def compute(self, xp: Any, inputs: list[Any], outputs: list[Any], scratch: dict[str, Any]) -> None:
        (x,), (y,), rows = inputs, outputs, scratch["rows"]
        standardize(x.reshape(rows.shape), self.params["epsilon"], out=rows, xp=xp)
        per_image = rows.reshape(x.shape[0], x.shape[1], -1)
        per_image *= self.weights.device("scales")[:, None]
        per_image += self.weights.device("bias")[:, None]
        if self.params["relu"] > 0:
            leaky_relu(xp, rows, self.params["alpha"])
        xp.copyto(y, rows.reshape(y.shape), casting="same_kind")

    def clone(self) -> InstanceNormalizationPlugin:
        copy: InstanceNormalizationPlugin = super().clone()
        if self.weights.uploaded:  # initialized: the clone gets backend copies of its own
            copy.initialize()
        return copy


class InstanceNormalizationPluginV2(InstanceNormalizationPlugin):
    """Version 2: same fields, same result."""

    VERSION = TAG = "2"


class InstanceNormalizationPluginCreator(LibraryCreator):
    """Creator of ``InstanceNormalization_TRT`` version 1."""

    plugin_class = InstanceNormalizationPlugin


class InstanceNormalizationPluginV2Creator(LibraryCreator):
    """Creator of ``InstanceNormalization_TRT`` version 2."""

    plugin_class = InstanceNormalizationPluginV2
