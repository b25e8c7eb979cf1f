"""Adapters: one per plugin interface family, driving TensorRT's call order."""

from __future__ import annotations

from typing import Any

from ...core.errors import TypeMismatchError
from ..v2 import IPluginV2, IPluginV2DynamicExt
from ..v3 import IPluginV3
from .family import PluginAdapter
from .node import PluginNode
from .v2_dynamic import V2DynamicAdapter
from .v2_static import V2StaticAdapter
from .v3 import V3Adapter

__all__ = ["FAMILIES", "PluginAdapter", "PluginNode", "adapter_for_family", "adapter_for_plugin"]

FAMILIES: dict[str, type[PluginAdapter]] = {
    V2StaticAdapter.family: V2StaticAdapter,
    V2DynamicAdapter.family: V2DynamicAdapter,
    V3Adapter.family: V3Adapter,
}


def adapter_for_plugin(plugin: Any, layer: str, logger: Any) -> PluginAdapter:
    """The adapter for ``plugin``'s interface family."""
    if isinstance(plugin, IPluginV2DynamicExt):
        return V2DynamicAdapter(layer, logger)
    if isinstance(plugin, IPluginV2):
        return V2StaticAdapter(layer, logger)
    if isinstance(plugin, IPluginV3):
        return V3Adapter(layer, logger)
    raise TypeMismatchError(f"layer {layer!r}: {type(plugin).__name__} is not an IPluginV2 or IPluginV3 plugin")


def adapter_for_family(family: str, layer: str, logger: Any) -> PluginAdapter:
    """The adapter named ``family`` in a plan (unknown names raise PlanFormatError)."""
    from ...core.errors import PlanFormatError

    cls = FAMILIES.get(family)
    if cls is None:
        raise PlanFormatError(f"layer {layer!r}: unknown plugin family {family!r}; known: {sorted(FAMILIES)}")
    return cls(layer, logger)
