"""What the IPluginV2 drivers share: identity, clone, initialize/terminate, bytes serialization."""

from __future__ import annotations

from typing import Any

from ...interfaces.v2 import IPluginV2
from ..hooks import HookError, call, check_status
from .base import Driver, resource_context

__all__ = ["V2CommonDriver"]


class V2CommonDriver(Driver):
    """IPluginV2 lifecycle: clone, initialize, serialize/deserialize_plugin, terminate, destroy."""

    expected: type = IPluginV2

    def identity(self, plugin: Any) -> tuple[str, str, str]:
        return (
            getattr(plugin, "plugin_type", None),
            getattr(plugin, "plugin_version", None),
            getattr(plugin, "plugin_namespace", None),
        )  # type: ignore[return-value]

    def _expect(self, hook: str, value: Any, source: Any = None) -> Any:
        if not isinstance(value, self.expected):
            raise HookError(hook, f"{hook}() returned {type(value).__name__}; expected an {self.expected.__name__}")
        if source is not None and value is source:
            raise HookError(hook, f"{hook}() returned the plugin itself; it must return a new object")
        return value

    def create(self, creator: Any, name: str, fields: Any) -> Any:
        return self._expect("create_plugin", call(creator, "create_plugin", name, fields))

    def clone(self, plugin: Any) -> Any:
        return self._expect("clone", call(plugin, "clone"), plugin)

    def initialize(self, plugin: Any) -> None:
        check_status("initialize", call(plugin, "initialize"))

    def terminate(self, plugin: Any) -> None:
        call(plugin, "terminate")

    def attach(self, engine_plugin: Any) -> Any:
        clone = self.clone(engine_plugin)
        if hasattr(clone, "attach_to_context"):
            call(clone, "attach_to_context", resource_context())
        return clone

    def detach(self, plugin: Any) -> None:
        if hasattr(plugin, "detach_from_context"):
            call(plugin, "detach_from_context")
        self.destroy(plugin)

    def payload(self, plugin: Any) -> bytes:
        data = call(plugin, "serialize")
        if isinstance(data, (bytearray, memoryview)):
            data = bytes(data)
        if not isinstance(data, bytes):
            raise HookError("serialize", f"serialize() returned {type(data).__name__}; expected bytes")
        return data

    def declared_size(self, plugin: Any) -> int | None:
        try:
            size = plugin.serialization_size
        except Exception as exc:
            raise HookError("get_serialization_size", f"serialization_size raised {type(exc).__name__}: {exc}") from exc
        if not isinstance(size, int) or isinstance(size, bool):
            raise HookError("get_serialization_size", f"serialization_size is {size!r}; expected an int")
        return size

    def revive(self, creator: Any, name: str, payload: bytes) -> Any:
        plugin = call(creator, "deserialize_plugin", name, payload)
        if plugin is None:
            raise HookError("deserialize_plugin", "deserialize_plugin() returned None; raise an exception instead")
        return self._expect("deserialize_plugin", plugin)
