"""Lifecycle shared by the IPluginV2 family: clone, serialize, deserialize, teardown."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ...core.errors import BuildError, MissingHookError, PluginError, SerializationError
from ..recorder import Phase, PluginCaller
from ..v2 import IPluginV2, serialized_bytes
from .base import check_status, require_hooks
from .family import BuildResult, PluginAdapter

__all__ = ["V2Common"]


class V2Common(PluginAdapter):
    """Clone/serialize/deserialize/teardown in TensorRT's order for IPluginV2 plugins."""

    interface = "v2"
    expected_class: ClassVar[type] = IPluginV2

    def __init__(self, layer: str, logger: Any) -> None:
        super().__init__(layer, logger)
        self._initialized = False
        self.context_callers: dict[int, PluginCaller] = {}
        self.engine_callers: dict[int, PluginCaller] = {}

    @staticmethod
    def identity(plugin: Any) -> tuple[str, str, str]:
        return PluginAdapter.checked_identity(plugin, plugin, ("plugin_type", "plugin_version", "plugin_namespace"))

    def _check_instance(self, plugin: Any, where: str, caller: PluginCaller) -> Any:
        if not isinstance(plugin, self.expected_class):
            raise PluginError(
                f"{caller.describe(where)} returned {type(plugin).__name__}; expected a {self.expected_class.__name__}"
            )
        return plugin

    #: Hooks a plugin must define to be able to run (checked before building).
    required_hooks: ClassVar[tuple[str, ...]] = ("clone",)

    def begin_build(self, plugin: Any) -> None:
        try:
            require_hooks(plugin, self.required_hooks, self.expected_class)
        except MissingHookError as exc:
            raise MissingHookError(f"layer {self.layer!r} ({self.family}): {exc}") from None
        source = self.caller(plugin)
        clone = self._check_instance(source(Phase.BUILD, "clone"), "clone", source)
        self.identity_of_build = self.identity(clone)
        self.build_caller = self.caller(clone)

    def finish_build(self, request: Any, outputs: Any) -> BuildResult:
        caller = self._build()
        plugin = caller.plugin
        asks_size = callable(getattr(type(plugin), "get_serialization_size", None))
        if asks_size:  # TensorRT asks a Python plugin that defines it, before serialize()
            declared = caller(Phase.SERIALIZE, "get_serialization_size")
            if isinstance(declared, bool) or not isinstance(declared, (int, np.integer)) or declared < 0:
                raise PluginError(
                    f"{caller.describe('get_serialization_size')} returned {declared!r}; expected a non-negative int"
                )
            declared, source = int(declared), "get_serialization_size()"
        else:
            caller.note(Phase.SERIALIZE, "get_serialization_size")
            try:
                declared = plugin.serialization_size
            except SerializationError as exc:  # the default size is len(serialize())
                raise SerializationError(f"{caller.describe('serialize')}: {exc}") from exc
            except Exception as exc:
                raise PluginError(
                    f"{caller.describe('get_serialization_size')} raised {type(exc).__name__}: {exc}"
                ) from exc
            source = "get_serialization_size (serialization_size)"
        payload = serialized_bytes(caller(Phase.SERIALIZE, "serialize"), caller.describe("serialize"))
        if declared != len(payload):
            raise BuildError(
                f"{caller.describe('serialize')} wrote {len(payload)} bytes but {source} says {declared}; "
                "the two must agree byte for byte (TensorRT copies exactly the declared size)"
            )
        self._teardown_build()
        return BuildResult(payload)

    def _teardown_build(self) -> None:
        caller = self._build()
        if self._initialized:
            caller(Phase.TEARDOWN, "terminate")
            self._initialized = False
        caller(Phase.TEARDOWN, "destroy")
        self.build_caller = None

    def abort_build(self) -> None:
        if self.build_caller is None:
            return
        try:
            self._teardown_build()
        except Exception:
            self.build_caller = None

    def revive(self, name: str, version: str, namespace: str, payload: bytes, registry: Any, tactic: int) -> Any:
        creator = registry.require_creator(name, version, namespace)
        creator_caller = PluginCaller(creator, self.layer, f"{name} v{version} creator", self.logger)
        plugin = creator_caller(Phase.DESERIALIZE, "deserialize_plugin", self.layer, payload)
        if plugin is None:
            raise PluginError(f"{creator_caller.describe('deserialize_plugin')} returned None")
        self._check_instance(plugin, "deserialize_plugin", creator_caller)
        try:
            require_hooks(plugin, self.required_hooks, self.expected_class)
        except MissingHookError as exc:
            raise MissingHookError(f"layer {self.layer!r} ({self.family}): {exc}") from None
        caller = self.caller(plugin)
        check_status(caller, "initialize", caller(Phase.DESERIALIZE, "initialize"))
        self.engine_callers[id(plugin)] = caller
        return plugin

    def attach(self, engine_plugin: Any, resource_context: Any) -> Any:
        source = self.engine_callers[id(engine_plugin)]
        clone = self._check_instance(source(Phase.CONTEXT, "clone"), "clone", source)
        if clone is engine_plugin:
            raise PluginError(f"{source.describe('clone')} returned the plugin itself; it must return a new object")
        caller = self.caller(clone)
        self.context_callers[id(clone)] = caller
        if hasattr(clone, "attach_to_context"):
            caller(Phase.CONTEXT, "attach_to_context", resource_context)
        return clone

    def detach(self, plugin: Any) -> None:
        caller = self.context_callers.pop(id(plugin), None)
        if caller is None:
            return
        if hasattr(plugin, "detach_from_context"):
            caller(Phase.TEARDOWN, "detach_from_context")
        caller(Phase.TEARDOWN, "destroy")

    def release(self, engine_plugin: Any) -> None:
        caller = self.engine_callers.pop(id(engine_plugin), None)
        if caller is None:
            return
        caller(Phase.TEARDOWN, "terminate")
        caller(Phase.TEARDOWN, "destroy")
