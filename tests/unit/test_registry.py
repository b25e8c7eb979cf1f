"""Tests for the plugin registry: plugrt.interfaces.registry."""

from __future__ import annotations

import textwrap
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import plugrt
import plugrt as trt
from plugrt.core.errors import (
    CreatorNotFoundError,
    DuplicateCreatorError,
    RegistryError,
    TypeMismatchError,
)
from plugrt.core.logger import ILogger, Severity
from plugrt.interfaces.creator import IPluginCreator, IPluginCreatorV3One
from plugrt.interfaces.registry import IPluginRegistry, PluginLibraryHandle, creator_key, get_plugin_registry


class Collecting(ILogger):
    def __init__(self) -> None:
        super().__init__(Severity.VERBOSE)
        self.messages: list[tuple[Severity, str]] = []

    def log(self, severity: Severity, msg: str) -> None:
        self.messages.append((severity, msg))


class Creator(IPluginCreator):
    def __init__(self, name: str = "Relu", version: str = "1", namespace: str = "") -> None:
        super().__init__()
        self.name = name
        self.plugin_version = version
        self.plugin_namespace = namespace

    def create_plugin(self, name: str, field_collection: Any) -> Any:
        return None

    def deserialize_plugin(self, name: str, serialized_plugin: bytes) -> Any:
        return None


class CreatorV3(IPluginCreatorV3One):
    def __init__(self, name: str, version: str = "1") -> None:
        super().__init__()
        self.name = name
        self.plugin_version = version

    def create_plugin(self, name: str, field_collection: Any, phase: Any) -> Any:
        return None


@pytest.fixture
def logger() -> Collecting:
    return Collecting()


@pytest.fixture
def registry(logger: Collecting) -> IPluginRegistry:
    return IPluginRegistry(logger)


@pytest.fixture
def global_cleanup() -> Iterator[list[Any]]:
    """Creators registered in the global registry by a test; removed afterwards."""
    before = list(get_plugin_registry().all_creators)
    added: list[Any] = []
    yield added
    registry = get_plugin_registry()
    for creator in list(registry.all_creators):
        if not any(creator is b for b in before):
            registry.deregister_creator(creator)


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


# ---------------------------------------------------------------------------
# Registration and lookup
# ---------------------------------------------------------------------------


def test_exports() -> None:
    assert trt.IPluginRegistry is IPluginRegistry
    assert trt.get_plugin_registry is get_plugin_registry
    assert get_plugin_registry() is get_plugin_registry()
    assert isinstance(get_plugin_registry(), IPluginRegistry)


def test_fresh_registry_is_empty(registry: IPluginRegistry) -> None:
    assert registry.all_creators == []
    assert registry.plugin_creator_list == []


def test_default_logger_is_warning_level_logger() -> None:
    registry = IPluginRegistry()
    assert isinstance(registry.logger, trt.Logger)
    assert registry.logger.min_severity is Severity.WARNING


def test_register_and_lookup(registry: IPluginRegistry, logger: Collecting) -> None:
    creator = Creator("Relu", "1")
    assert registry.register_creator(creator) is True
    assert registry.get_creator("Relu", "1") is creator
    assert registry.get_creator("Relu", "1", "") is creator
    assert registry.get_plugin_creator("Relu", "1") is creator
    assert registry.require_creator("Relu", "1") is creator
    assert registry.all_creators == [creator]
    assert registry.plugin_creator_list == [creator]
    assert logger.messages == []


def test_v3_creators_are_accepted(registry: IPluginRegistry) -> None:
    creator = CreatorV3("Gelu", "2")
    registry.register_creator(creator)
    assert registry.require_creator("Gelu", "2") is creator


def test_namespace_argument_sets_creator_namespace(registry: IPluginRegistry) -> None:
    creator = Creator("Relu", "1", namespace="ignored")
    registry.register_creator(creator, "my_ns")
    assert creator.plugin_namespace == "my_ns"
    assert registry.get_creator("Relu", "1", "my_ns") is creator
    assert registry.require_creator("Relu", "1", plugin_namespace="my_ns") is creator
    with pytest.raises(CreatorNotFoundError):
        registry.require_creator("Relu", "1")


def test_default_namespace_is_empty_even_if_creator_has_one(registry: IPluginRegistry) -> None:
    creator = Creator("Relu", "1", namespace="preset")
    registry.register_creator(creator)
    assert creator.plugin_namespace == ""
    assert registry.get_creator("Relu", "1", "") is creator


def test_same_name_other_version_or_namespace_is_fine(registry: IPluginRegistry) -> None:
    v1, v2, ns = Creator("Relu", "1"), Creator("Relu", "2"), Creator("Relu", "1")
    registry.register_creator(v1)
    registry.register_creator(v2)
    registry.register_creator(ns, "other")
    assert registry.require_creator("Relu", "1") is v1
    assert registry.require_creator("Relu", "2") is v2
    assert registry.require_creator("Relu", "1", "other") is ns
    assert len(registry.all_creators) == 3


def test_duplicate_key_raises_and_names_it(registry: IPluginRegistry) -> None:
    first = Creator("Relu", "1")
    registry.register_creator(first, "ns")
    second = Creator("Relu", "1")
    with pytest.raises(
        DuplicateCreatorError,
        match=r"a creator for 'Relu' version '1' namespace 'ns' is already registered \(Creator\); "
        r"deregister it first or use another version or namespace",
    ):
        registry.register_creator(second, "ns")
    assert registry.require_creator("Relu", "1", "ns") is first
    assert registry.all_creators == [first]
    assert second.plugin_namespace == ""  # untouched by the failed registration


def test_registering_the_same_object_twice_raises(registry: IPluginRegistry) -> None:
    creator = Creator("Relu", "1")
    registry.register_creator(creator)
    with pytest.raises(DuplicateCreatorError, match=r"'Relu' version '1' namespace ''"):
        registry.register_creator(creator)


def test_duplicate_creator_error_is_a_registry_error(registry: IPluginRegistry) -> None:
    registry.register_creator(Creator())
    with pytest.raises(RegistryError):
        registry.register_creator(Creator())


@pytest.mark.parametrize("bad", [object(), "Relu", None, 3, Creator])
def test_non_creator_is_rejected(registry: IPluginRegistry, bad: object) -> None:
    with pytest.raises(
        TypeMismatchError,
        match=rf"register_creator takes an IPluginCreator or IPluginCreatorV3One, got {type(bad).__name__}",
    ):
        registry.register_creator(bad)
    assert registry.all_creators == []


def test_duck_typed_creator_is_rejected(registry: IPluginRegistry) -> None:
    class LooksLikeACreator:
        name = "Fake"
        plugin_version = "1"
        plugin_namespace = ""

        def create_plugin(self, name: str, fc: Any) -> None:
            return None

    with pytest.raises(TypeMismatchError, match="got LooksLikeACreator"):
        registry.register_creator(LooksLikeACreator())


def test_empty_name_is_rejected(registry: IPluginRegistry) -> None:
    with pytest.raises(RegistryError, match=r"creator Creator has an empty name; set self\.name"):
        registry.register_creator(Creator(""))
    assert registry.all_creators == []


def test_creator_without_name_attribute_uses_default_empty_name(registry: IPluginRegistry) -> None:
    class Nameless(IPluginCreator):
        pass

    with pytest.raises(RegistryError, match="creator Nameless has an empty name"):
        registry.register_creator(Nameless())


@pytest.mark.parametrize(
    ("attr", "value", "label"),
    [("name", 5, "name"), ("plugin_version", 1, "plugin_version"), ("plugin_version", None, "plugin_version")],
)
def test_non_str_key_attributes_are_rejected(registry: IPluginRegistry, attr: str, value: object, label: str) -> None:
    creator = Creator()
    setattr(creator, attr, value)
    with pytest.raises(TypeMismatchError, match=rf"creator Creator\.{label} must be a str, got {type(value).__name__}"):
        registry.register_creator(creator)


@pytest.mark.parametrize("namespace", [None, 1, b"ns"])
def test_non_str_namespace_argument_is_rejected(registry: IPluginRegistry, namespace: object) -> None:
    with pytest.raises(TypeMismatchError, match=rf"plugin_namespace must be a str, got {type(namespace).__name__}"):
        registry.register_creator(Creator(), namespace)  # type: ignore[arg-type]
    assert registry.all_creators == []


def test_creator_key() -> None:
    assert creator_key(Creator("A", "3", "ns")) == ("A", "3", "ns")
    with pytest.raises(RegistryError, match="empty name"):
        creator_key(Creator(""))
    with pytest.raises(TypeMismatchError, match=r"creator object\.name must be a str, got NoneType"):
        creator_key(object())


def test_deregister(registry: IPluginRegistry) -> None:
    a, b = Creator("A"), Creator("B")
    registry.register_creator(a)
    registry.register_creator(b)
    assert registry.deregister_creator(a) is True
    assert registry.all_creators == [b]
    assert registry.deregister_creator(a) is False
    assert registry.deregister_creator(Creator("B")) is False  # equal key, different object
    assert registry.all_creators == [b]
    registry.register_creator(a)  # the key is free again
    assert registry.require_creator("A", "1") is a


def test_all_creators_is_a_snapshot(registry: IPluginRegistry) -> None:
    registry.register_creator(Creator("A"))
    snapshot = registry.all_creators
    snapshot.clear()
    assert len(registry.all_creators) == 1


# ---------------------------------------------------------------------------
# Failed lookups
# ---------------------------------------------------------------------------


def test_failed_lookup_on_empty_registry(registry: IPluginRegistry, logger: Collecting) -> None:
    assert registry.get_creator("Relu", "1") is None
    assert logger.messages == [
        (
            Severity.ERROR,
            "no plugin creator for 'Relu' version '1' namespace ''; the registry is empty "
            "(register a creator, load a library, or call init_libnvinfer_plugins)",
        )
    ]


def test_failed_lookup_lists_same_name_other_version_and_namespace(
    registry: IPluginRegistry, logger: Collecting
) -> None:
    registry.register_creator(Creator("Relu", "2"))
    registry.register_creator(Creator("Relu", "1"), "vendor")
    registry.register_creator(Creator("Softmax", "1"))
    assert registry.get_plugin_creator("Relu", "1") is None
    [(severity, message)] = logger.messages
    assert severity is Severity.ERROR
    assert message.startswith("no plugin creator for 'Relu' version '1' namespace ''; close matches: ")
    assert "'Relu' version '2' namespace ''" in message
    assert "'Relu' version '1' namespace 'vendor'" in message
    assert "Softmax" not in message


def test_failed_lookup_lists_similar_names(registry: IPluginRegistry, logger: Collecting) -> None:
    registry.register_creator(Creator("LayerNorm", "1"))
    registry.register_creator(Creator("Unrelated", "1"))
    assert registry.get_creator("LayerNrom", "1") is None
    [(_, message)] = logger.messages
    assert "no plugin creator for 'LayerNrom' version '1' namespace ''" in message
    assert "close matches: 'LayerNorm' version '1' namespace ''" in message
    assert "Unrelated" not in message


def test_failed_lookup_without_close_match_lists_registered(registry: IPluginRegistry, logger: Collecting) -> None:
    registry.register_creator(Creator("Alpha", "1"))
    registry.register_creator(Creator("Beta", "3"), "ns")
    assert registry.get_creator("Zzzzz", "1") is None
    [(_, message)] = logger.messages
    assert message == "no plugin creator for 'Zzzzz' version '1' namespace ''; registered: Alpha v1, Beta v3 in 'ns'"


def test_failed_lookup_lists_at_most_twenty(registry: IPluginRegistry) -> None:
    for i in range(25):
        registry.register_creator(Creator(f"Op{i:02d}"))
    message = registry.describe_missing("Qqqqqq", "1")
    assert "; registered: Op00 v1" in message
    assert message.endswith("and 5 more")
    assert "Op19" in message and "Op20" not in message


def test_failed_lookup_is_filtered_by_logger_severity(registry: IPluginRegistry) -> None:
    quiet = Collecting()
    quiet.min_severity = Severity.INTERNAL_ERROR
    registry.logger = quiet
    assert registry.get_creator("Missing", "1") is None
    assert quiet.messages == []


def test_failed_lookup_with_default_logger_goes_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert IPluginRegistry().get_creator("Missing", "7", "ns") is None
    err = capsys.readouterr().err
    assert "[plugrt] ERROR: no plugin creator for 'Missing' version '7' namespace 'ns'" in err


def test_require_creator_raises_with_the_same_message(registry: IPluginRegistry, logger: Collecting) -> None:
    registry.register_creator(Creator("Relu", "2"))
    registry.get_creator("Relu", "1")
    [(_, logged)] = logger.messages
    with pytest.raises(CreatorNotFoundError) as info:
        registry.require_creator("Relu", "1")
    assert str(info.value) == logged
    assert "close matches: 'Relu' version '2' namespace ''" in str(info.value)
    assert len(logger.messages) == 1  # require_creator raises instead of logging


def test_require_creator_error_types(registry: IPluginRegistry) -> None:
    with pytest.raises(LookupError, match=r"no plugin creator for 'X' version '1' namespace 'n'"):
        registry.require_creator("X", "1", "n")
    with pytest.raises(RegistryError):
        registry.require_creator("X", "1")


def test_lookup_is_exact_about_version_strings(registry: IPluginRegistry) -> None:
    registry.register_creator(Creator("Relu", "1"))
    with pytest.raises(CreatorNotFoundError, match=r"'Relu' version '01'"):
        registry.require_creator("Relu", "01")
    with pytest.raises(CreatorNotFoundError, match=r"'relu' version '1'"):
        registry.require_creator("relu", "1")


# ---------------------------------------------------------------------------
# Libraries
# ---------------------------------------------------------------------------


def _library(tmp_path: Path, name: str, body: str = "") -> Path:
    path = tmp_path / f"{unique('lib')}.py"
    path.write_text(
        textwrap.dedent(
            f"""
            import plugrt

            class LibCreator(plugrt.IPluginCreator):
                def __init__(self, version):
                    super().__init__()
                    self.name = {name!r}
                    self.plugin_version = version

                def create_plugin(self, name, field_collection):
                    return None

            plugrt.get_plugin_registry().register_creator(LibCreator("1"))
            plugrt.get_plugin_registry().register_creator(LibCreator("2"), "lib_ns")
            """
        )
        + textwrap.dedent(body)
    )
    return path


def test_load_library_registers_and_deregister_library_removes(tmp_path: Path, global_cleanup: list[Any]) -> None:
    name = unique("LibPlugin")
    path = _library(tmp_path, name)
    registry = plugrt.get_plugin_registry()
    handle = registry.load_library(str(path))
    assert isinstance(handle, PluginLibraryHandle)
    assert handle.path == str(path)
    assert [(c.name, c.plugin_version, c.plugin_namespace) for c in handle.creators] == [
        (name, "1", ""),
        (name, "2", "lib_ns"),
    ]
    assert registry.require_creator(name, "1") is handle.creators[0]
    assert registry.require_creator(name, "2", "lib_ns") is handle.creators[1]
    registry.deregister_library(handle)
    with pytest.raises(CreatorNotFoundError, match=rf"no plugin creator for '{name}' version '1'"):
        registry.require_creator(name, "1")
    with pytest.raises(CreatorNotFoundError):
        registry.require_creator(name, "2", "lib_ns")


def test_load_library_handle_lists_only_that_librarys_creators(tmp_path: Path, global_cleanup: list[Any]) -> None:
    registry = plugrt.get_plugin_registry()
    outside = Creator(unique("Outside"))
    registry.register_creator(outside)
    handle = registry.load_library(str(_library(tmp_path, unique("Lib"))))
    assert all(c is not outside for c in handle.creators)
    registry.deregister_library(handle)
    assert registry.require_creator(outside.name, "1") is outside


def test_load_library_twice_is_a_duplicate(tmp_path: Path, global_cleanup: list[Any]) -> None:
    path = str(_library(tmp_path, unique("Twice")))
    registry = plugrt.get_plugin_registry()
    registry.load_library(path)
    with pytest.raises(DuplicateCreatorError, match="is already registered"):
        registry.load_library(path)


def test_load_library_by_module_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, global_cleanup: list[Any]
) -> None:
    name = unique("ModPlugin")
    module = unique("plugrt_test_module")
    (tmp_path / f"{module}.py").write_text(_library(tmp_path, name).read_text())
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = plugrt.get_plugin_registry()
    handle = registry.load_library(module)
    assert handle.path == module
    assert len(handle.creators) == 2
    registry.deregister_library(handle)
    assert all(c.name != name for c in registry.all_creators)


def test_load_library_of_missing_file(tmp_path: Path) -> None:
    missing = str(tmp_path / "no_such_library.py")
    with pytest.raises(RegistryError, match=rf"plugin library '{missing}' does not exist".replace("\\", "\\\\")):
        get_plugin_registry().load_library(missing)


def test_load_library_of_missing_path_without_py_suffix(tmp_path: Path) -> None:
    missing = str(tmp_path / "nowhere" / "libfoo.so")
    with pytest.raises(RegistryError, match="does not exist"):
        get_plugin_registry().load_library(missing)


def test_load_library_of_missing_module() -> None:
    module = unique("plugrt_no_such_module")
    with pytest.raises(RegistryError, match=rf"plugin library '{module}': no such file or module"):
        get_plugin_registry().load_library(module)


def test_load_library_of_directory(tmp_path: Path) -> None:
    with pytest.raises(RegistryError, match="does not exist"):
        get_plugin_registry().load_library(str(tmp_path) + "/")


def test_library_raising_during_import(tmp_path: Path, global_cleanup: list[Any]) -> None:
    path = tmp_path / f"{unique('broken')}.py"
    path.write_text("raise RuntimeError('library init exploded')\n")
    with pytest.raises(
        RegistryError,
        match=r"loading plugin library '.*broken_\w+\.py' failed: RuntimeError: "
        r"library init exploded",
    ) as info:
        get_plugin_registry().load_library(str(path))
    assert str(path) in str(info.value)
    assert isinstance(info.value.__cause__, RuntimeError)


def test_library_with_syntax_error(tmp_path: Path) -> None:
    path = tmp_path / f"{unique('syntax')}.py"
    path.write_text("def broken(:\n")
    with pytest.raises(RegistryError, match=r"loading plugin library '.*syntax_\w+\.py' failed: SyntaxError"):
        get_plugin_registry().load_library(str(path))


def test_failed_load_stops_recording(tmp_path: Path, global_cleanup: list[Any]) -> None:
    broken = tmp_path / f"{unique('broken')}.py"
    broken.write_text("raise ValueError('nope')\n")
    registry = get_plugin_registry()
    with pytest.raises(RegistryError):
        registry.load_library(str(broken))
    handle = registry.load_library(str(_library(tmp_path, unique("After"))))
    assert len(handle.creators) == 2


def test_library_raising_after_registering_leaves_nothing_behind(tmp_path: Path, global_cleanup: list[Any]) -> None:
    name = unique("Partial")
    path = _library(tmp_path, name, "\nraise RuntimeError('late failure')\n")
    registry = get_plugin_registry()
    with pytest.raises(RegistryError, match="late failure"):
        registry.load_library(str(path))
    assert all(c.name != name for c in registry.all_creators)


def test_deregister_library_rejects_other_objects(registry: IPluginRegistry) -> None:
    with pytest.raises(TypeMismatchError, match=r"deregister_library takes the handle load_library returned, got str"):
        registry.deregister_library("some/path.py")  # type: ignore[arg-type]


def test_deregister_library_is_idempotent(registry: IPluginRegistry) -> None:
    creator = Creator("A")
    registry.register_creator(creator)
    handle = PluginLibraryHandle("fake.py", [creator])
    registry.deregister_library(handle)
    registry.deregister_library(handle)
    assert registry.all_creators == []


# ---------------------------------------------------------------------------
# Thread safety
# ---------------------------------------------------------------------------


def test_concurrent_registration_into_fresh_registry(registry: IPluginRegistry) -> None:
    threads_count, per_thread = 8, 200
    barrier = threading.Barrier(threads_count)
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            barrier.wait()
            for i in range(per_thread):
                registry.register_creator(Creator(f"T{t}_P{i}", str(i % 3)), f"ns{i % 2}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(registry.all_creators) == threads_count * per_thread
    for t in range(threads_count):
        for i in range(per_thread):
            creator = registry.require_creator(f"T{t}_P{i}", str(i % 3), f"ns{i % 2}")
            assert creator.name == f"T{t}_P{i}"
            assert creator.plugin_namespace == f"ns{i % 2}"


def test_concurrent_duplicate_registration_has_exactly_one_winner(registry: IPluginRegistry) -> None:
    threads_count = 8
    barrier = threading.Barrier(threads_count)
    outcomes: list[str] = []
    lock = threading.Lock()

    def work() -> None:
        barrier.wait()
        try:
            registry.register_creator(Creator("Contested"))
            result = "ok"
        except DuplicateCreatorError:
            result = "duplicate"
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=work) for _ in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["duplicate"] * (threads_count - 1) + ["ok"]
    assert len(registry.all_creators) == 1


def test_concurrent_register_and_deregister(registry: IPluginRegistry) -> None:
    keep = [Creator(f"Keep{i}") for i in range(100)]
    churn = [Creator(f"Churn{i}") for i in range(100)]
    for creator in churn:
        registry.register_creator(creator)

    def add() -> None:
        for creator in keep:
            registry.register_creator(creator)

    def remove() -> None:
        for creator in churn:
            assert registry.deregister_creator(creator)

    threads = [threading.Thread(target=add), threading.Thread(target=remove)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(c.name for c in registry.all_creators) == sorted(c.name for c in keep)
