"""``GroupNormalizationPlugin`` version 1 (IPluginV2DynamicExt).

Inputs: ``x`` ``[N, C, H, W]``, ``scale`` ``[C]``, ``bias`` ``[C]`` (tensors, not fields).
The ``C`` channels are split into ``num_groups`` groups of ``C / num_groups``; mean and
variance are taken per image and group, then
``y = scale[c] * (x - mean) / sqrt(var + eps) + bias[c]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import ShapeError
from ..interfaces.descriptors import DynamicPluginTensorDesc, PluginTensorDesc
from ..shape.builder import DimsExprs, IExprBuilder
from ._base import LibraryCreator, check_dim
from ._norm import standardize
from ._scaffold import DynamicLibraryPlugin
from ._schema import FLOAT, INT, FieldSpec, Schema, at_least
from ._workspace import WorkspaceLayout

__all__ = ["GroupNormalizationPlugin", "GroupNormalizationPluginCreator"]

_MAGIC, _FORMAT = 0x474E4F52, 1  # "GNOR"


class GroupNormalizationPlugin(DynamicLibraryPlugin):
    """Group normalization with per-channel scale and bias given as inputs."""

    NAME, VERSION = "GroupNormalizationPlugin", "1"
    MAGIC, FORMAT = _MAGIC, _FORMAT
    SCHEMA = Schema(
        NAME,
        (
            FieldSpec("eps", FLOAT, 1e-5, at_least(0.0), doc="added to the variance"),
            FieldSpec("num_groups", INT, 1, at_least(1), doc="must divide the channel count"),
        ),
    )

    def get_output_dimensions(
        self, output_index: int, inputs: list[DimsExprs], exprBuilder: IExprBuilder
    ) -> DimsExprs:
        ranks = [len(i) for i in inputs]
        if ranks != [4, 1, 1]:
            raise ShapeError(f"{self.NAME}: expects x [N, C, H, W], scale [C] and bias [C], got ranks {ranks}")
        return DimsExprs(inputs[0])

    def configure_plugin(self, inp: list[DynamicPluginTensorDesc], out: list[DynamicPluginTensorDesc]) -> None:
        channels, groups = inp[0].desc.dims[1], self.params["num_groups"]
        if channels >= 0 and channels % groups:
            raise ShapeError(
                f"{self.NAME}: num_groups ({groups}) must divide the channel count, got {channels} channels"
            )
        check_dim(self.NAME, "scale length (channels)", inp[1].desc.dims[0], channels)
        check_dim(self.NAME, "bias length (channels)", inp[2].desc.dims[0], channels)

    def workspace_layout(self, input_desc: Sequence[PluginTensorDesc]) -> WorkspaceLayout:
        shape, groups = tuple(input_desc[0].dims), self.params["num_groups"]
        return WorkspaceLayout().add("rows", (shape[0] * groups, int(np.prod(shape[1:])) // groups), np.float32)

    def compute(self, xp: Any, inputs: list[Any], outputs: list[Any], scratch: dict[str, Any]) -> None:
        (x, scale, bias), (y,), rows = inputs, outputs, scratch["rows"]
        standardize(x.reshape(rows.shape), self.params["eps"], out=rows, xp=xp)
        per_channel = rows.reshape(x.shape[0], x.shape[1], -1)
        per_channel *= scale.astype(np.float32)[:, None]
        per_channel += bias.astype(np.float32)[:, None]
        xp.copyto(y, per_channel.reshape(y.shape), casting="same_kind")


class GroupNormalizationPluginCreator(LibraryCreator):
    """Creator of ``GroupNormalizationPlugin`` version 1 (fields eps, num_groups)."""

    plugin_class = GroupNormalizationPlugin
