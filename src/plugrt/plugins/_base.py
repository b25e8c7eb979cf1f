"""The creator every library plugin shares, and small helpers for plugin hooks."""

from __future__ import annotations

from typing import Any, ClassVar

from ..core.errors import ShapeError
from ..core.logger import ILogger
from ..core.types import DataType
from ..plugin.creator import IPluginCreator
from ..plugin.fields import PluginFieldCollection

__all__ = ["FLOAT_TYPES", "LibraryCreator", "check_dim"]

#: Element types the library's float tensors accept (kernels compute in float32 either way).
FLOAT_TYPES = (DataType.FLOAT, DataType.HALF)


class LibraryCreator(IPluginCreator):
    """Creates ``plugin_class`` from fields (checked by its schema) or from its bytes.

    The plugin class provides ``NAME``, ``VERSION``, ``SCHEMA`` and a classmethod
    ``deserialize(data)``. Warnings (unknown fields, ambiguous defaults) go to the
    logger given to :func:`~plugrt.plugins.init_libnvinfer_plugins`.
    """

    plugin_class: ClassVar[Any]

    def __init__(self, logger: ILogger | None = None) -> None:
        IPluginCreator.__init__(self)
        self.name = self.plugin_class.NAME
        self.plugin_version = self.plugin_class.VERSION
        self.plugin_namespace = ""
        self.field_names = self.plugin_class.SCHEMA.field_collection()
        self.logger = logger

    def create_plugin(self, name: str, field_collection: PluginFieldCollection) -> Any:
        """A new plugin from fields; wrong types and out-of-range values raise, naming the field."""
        plugin = self.plugin_class(self.plugin_class.SCHEMA.parse(field_collection, self.logger))
        plugin.plugin_namespace = self.plugin_namespace
        return plugin

    def deserialize_plugin(self, name: str, serialized_plugin: bytes) -> Any:
        """The plugin a ``serialize()`` call wrote."""
        plugin = self.plugin_class.deserialize(bytes(serialized_plugin))
        plugin.plugin_namespace = self.plugin_namespace
        return plugin


def check_dim(plugin: str, what: str, actual: int, expected: int) -> None:
    """Raise a ShapeError unless a (known) dimension has the expected value; -1 passes."""
    if actual >= 0 and actual != expected:
        raise ShapeError(f"{plugin}: {what} must be {expected}, got {actual}")
