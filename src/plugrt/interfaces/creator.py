"""Plugin creators: the factories the registry looks up by (name, version, namespace)."""

from __future__ import annotations

import typing
from typing import Any

from .fields import PluginFieldCollection
from .hooks import missing_hook
from .v3 import TensorRTPhase

__all__ = ["IPluginCreator", "IPluginCreatorInterface", "IPluginCreatorV3One", "interface_family"]


class IPluginCreatorInterface:
    """Common attributes of creators: ``name``, ``plugin_version``, ``plugin_namespace``,
    ``field_names`` (a :class:`PluginFieldCollection` describing accepted fields)."""

    name: str = ""
    plugin_version: str = "1"
    plugin_namespace: str = ""

    def __init__(self) -> None:
        self.field_names = PluginFieldCollection()

    @property
    def field_names(self) -> PluginFieldCollection:
        """The fields this creator accepts (a collection of its own per creator)."""
        fields = self.__dict__.get("_field_names")
        if fields is None:
            fields = self.__dict__["_field_names"] = PluginFieldCollection()
        return fields

    @field_names.setter
    def field_names(self, value: PluginFieldCollection) -> None:
        self.__dict__["_field_names"] = value


class IPluginCreator(IPluginCreatorInterface):
    """Creates and deserializes IPluginV2-family plugins."""

    def create_plugin(self, name: str, field_collection: PluginFieldCollection) -> Any:
        """A new plugin from fields. Required."""
        missing_hook(self, "create_plugin", "IPluginCreator")

    def deserialize_plugin(self, name: str, serialized_plugin: bytes) -> Any:
        """A plugin from the bytes its ``serialize`` wrote. Required."""
        missing_hook(self, "deserialize_plugin", "IPluginCreator")


class IPluginCreatorV3One(IPluginCreatorInterface):
    """Creates IPluginV3 plugins, for building or (from serialized fields) for running."""

    def create_plugin(self, name: str, field_collection: PluginFieldCollection, phase: TensorRTPhase) -> Any:
        """A new plugin from fields for ``phase``. Required."""
        missing_hook(self, "create_plugin", "IPluginCreatorV3One")


def interface_family(item: Any, probe: bool = False) -> str:
    """The interface family of a plugin, or of the plugins a creator makes, as TensorRT names it.

    ``"IPluginV3"``, ``"IPluginV2DynamicExt"``, ``"IPluginV2Ext"`` or ``"IPluginV2"``. A V2 creator
    is named by the plugin class it declares (a ``plugin_class`` attribute) or its ``create_plugin`` is
    annotated to return; when neither is known and ``probe`` is true, by the plugin it creates from no
    fields (as ``plugrt check`` does without ``--fields``), else ``"IPluginV2"`` (the family's base).
    Anything else is named by its class name. ``plugrt plugins`` and ``plugrt check`` both name families with it.

    >>> from plugrt.examples.circ_pad_v2 import CircPadPluginCreator
    >>> interface_family(CircPadPluginCreator())
    'IPluginV2DynamicExt'
    """
    from .v2 import IPluginV2, IPluginV2DynamicExt, IPluginV2Ext
    from .v3 import IPluginV3

    kinds: tuple[tuple[type, str], ...] = (
        (IPluginV3, "IPluginV3"),
        (IPluginV2DynamicExt, "IPluginV2DynamicExt"),
        (IPluginV2Ext, "IPluginV2Ext"),
        (IPluginV2, "IPluginV2"),
    )
    if isinstance(item, IPluginCreatorV3One):
        return "IPluginV3"
    if isinstance(item, IPluginCreator):
        made = getattr(item, "plugin_class", None)
        if not isinstance(made, type):
            try:
                made = typing.get_type_hints(type(item).create_plugin).get("return")
            except Exception:  # unresolvable annotations: the family's base name
                made = None
        if not (isinstance(made, type) and issubclass(made, IPluginV2)):
            made = _probe(item) if probe else None
        item_type = made if isinstance(made, type) and issubclass(made, IPluginV2) else IPluginV2
        return next(name for kind, name in kinds if issubclass(item_type, kind))
    return next((name for kind, name in kinds if isinstance(item, kind)), type(item).__name__)


def _probe(creator: IPluginCreator) -> type | None:
    """The class of the plugin ``creator`` makes from no fields (None when it will not make one)."""
    try:
        plugin = creator.create_plugin(creator.name, PluginFieldCollection())
    except Exception:
        return None
    destroy = getattr(plugin, "destroy", None)
    if callable(destroy):
        try:
            destroy()
        except Exception:  # a probe's teardown must not fail the listing
            pass
    return type(plugin)
