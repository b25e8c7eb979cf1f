"""The base of plugrt's enums: integer values as TensorRT's, printed as ``Name.MEMBER``."""

from __future__ import annotations

import enum

__all__ = ["DeviceType", "EngineCapability", "PluginCreatorVersion", "PreviewFeature", "TrtEnum"]


class TrtEnum(enum.IntEnum):
    """An IntEnum that prints as ``DataType.FLOAT`` (as TensorRT's enums do), not as a number."""

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"


class PreviewFeature(TrtEnum):
    """TensorRT's opt-in preview features (``IBuilderConfig.set_preview_feature``).

    ``ALIASED_PLUGIN_IO_10_03`` makes the builder honour in-place plugin outputs
    (``IPluginV3OneBuildV2.get_aliased_input``); ``RUNTIME_ACTIVATION_RESIZE_10_10`` is
    accepted and has no effect (plugrt sizes activation memory per profile anyway).
    """

    ALIASED_PLUGIN_IO_10_03 = 0
    RUNTIME_ACTIVATION_RESIZE_10_10 = 1


class EngineCapability(TrtEnum):
    """What an engine may be built for. plugrt builds ``STANDARD`` engines only."""

    STANDARD = 0
    SAFETY = 1
    DLA_STANDALONE = 2


class DeviceType(TrtEnum):
    """Where a layer runs in TensorRT. plugrt has no DLA: only ``GPU`` (the engine's device) is valid."""

    GPU = 0
    DLA = 1


class PluginCreatorVersion(TrtEnum):
    """Which creator interface a creator implements (TensorRT's ``PluginCreatorVersion``)."""

    V1 = 0
    V1_PYTHON = 64
