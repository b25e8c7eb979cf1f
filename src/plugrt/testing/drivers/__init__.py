"""Drivers: one per plugin interface family, calling hooks in TensorRT's order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...interfaces.v2 import IPluginV2, IPluginV2DynamicExt
from ...interfaces.v3 import IPluginV3
from ..spec import CheckUsageError, InputRange
from .base import Combination, Driver, OutputRule
from .v2_dynamic import V2DynamicDriver
from .v2_static import V2StaticDriver
from .v3 import V3Driver

__all__ = ["Combination", "Driver", "OutputRule", "driver_for"]


def driver_for(plugin: Any, ranges: Sequence[InputRange]) -> Driver:
    """The driver for ``plugin``'s family."""
    if isinstance(plugin, IPluginV2DynamicExt):
        return V2DynamicDriver(ranges)
    if isinstance(plugin, IPluginV2):
        return V2StaticDriver(ranges)
    if isinstance(plugin, IPluginV3):
        return V3Driver(ranges)
    raise CheckUsageError(
        f"{type(plugin).__name__} is not an IPluginV2, IPluginV2Ext, IPluginV2DynamicExt or IPluginV3 plugin"
    )
