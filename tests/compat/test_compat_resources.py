"""Gap 4: IPluginResource and the registry's reference-counted resources (thread-safe)."""

from __future__ import annotations

import threading

import pytest

import plugrt as trt


class Context(trt.IPluginResource):
    """Like the samples' CudaCtxManager: the real work happens in clone(), undone in release()."""

    log: list[str] = []

    def __init__(self, device: int | None = None) -> None:
        trt.IPluginResource.__init__(self)
        self.device = device
        self.handle: int | None = None
        self.released = 0

    def clone(self):
        cloned = Context()
        cloned.__dict__.update(self.__dict__)
        cloned.handle = id(cloned)
        Context.log.append("clone")
        return cloned

    def release(self):
        self.released += 1
        Context.log.append("release")


@pytest.fixture(autouse=True)
def fresh_log():  # type: ignore[no-untyped-def]
    Context.log = []
    yield


def test_first_acquire_clones_later_ones_share_last_release_releases() -> None:
    registry = trt.get_plugin_registry()
    original = Context(0)
    first = registry.acquire_plugin_resource("compat-ctx", original)
    assert first is not original and first.device == 0 and first.handle == id(first)
    second = registry.acquire_plugin_resource("compat-ctx", Context(1))
    assert second is first  # later acquires get the registered clone, their argument is ignored
    assert Context.log == ["clone"]
    assert registry.release_plugin_resource("compat-ctx") == 0
    assert first.released == 0
    assert registry.release_plugin_resource("compat-ctx") == 0
    assert first.released == 1 and Context.log == ["clone", "release"]
    again = registry.acquire_plugin_resource("compat-ctx", Context(2))  # a released key starts over
    assert again is not first and again.device == 2
    registry.release_plugin_resource("compat-ctx")


def test_acquire_and_release_from_many_threads() -> None:
    registry = trt.get_plugin_registry()
    seen: list[object] = []
    start = threading.Barrier(8)
    hold = registry.acquire_plugin_resource("compat-threads", Context())

    def worker() -> None:
        start.wait()
        for _ in range(200):
            seen.append(registry.acquire_plugin_resource("compat-threads", Context()))
            registry.release_plugin_resource("compat-threads")

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(item is hold for item in seen) and len(seen) == 1600
    assert Context.log == ["clone"]
    registry.release_plugin_resource("compat-threads")
    assert Context.log == ["clone", "release"]


def test_concurrent_first_acquires_clone_once() -> None:
    registry = trt.get_plugin_registry()
    got: list[object] = []
    start = threading.Barrier(8)

    def worker() -> None:
        start.wait()
        got.append(registry.acquire_plugin_resource("compat-race", Context()))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(g) for g in got}) == 1 and Context.log == ["clone"]
    for _ in range(8):
        registry.release_plugin_resource("compat-race")
    assert Context.log == ["clone", "release"]


def test_releasing_an_unknown_key_names_it() -> None:
    with pytest.raises(trt.RegistryError, match=r"release_plugin_resource\('compat-never'\): no resource is registered"):
        trt.get_plugin_registry().release_plugin_resource("compat-never")


@pytest.mark.parametrize("key", ["", None, 3])
def test_keys_must_be_non_empty_strings(key: object) -> None:
    with pytest.raises(trt.TypeMismatchError, match="key must be a non-empty str"):
        trt.get_plugin_registry().acquire_plugin_resource(key, Context())  # type: ignore[arg-type]


def test_resource_must_be_an_iplugin_resource() -> None:
    with pytest.raises(trt.TypeMismatchError, match="resource must be an IPluginResource, got dict"):
        trt.get_plugin_registry().acquire_plugin_resource("compat-bad", {})  # type: ignore[arg-type]


def test_a_clone_that_fails_registers_nothing() -> None:
    class Broken(Context):
        def clone(self):
            return None

    class Raises(Context):
        def clone(self):
            raise OSError("no device")

    registry = trt.get_plugin_registry()
    with pytest.raises(trt.PluginError, match=r"Broken.clone\(\) returned NoneType; it must return a new IPluginResource"):
        registry.acquire_plugin_resource("compat-broken", Broken())
    with pytest.raises(trt.PluginError, match=r"Raises.clone\(\) raised OSError: no device"):
        registry.acquire_plugin_resource("compat-broken", Raises())
    with pytest.raises(trt.RegistryError, match="no resource is registered"):
        registry.release_plugin_resource("compat-broken")


def test_missing_hooks_name_the_interface() -> None:
    class Bare(trt.IPluginResource):
        pass

    with pytest.raises(trt.PluginError, match=r"Bare.clone\(\) raised MissingHookError: Bare does not implement IPluginResource.clone"):
        trt.get_plugin_registry().acquire_plugin_resource("compat-bare", Bare())
    with pytest.raises(trt.MissingHookError, match=r"IPluginResource.release\(\)"):
        Bare().release()


def test_a_release_that_raises_still_forgets_the_key() -> None:
    class Sticky(Context):
        def clone(self):
            return Sticky()

        def release(self):
            raise RuntimeError("busy")

    registry = trt.get_plugin_registry()
    registry.acquire_plugin_resource("compat-sticky", Sticky())
    with pytest.raises(trt.PluginError, match=r"Sticky.release\(\) raised RuntimeError: busy \(the key is released\)"):
        registry.release_plugin_resource("compat-sticky")
    with pytest.raises(trt.RegistryError):
        registry.release_plugin_resource("compat-sticky")
