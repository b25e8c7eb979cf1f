"""Plugin creators: the factories the registry looks up by (name, version, namespace)."""

from __future__ import annotations

from typing import Any

from .fields import PluginFieldCollection
from .hooks import missing_hook
from .v3 import TensorRTPhase

__all__ = ["IPluginCreator", "IPluginCreatorInterface", "IPluginCreatorV3One"]


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
