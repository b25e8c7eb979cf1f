"""Lifecycle shared by the IPluginV2 family: clone, serialize, deserialize, teardown."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, ClassVar

import numpy as np

from ...core.errors import BuildError, SerializationError
from ..recorder import Phase, PluginCaller
from ..v2 import IPluginV2, serialized_bytes
from .base import check_status, require_hooks
from .family import BuildResult, PluginAdapter

__all__ = ["V2Common"]


class V2Common(PluginAdapter):
    """Clone/serialize/deserialize/teardown in TensorRT's order for IPluginV2 plugins."""

    interface = "v2"
    expected_class: ClassVar[type] = IPluginV2

    def __init__(self, layer: str, logger: Any, policy: Any = None) -> None:
        super().__init__(layer, logger, policy)
        self._initialized = False
        self.context_callers: dict[int, PluginCaller] = {}
        self.engine_callers: dict[int, PluginCaller] = {}
        #: per running plugin, what its last shape-change call told it (families that skip repeats)
        self.told: dict[int, Any] = {}

    #: Hooks a plugin must define to be able to run (checked before building).
    required_hooks: ClassVar[tuple[str, ...]] = ("clone",)

    def begin_build(self, plugin: Any) -> None:
        source = self.caller(plugin)
        require_hooks(source, self.required_hooks, self.expected_class, self.family)
        self.use_build_instance(self.clone_of(source, Phase.BUILD))

    def configure(self, request: Any, outputs: Any, num_profiles: int) -> int:
        workspace = self.configure_build(request, outputs, num_profiles)
        self.initialize_build()
        return workspace

    @abstractmethod
    def configure_build(self, request: Any, outputs: Any, num_profiles: int) -> int:
        """The family's configure hooks for every profile; the workspace bytes needed."""
        raise NotImplementedError

    def initialize_build(self) -> None:
        """``initialize()`` the build instance (it is terminated before it is destroyed)."""
        caller = self._build()
        check_status(caller, "initialize", caller(Phase.BUILD, "initialize"))
        self._initialized = True

    def terminate_build(self) -> None:
        """``terminate()`` the initialized build instance."""
        if self._initialized:
            self._build()(Phase.TEARDOWN, "terminate")
            self._initialized = False

    def declared_size(self, caller: PluginCaller) -> tuple[int, str]:
        """The serialization size ``caller``'s plugin declares, and where it came from (for messages).

        TensorRT asks a Python plugin that defines ``get_serialization_size``; otherwise the
        ``serialization_size`` property answers (by default ``len(serialize())``).
        """
        plugin = caller.plugin
        if callable(getattr(type(plugin), "get_serialization_size", None)):
            declared = caller(Phase.SERIALIZE, "get_serialization_size")
            if isinstance(declared, bool) or not isinstance(declared, (int, np.integer)) or declared < 0:
                raise caller.fail(
                    "get_serialization_size",
                    f" returned {declared!r}; expected a non-negative int",
                    phase=Phase.SERIALIZE,
                )
            return int(declared), "get_serialization_size()"
        caller.note(Phase.SERIALIZE, "get_serialization_size")
        try:
            declared = plugin.serialization_size
        except SerializationError as exc:  # the default size is len(serialize())
            raise caller.fail("serialize", f": {exc}", SerializationError, Phase.SERIALIZE) from exc
        except Exception as exc:
            raise caller.policy.raised(caller, Phase.SERIALIZE, "get_serialization_size", exc) from exc
        if isinstance(declared, bool) or not isinstance(declared, (int, np.integer)):
            raise caller.fail(
                "get_serialization_size", f": serialization_size is {declared!r}; expected an int", phase=Phase.SERIALIZE
            )
        return int(declared), "get_serialization_size (serialization_size)"

    def serialized(self, caller: PluginCaller) -> bytes:
        data = caller(Phase.SERIALIZE, "serialize")
        try:
            return serialized_bytes(data, "")
        except SerializationError as exc:
            raise caller.fail("serialize", str(exc), SerializationError, Phase.SERIALIZE) from None

    def serialize_build(self) -> BuildResult:
        caller = self._build()
        payload = self.serialized(caller)
        self._teardown_build()
        return BuildResult(payload)

    def finish_build(self, request: Any, outputs: Any) -> BuildResult:
        caller = self._build()
        declared, source = self.declared_size(caller)
        result = self.serialize_build()
        if declared != len(result.payload):
            raise caller.fail(
                "serialize",
                f" wrote {len(result.payload)} bytes but {source} says {declared}; "
                "the two must agree byte for byte (TensorRT copies exactly the declared size)",
                BuildError,
                Phase.SERIALIZE,
            )
        return result

    def adopt_build(self) -> Any:
        caller = self._build()
        self.engine_callers[id(caller.plugin)] = caller
        self._initialized = False
        self.build_caller = None
        return caller.plugin

    def _teardown_build(self) -> None:
        self.terminate_build()
        self._build()(Phase.TEARDOWN, "destroy")
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
        creator_caller = PluginCaller(creator, self.layer, f"{name} v{version} creator", self.logger, self.policy)
        plugin = creator_caller(Phase.DESERIALIZE, "deserialize_plugin", self.layer, payload)
        if plugin is None:
            raise creator_caller.fail(
                "deserialize_plugin", " returned None; raise an exception instead", phase=Phase.DESERIALIZE
            )
        if not isinstance(plugin, self.expected_class):
            raise creator_caller.fail(
                "deserialize_plugin",
                f" returned {type(plugin).__name__}; expected an {self.expected_class.__name__}",
                phase=Phase.DESERIALIZE,
            )
        caller = self.caller(plugin)
        require_hooks(caller, self.required_hooks, self.expected_class, self.family)
        check_status(caller, "initialize", caller(Phase.DESERIALIZE, "initialize"), Phase.DESERIALIZE)
        self.engine_callers[id(plugin)] = caller
        return plugin

    def attach(self, engine_plugin: Any, resource_context: Any) -> Any:
        clone = self.clone_of(self.engine_callers[id(engine_plugin)], Phase.CONTEXT)
        caller = self.caller(clone)
        self.context_callers[id(clone)] = caller
        if hasattr(clone, "attach_to_context"):
            caller(Phase.CONTEXT, "attach_to_context", resource_context)
        return clone

    def run_caller(self, plugin: Any) -> PluginCaller:
        """The caller of a context's plugin (or of the engine's, which the checker also runs)."""
        return self.context_callers.get(id(plugin)) or self.engine_callers[id(plugin)]

    def detach(self, plugin: Any) -> None:
        self.told.pop(id(plugin), None)
        caller = self.context_callers.pop(id(plugin), None)
        if caller is None:
            return
        if hasattr(plugin, "detach_from_context"):
            caller(Phase.TEARDOWN, "detach_from_context")
        caller(Phase.TEARDOWN, "destroy")

    def release(self, engine_plugin: Any) -> None:
        self.told.pop(id(engine_plugin), None)
        caller = self.engine_callers.pop(id(engine_plugin), None)
        if caller is None:
            return
        caller(Phase.TEARDOWN, "terminate")
        caller(Phase.TEARDOWN, "destroy")
