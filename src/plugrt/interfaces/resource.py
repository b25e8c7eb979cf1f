"""Plugin resources: objects plugins share through the registry, reference counted.

TensorRT's ``IPluginResource`` and ``IPluginRegistry.acquire_plugin_resource`` /
``release_plugin_resource``: the first acquire of a key registers a *clone* of the given
resource (so the object passed in need only live for the call), later acquires return
that same clone, and the release that brings the count to zero calls its ``release()``
and forgets the key. NVIDIA's samples keep a CUDA context this way.

>>> import plugrt as trt
>>> class Counter(trt.IPluginResource):
...     def __init__(self) -> None:
...         trt.IPluginResource.__init__(self)
...         self.released = False
...     def clone(self) -> "Counter":
...         return Counter()
...     def release(self) -> None:
...         self.released = True
>>> registry = trt.get_plugin_registry()
>>> shared = registry.acquire_plugin_resource("doc-counter", Counter())
>>> registry.acquire_plugin_resource("doc-counter", Counter()) is shared
True
>>> registry.release_plugin_resource("doc-counter"), shared.released
(0, False)
>>> registry.release_plugin_resource("doc-counter"), shared.released
(0, True)
"""

from __future__ import annotations

import threading
from typing import Any

from ..core.errors import PluginError, RegistryError, TypeMismatchError
from .hooks import missing_hook

__all__ = ["IPluginResource", "ResourceTable"]


class IPluginResource:
    """A resource plugins share by key (TensorRT's ``IPluginResource``): define ``clone`` and ``release``."""

    def __init__(self) -> None:
        pass

    def clone(self) -> IPluginResource:
        """A fully set-up copy; the registry keeps the copy, not the object passed in. Required."""
        missing_hook(self, "clone", "IPluginResource")

    def release(self) -> None:
        """Free what the resource holds; called once, when its last user releases it. Required."""
        missing_hook(self, "release", "IPluginResource")


class ResourceTable:
    """The registry's resources: key → (registered clone, reference count). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._entries: dict[str, list[Any]] = {}

    def acquire(self, key: str, resource: IPluginResource) -> IPluginResource:
        """The resource registered under ``key``; the first acquire registers ``resource.clone()``."""
        _check_key(key, "acquire_plugin_resource")
        if not isinstance(resource, IPluginResource):
            raise TypeMismatchError(
                f"acquire_plugin_resource({key!r}): resource must be an IPluginResource, got {type(resource).__name__}"
            )
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                entry[1] += 1
                return entry[0]  # type: ignore[no-any-return]
            try:
                clone = resource.clone()
            except Exception as exc:
                raise PluginError(
                    f"acquire_plugin_resource({key!r}): {type(resource).__name__}.clone() raised {type(exc).__name__}: {exc}"
                ) from exc
            if not isinstance(clone, IPluginResource) or clone is resource:
                raise PluginError(
                    f"acquire_plugin_resource({key!r}): {type(resource).__name__}.clone() returned "
                    f"{'the resource itself' if clone is resource else type(clone).__name__}; it must return a new "
                    "IPluginResource (the registry keeps the clone)"
                )
            self._entries[key] = [clone, 1]
            return clone

    def release(self, key: str) -> int:
        """Drop one reference; the last one calls the resource's ``release()``. Returns 0."""
        _check_key(key, "release_plugin_resource")
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                known = sorted(self._entries)
                raise RegistryError(
                    f"release_plugin_resource({key!r}): no resource is registered under that key"
                    + (f"; registered: {known}" if known else "; none is registered")
                )
            entry[1] -= 1
            if entry[1] > 0:
                return 0
            del self._entries[key]
            resource = entry[0]
            try:
                resource.release()
            except Exception as exc:
                raise PluginError(
                    f"release_plugin_resource({key!r}): {type(resource).__name__}.release() raised "
                    f"{type(exc).__name__}: {exc} (the key is released)"
                ) from exc
        return 0

    def count(self, key: str) -> int:
        """How many acquires of ``key`` are not released yet (0 when unknown)."""
        with self._lock:
            entry = self._entries.get(key)
            return 0 if entry is None else int(entry[1])


def _check_key(key: Any, method: str) -> None:
    if not isinstance(key, str) or not key:
        raise TypeMismatchError(f"{method}: key must be a non-empty str, got {key!r}")
