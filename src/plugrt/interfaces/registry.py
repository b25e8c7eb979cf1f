"""The plugin registry: creators keyed by (name, version, namespace).

Thread-safe. Lookups that fail return ``None`` as TensorRT does and log an error
naming what was asked and what is registered under a similar key; the runtime
and the ONNX importer raise :class:`~plugrt.CreatorNotFoundError` with the same
message.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import os
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import CreatorNotFoundError, DuplicateCreatorError, RegistryError, TypeMismatchError
from ..core.logger import ILogger, Logger, Severity
from .creator import IPluginCreatorInterface
from .error_recorder import ErrorCodeTRT, IErrorRecorder, check_error_recorder, report_to
from .resource import IPluginResource, ResourceTable

__all__ = ["IPluginRegistry", "PluginLibraryHandle", "creator_key", "get_builder_plugin_registry", "get_plugin_registry"]

Key = tuple[str, str, str]


def creator_key(creator: Any) -> Key:
    """(name, version, namespace) of a creator, validated."""
    name = getattr(creator, "name", None)
    version = getattr(creator, "plugin_version", None)
    namespace = getattr(creator, "plugin_namespace", "")
    for label, value in (("name", name), ("plugin_version", version), ("plugin_namespace", namespace)):
        if not isinstance(value, str):
            raise TypeMismatchError(
                f"creator {type(creator).__name__}.{label} must be a str, got {type(value).__name__}"
            )
    if not name:
        raise RegistryError(f"creator {type(creator).__name__} has an empty name; set self.name")
    return name, version, namespace  # type: ignore[return-value]


def describe_key(name: str, version: str, namespace: str) -> str:
    """'Foo' version '1' namespace '' — as used in every registry message."""
    return f"{name!r} version {version!r} namespace {namespace!r}"


@dataclass
class PluginLibraryHandle:
    """What :meth:`IPluginRegistry.load_library` returns: the creators a library registered."""

    path: str
    creators: list[Any] = field(default_factory=list)


class IPluginRegistry:
    """Holds plugin creators (TensorRT's ``IPluginRegistry``)."""

    def __init__(self, logger: ILogger | None = None) -> None:
        self._lock = threading.RLock()
        self._creators: dict[Key, Any] = {}
        self._recording: list[list[Any]] = []
        self._resources = ResourceTable()
        self._error_recorder: IErrorRecorder | None = None
        self._parent_search_enabled = True
        self.logger: ILogger = logger or Logger(Severity.WARNING)

    # --- TensorRT's registry settings ------------------------------------------------------
    @property
    def error_recorder(self) -> IErrorRecorder | None:
        """Receives the registry's errors (failed lookups, duplicates, resource misuse) besides the logger."""
        return self._error_recorder

    @error_recorder.setter
    def error_recorder(self, recorder: IErrorRecorder | None) -> None:
        self._error_recorder = check_error_recorder(recorder, "IPluginRegistry")

    @property
    def parent_search_enabled(self) -> bool:
        """Whether lookups fall back to a parent registry (TensorRT's default: True).

        plugrt has one process-wide registry, so there is no parent to search; the setting is
        kept as TensorRT keeps it.
        """
        return self._parent_search_enabled

    @parent_search_enabled.setter
    def parent_search_enabled(self, enabled: bool) -> None:
        if not isinstance(enabled, bool):
            raise TypeMismatchError(f"parent_search_enabled must be a bool, got {enabled!r}")
        self._parent_search_enabled = enabled

    def _report(self, code: ErrorCodeTRT, message: str) -> None:
        report_to(self._error_recorder, code, message)

    # --- registration -----------------------------------------------------------
    def register_creator(self, creator: Any, plugin_namespace: str = "") -> bool:
        """Register ``creator`` under ``plugin_namespace``; a duplicate key raises."""
        if not isinstance(creator, IPluginCreatorInterface):
            raise TypeMismatchError(
                f"register_creator takes an IPluginCreator or IPluginCreatorV3One, got {type(creator).__name__}"
            )
        if not isinstance(plugin_namespace, str):
            raise TypeMismatchError(f"plugin_namespace must be a str, got {type(plugin_namespace).__name__}")
        with self._lock:
            name, version, _ = creator_key(creator)
            key = (name, version, plugin_namespace)
            if key in self._creators:
                existing = self._creators[key]
                message = (
                    f"a creator for {describe_key(*key)} is already registered "
                    f"({type(existing).__name__}); deregister it first or use another version or namespace"
                )
                self._report(ErrorCodeTRT.INVALID_ARGUMENT, message)
                raise DuplicateCreatorError(message)
            creator.plugin_namespace = plugin_namespace
            self._creators[key] = creator
            for recording in self._recording:
                recording.append(creator)
        return True

    def deregister_creator(self, creator: Any) -> bool:
        """Remove ``creator``; False if it was not registered."""
        with self._lock:
            for key, registered in list(self._creators.items()):
                if registered is creator:
                    del self._creators[key]
                    return True
        return False

    # --- lookup -----------------------------------------------------------------
    def get_creator(self, name: str, version: str, plugin_namespace: str = "") -> Any:
        """The creator registered under the key, or None (with an error logged)."""
        with self._lock:
            creator = self._creators.get((name, version, plugin_namespace))
        if creator is None:
            message = self.describe_missing(name, version, plugin_namespace)
            self.logger.emit(Severity.ERROR, message)
            self._report(ErrorCodeTRT.INVALID_ARGUMENT, message)
        return creator

    get_plugin_creator = get_creator

    def require_creator(self, name: str, version: str, plugin_namespace: str = "") -> Any:
        """The creator registered under the key; raises :class:`CreatorNotFoundError`."""
        with self._lock:
            creator = self._creators.get((name, version, plugin_namespace))
        if creator is None:
            message = self.describe_missing(name, version, plugin_namespace)
            self._report(ErrorCodeTRT.INVALID_ARGUMENT, message)
            raise CreatorNotFoundError(message)
        return creator

    def describe_missing(self, name: str, version: str, plugin_namespace: str = "") -> str:
        """The message for a failed lookup: what was asked, close matches, what exists."""
        with self._lock:
            keys = sorted(self._creators)
        message = f"no plugin creator for {describe_key(name, version, plugin_namespace)}"
        same_name = [k for k in keys if k[0] == name]
        close_names = difflib.get_close_matches(name, sorted({k[0] for k in keys}), n=3, cutoff=0.6)
        near = same_name + [k for k in keys if k[0] in close_names and k not in same_name]
        if near:
            message += "; close matches: " + ", ".join(describe_key(*k) for k in near)
        elif keys:
            shown = ", ".join(f"{n} v{v}" + (f" in {ns!r}" if ns else "") for n, v, ns in keys[:20])
            more = f" and {len(keys) - 20} more" if len(keys) > 20 else ""
            message += f"; registered: {shown}{more}"
        else:
            message += "; the registry is empty (register a creator, load a library, or call init_libnvinfer_plugins)"
        return message

    @property
    def all_creators(self) -> list[Any]:
        """Every registered creator."""
        with self._lock:
            return list(self._creators.values())

    @property
    def all_creators_recursive(self) -> list[Any]:
        """Every creator here and in parent registries (plugrt's registry has no parent)."""
        return self.all_creators

    @property
    def plugin_creator_list(self) -> list[Any]:
        """Every registered creator (TensorRT's older name)."""
        return self.all_creators

    # --- shared resources ------------------------------------------------------------
    def acquire_plugin_resource(self, key: str, resource: IPluginResource) -> IPluginResource:
        """The resource shared under ``key``: the first call registers ``resource.clone()``,
        later calls return that same object (one reference each). Thread-safe."""
        return self._resources.acquire(key, resource)

    def release_plugin_resource(self, key: str) -> int:
        """Drop one reference to ``key``'s resource; the last calls its ``release()``. Returns 0.

        Releasing a key that holds no resource raises :class:`RegistryError` (TensorRT
        returns a non-zero status).
        """
        try:
            return self._resources.release(key)
        except RegistryError as exc:
            self._report(ErrorCodeTRT.INVALID_ARGUMENT, str(exc))
            raise

    # --- libraries ----------------------------------------------------------------
    def load_library(self, plugin_path: str) -> PluginLibraryHandle:
        """Import a Python file or module whose import registers creators.

        Returns a handle for :meth:`deregister_library`. Errors while importing
        raise :class:`RegistryError` naming the library.
        """
        recording: list[Any] = []
        with self._lock:
            self._recording.append(recording)
        try:
            _import_library(plugin_path)
        except Exception as exc:
            for creator in recording:  # a library that fails leaves nothing registered
                self.deregister_creator(creator)
            if isinstance(exc, RegistryError):
                raise
            raise RegistryError(f"loading plugin library {plugin_path!r} failed: {type(exc).__name__}: {exc}") from exc
        finally:
            with self._lock:
                self._recording.remove(recording)
        return PluginLibraryHandle(plugin_path, recording)

    def deregister_library(self, handle: PluginLibraryHandle) -> None:
        """Deregister every creator the library registered."""
        if not isinstance(handle, PluginLibraryHandle):
            raise TypeMismatchError(
                f"deregister_library takes the handle load_library returned, got {type(handle).__name__}"
            )
        for creator in handle.creators:
            self.deregister_creator(creator)


def _import_library(plugin_path: str) -> None:
    if plugin_path.endswith(".py") or os.path.sep in plugin_path:
        if not os.path.isfile(plugin_path):
            raise RegistryError(f"plugin library {plugin_path!r} does not exist")
        module_name = f"plugrt_library_{abs(hash(os.path.abspath(plugin_path)))}_{len(sys.modules)}"
        spec = importlib.util.spec_from_file_location(module_name, plugin_path)
        if spec is None or spec.loader is None:
            raise RegistryError(f"plugin library {plugin_path!r} is not a Python file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    else:
        try:
            importlib.import_module(plugin_path)
        except ModuleNotFoundError as exc:
            raise RegistryError(f"plugin library {plugin_path!r}: no such file or module ({exc})") from exc


_GLOBAL_REGISTRY = IPluginRegistry()


def get_plugin_registry() -> IPluginRegistry:
    """The process-wide plugin registry."""
    return _GLOBAL_REGISTRY


def get_builder_plugin_registry(capability: Any = None) -> IPluginRegistry:
    """The registry used to build engines for ``capability`` (TensorRT's name).

    plugrt builds standard engines only: ``EngineCapability.STANDARD`` (the default) gives
    the process-wide registry; the safety and DLA capabilities raise :class:`RegistryError`.
    """
    from ..core.enums import EngineCapability

    wanted = EngineCapability.STANDARD if capability is None else capability
    if not isinstance(wanted, EngineCapability):
        raise TypeMismatchError(f"get_builder_plugin_registry takes an EngineCapability, got {capability!r}")
    if wanted != EngineCapability.STANDARD:
        raise RegistryError(
            f"get_builder_plugin_registry({wanted}): plugrt builds standard engines only (no safety runtime, no DLA)"
        )
    return _GLOBAL_REGISTRY
