"""Every way of misusing the builder, the runtime and the execution context fails loudly.

plugrt raises where TensorRT returns None or False-and-logs (builder and runtime),
and every message names what was wrong: the tensor, the layer, the plugin, the hook.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import plugrt as trt
from plugrt.examples import circ_pad_v2, circ_pad_v3

from testing_plugins import ScalePluginV2Ext, build, fields, run

_COUNTER = itertools.count()


def unique(prefix: str) -> str:
    """A plugin name no other test uses (the registry is process-wide)."""
    return f"{prefix}{next(_COUNTER)}"


class Collect(trt.ILogger):
    """Keeps every message."""

    def __init__(self) -> None:
        super().__init__(trt.Logger.VERBOSE)
        self.messages: list[tuple[trt.Severity, str]] = []
        self._lock = threading.Lock()

    def log(self, severity: trt.Severity, msg: str) -> None:
        with self._lock:
            self.messages.append((severity, msg))

    def errors(self) -> list[str]:
        return [m for s, m in self.messages if s <= trt.Severity.ERROR]


# --- small plugins, some of them broken on purpose ----------------------------------------


class Tiny(trt.IPluginV2DynamicExt):
    """y = x (float32, linear). Broken variants subclass it and override one hook."""

    def __init__(self, name: str) -> None:
        trt.IPluginV2DynamicExt.__init__(self)
        self.num_outputs = 1
        self.plugin_type = name
        self.plugin_version = "1"
        self.plugin_namespace = ""

    def get_output_datatype(self, index: int, input_types: list[trt.DataType]) -> trt.DataType:
        return input_types[0]

    def get_output_dimensions(self, output_index: int, inputs: list[trt.DimsExprs], exprBuilder: trt.IExprBuilder) -> trt.DimsExprs:
        return trt.DimsExprs(inputs[0])

    def supports_format_combination(self, pos: int, in_out: list[trt.PluginTensorDesc], num_inputs: int) -> bool:
        return in_out[pos].type == trt.DataType.FLOAT and in_out[pos].format == trt.TensorFormat.LINEAR

    def enqueue(self, input_desc: list[trt.PluginTensorDesc], output_desc: list[trt.PluginTensorDesc],
                inputs: list[int], outputs: list[int], workspace: int, stream: int) -> int:
        trt.as_array(outputs[0], output_desc[0])[...] = trt.as_array(inputs[0], input_desc[0])
        return 0

    def clone(self) -> Tiny:
        return type(self)(self.plugin_type)


class TinyCreator(trt.IPluginCreator):
    """Creates and deserializes instances of ``cls`` under ``name``."""

    def __init__(self, cls: type, name: str, version: str = "1") -> None:
        trt.IPluginCreator.__init__(self)
        self.cls = cls
        self.name = name
        self.plugin_version = version
        self.field_names = trt.PluginFieldCollection()

    def create_plugin(self, name: str, fc: trt.PluginFieldCollection) -> Any:
        return self.cls(self.name)

    def deserialize_plugin(self, name: str, data: bytes) -> Any:
        return self.cls(self.name)


POISON = -1.0


class PoisonV2(Tiny):
    """Raises inside enqueue when the input holds POISON; copies otherwise."""

    def enqueue(self, input_desc: list[trt.PluginTensorDesc], output_desc: list[trt.PluginTensorDesc],
                inputs: list[int], outputs: list[int], workspace: int, stream: int) -> int:
        x = trt.as_array(inputs[0], input_desc[0])
        if (x == POISON).any():
            raise ValueError("poisoned input reached PoisonV2.enqueue")
        return super().enqueue(input_desc, output_desc, inputs, outputs, workspace, stream)


def _poison_v3_class(name: str) -> tuple[type, type]:
    class PoisonV3(circ_pad_v3.CircPadPluginV3):
        def __init__(self, fc: trt.PluginFieldCollection | None = None) -> None:
            super().__init__(fc)
            self.plugin_name = name

        def enqueue(self, input_desc: list[trt.PluginTensorDesc], output_desc: list[trt.PluginTensorDesc],
                    inputs: list[int], outputs: list[int], workspace: int, stream: int) -> None:
            if (trt.as_array(inputs[0], input_desc[0]) == POISON).any():
                raise ValueError("poisoned input reached PoisonV3.enqueue")
            super().enqueue(input_desc, output_desc, inputs, outputs, workspace, stream)

        def clone(self) -> PoisonV3:
            copy = PoisonV3()
            copy.pads, copy.widths = list(self.pads), list(self.widths)
            return copy

    class PoisonV3Creator(circ_pad_v3.CircPadPluginV3Creator):
        def __init__(self) -> None:
            super().__init__()
            self.name = name

        def create_plugin(self, name_: str, fc: trt.PluginFieldCollection, phase: trt.TensorRTPhase) -> PoisonV3:
            return PoisonV3(fc)

    return PoisonV3, PoisonV3Creator


@pytest.fixture
def registry() -> Iterator[Callable[[Any, str], Any]]:
    """register(creator, namespace='') for the test; everything is deregistered afterwards."""
    registered: list[Any] = []

    def register(creator: Any, namespace: str = "") -> Any:
        trt.get_plugin_registry().register_creator(creator, namespace)
        registered.append(creator)
        return creator

    yield register
    for creator in registered:
        trt.get_plugin_registry().deregister_creator(creator)


def _network(builder: trt.Builder, plugin: Any, shape: tuple[int, ...] = (2, 4), layer: str = "tiny",
             dtype: trt.DataType = trt.float32) -> trt.INetworkDefinition:
    network = builder.create_network(0)
    x = network.add_input("x", dtype, shape)
    if isinstance(plugin, trt.IPluginV3):
        added = network.add_plugin_v3([x], [], plugin)
    else:
        added = network.add_plugin_v2([x], plugin)
    added.name = layer
    added.get_output(0).name = "y"
    network.mark_output(added.get_output(0))
    return network


def _engine(plugin: Any, shape: tuple[int, ...] = (-1, 4), logger: trt.ILogger | None = None,
            profile: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] = ((1, 4), (2, 4), (4, 4)),
            layer: str = "tiny") -> trt.ICudaEngine:
    logger = logger or Collect()
    builder = trt.Builder(logger)
    plan = build(_network(builder, plugin, shape, layer), builder, [{"x": profile}] if -1 in shape else [])
    return trt.Runtime(logger).deserialize_cuda_engine(plan)


@pytest.fixture
def pad_engine() -> tuple[trt.ICudaEngine, Collect]:
    """x [-1, 4] -> CircPad V2 (pads 1, 1) -> y, profile batch 1..4."""
    logger = Collect()
    plugin = circ_pad_v2.register().create_plugin("pad", fields(pads=[1, 1]))
    return _engine(plugin, logger=logger, layer="pad"), logger


# --- execution context --------------------------------------------------------------------


@pytest.mark.parametrize(("shape", "reason"), [
    ((5, 4), r"axis 0 is outside the profile's range \[1, 4\]"),
    ((0, 4), r"axis 0 is outside the profile's range \[1, 4\]"),
    ((2, 5), r"axis 1 is outside the profile's range \[4, 4\]"),
    ((2, 4, 1), r"rank 3 differs from the engine's rank 2"),
    ((8,), r"rank 1 differs from the engine's rank 2"),
])
def test_set_input_shape_outside_profile_returns_false_and_logs_why(pad_engine: Any, shape: tuple[int, ...], reason: str) -> None:
    engine, logger = pad_engine
    context = engine.create_execution_context()
    assert context.set_input_shape("x", (2, 4)) is True
    before = len(logger.errors())
    assert context.set_input_shape("x", shape) is False
    errors = logger.errors()[before:]
    assert len(errors) == 1
    assert "'x'" in errors[0] and str(tuple(shape)) in errors[0]
    assert "profile 0" in errors[0]
    assert re.search(reason, errors[0]), errors[0]
    # the rejected shape did not replace the accepted one
    assert tuple(context.get_tensor_shape("x")) == (2, 4)
    out = run(context, {"x": np.ones((2, 4), np.float32)})["y"]
    assert out.shape == (2, 6)


def test_set_input_shape_unknown_name_lists_io_tensors(pad_engine: Any) -> None:
    engine, _ = pad_engine
    context = engine.create_execution_context()
    with pytest.raises(trt.ExecutionError, match=r"no IO tensor named 'nope'.*\['x', 'y'\]"):
        context.set_input_shape("nope", (2, 4))


def test_set_input_shape_on_an_output_raises(pad_engine: Any) -> None:
    engine, _ = pad_engine
    context = engine.create_execution_context()
    with pytest.raises(trt.ExecutionError, match=r"'y' is an output"):
        context.set_input_shape("y", (2, 6))


def test_run_without_input_shape_names_the_input(pad_engine: Any) -> None:
    engine, _ = pad_engine
    context = engine.create_execution_context()
    x = np.ones((2, 4), np.float32)
    y = np.zeros((2, 6), np.float32)
    context.set_tensor_address("x", x.ctypes.data)
    context.set_tensor_address("y", y.ctypes.data)
    with pytest.raises(trt.ExecutionError, match=r"input shape\(s\) of \['x'\] are not set"):
        context.execute_async_v3(0)


@pytest.mark.parametrize("missing", ["x", "y"])
def test_run_without_tensor_address_names_the_tensor(pad_engine: Any, missing: str) -> None:
    engine, _ = pad_engine
    context = engine.create_execution_context()
    arrays = {"x": np.ones((2, 4), np.float32), "y": np.zeros((2, 6), np.float32)}
    assert context.set_input_shape("x", (2, 4))
    for name, array in arrays.items():
        if name != missing:
            context.set_tensor_address(name, array.ctypes.data)
    with pytest.raises(trt.ExecutionError, match=rf"tensor '{missing}' has no address"):
        context.execute_async_v3(0)
    # giving the address afterwards is enough
    context.set_tensor_address(missing, arrays[missing].ctypes.data)
    context.execute_async_v3(0)
    np.testing.assert_array_equal(arrays["y"], np.ones((2, 6)))


@pytest.mark.parametrize("bad", [1.5, "0x1000", None, True, [1234], np.float32(3.0)])
def test_set_tensor_address_rejects_non_integers(pad_engine: Any, bad: Any) -> None:
    engine, _ = pad_engine
    context = engine.create_execution_context()
    with pytest.raises(trt.TypeMismatchError, match=rf"set_tensor_address\('x'\): memory must be an integer address, got {type(bad).__name__}"):
        context.set_tensor_address("x", bad)
    assert context.get_tensor_address("x") == 0


def test_set_tensor_address_unknown_name(pad_engine: Any) -> None:
    engine, _ = pad_engine
    context = engine.create_execution_context()
    with pytest.raises(trt.ExecutionError, match=r"no IO tensor named 'z'"):
        context.set_tensor_address("z", 1024)


# --- building -----------------------------------------------------------------------------


def test_build_without_outputs() -> None:
    builder = trt.Builder(Collect())
    network = builder.create_network(0)
    network.add_input("x", trt.float32, (2, 4))
    with pytest.raises(trt.BuildError, match="no outputs"):
        builder.build_serialized_network(network, builder.create_builder_config())


def test_build_dynamic_input_without_profile_names_the_input() -> None:
    logger = Collect()
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    x = network.add_input("images", trt.float32, (-1, 3, -1))
    network.mark_output(network.add_plugin_v2([x], Tiny(unique("Copy"))).get_output(0))
    with pytest.raises(trt.BuildError, match=r"'images' \(dynamic axes \[0, 2\]\).*optimization profile"):
        builder.build_serialized_network(network, builder.create_builder_config())
    assert any("images" in m for m in logger.errors())


def _copy_network(builder: trt.Builder, shape: tuple[int, ...] = (-1, 4)) -> trt.INetworkDefinition:
    return _network(builder, Tiny(unique("Copy")), shape, layer="copy")


@pytest.mark.parametrize(("shapes", "message"), [
    ({"x": ((1, 4), (2, 4), (3, 4)), "ghost": ((1,), (1,), (1,))},
     r"profile 0 sets shapes of \['ghost'\], which are not network inputs; inputs: \['x'\]"),
    ({"x": ((1,), (2,), (3,))}, r"input 'x' has rank 2 .* the profile gives rank 1"),
    ({"x": ((1, 4, 1), (2, 4, 1), (3, 4, 1))}, r"input 'x' has rank 2 .* the profile gives rank 3"),
    ({"x": ((1, 5), (2, 5), (3, 5))}, r"input 'x' axis 1 is fixed at 4 but the profile gives min 5, opt 5, max 5"),
    ({"x": ((1, 4), (2, 4), (3, 8))}, r"input 'x' axis 1 is fixed at 4 but the profile gives min 4, opt 4, max 8"),
])
def test_build_bad_profile(shapes: dict[str, Any], message: str) -> None:
    builder = trt.Builder(Collect())
    with pytest.raises(trt.BuildError, match=message):
        build(_copy_network(builder), builder, [shapes])


def test_build_second_profile_missing_dynamic_input_is_named() -> None:
    builder = trt.Builder(Collect())
    network = builder.create_network(0)
    a = network.add_input("a", trt.float32, (-1, 4))
    b = network.add_input("b", trt.float32, (-1, 4))
    network.mark_output(network.add_plugin_v2([a], Tiny(unique("Copy"))).get_output(0))
    network.mark_output(network.add_plugin_v2([b], Tiny(unique("Copy"))).get_output(0))
    good = {"a": ((1, 4), (1, 4), (2, 4)), "b": ((1, 4), (1, 4), (2, 4))}
    with pytest.raises(trt.BuildError, match=r"profile 1 has no shape for dynamic input 'b'"):
        build(network, builder, [good, {"a": good["a"]}])


class RejectEverything(Tiny):
    def supports_format_combination(self, pos: int, in_out: list[trt.PluginTensorDesc], num_inputs: int) -> bool:
        return False


class RejectOutputs(Tiny):
    def supports_format_combination(self, pos: int, in_out: list[trt.PluginTensorDesc], num_inputs: int) -> bool:
        return pos < num_inputs and super().supports_format_combination(pos, in_out, num_inputs)


@pytest.mark.parametrize(("cls", "position"), [(RejectEverything, r"position 0 \(input 0\)"),
                                               (RejectOutputs, r"position 1 \(output 0\)")])
def test_build_format_negotiation_failure_names_plugin_and_position(cls: type, position: str) -> None:
    name = unique("Picky")
    builder = trt.Builder(Collect())
    network = _network(builder, cls(name), layer="picky")
    with pytest.raises(trt.FormatNegotiationError, match=rf"layer 'picky', plugin {name} v1.*accepts no type/format combination; {position}"):
        build(network, builder)


def test_build_format_negotiation_failure_v3() -> None:
    class PickyV3(circ_pad_v3.CircPadPluginV3):
        def supports_format_combination(self, pos: int, in_out: list[trt.DynamicPluginTensorDesc], num_inputs: int) -> bool:
            return False

        def clone(self) -> PickyV3:
            copy = PickyV3()
            copy.plugin_name, copy.pads = self.plugin_name, list(self.pads)
            return copy

    plugin = PickyV3()
    plugin.plugin_name = unique("PickyV3_")
    builder = trt.Builder(Collect())
    with pytest.raises(trt.FormatNegotiationError, match=rf"plugin {plugin.plugin_name} v1.*position 0 \(input 0\) rejected every candidate"):
        build(_network(builder, plugin, layer="picky3"), builder)


class SizeAttributeLies(Tiny):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.serialization_size = 7

    def serialize(self) -> bytes:
        return b"abcd"


class SizePropertyLies(Tiny):
    @property
    def serialization_size(self) -> int:  # type: ignore[override]
        return 99

    def serialize(self) -> bytes:
        return b"abcdef"


@pytest.mark.parametrize(("cls", "wrote", "says"), [(SizeAttributeLies, 4, 7), (SizePropertyLies, 6, 99)])
def test_build_serialization_size_mismatch_says_both_numbers(cls: type, wrote: int, says: int) -> None:
    name = unique("Liar")
    builder = trt.Builder(Collect())
    with pytest.raises(trt.BuildError, match=rf"layer 'liar', plugin {name} v1, serialize\(\) wrote {wrote} bytes but get_serialization_size \(serialization_size\) says {says}"):
        build(_network(builder, cls(name), layer="liar"), builder)


def test_serialization_size_that_matches_builds() -> None:
    class Honest(SizeAttributeLies):
        def __init__(self, name: str) -> None:
            super().__init__(name)
            self.serialization_size = 4

    builder = trt.Builder(Collect())
    assert len(build(_network(builder, Honest(unique("Honest")), layer="honest"), builder)) > 0


def _raising(hook: str) -> Callable[..., Any]:
    def hook_fn(self: Any, *args: Any) -> Any:
        raise RuntimeError(f"boom in {hook}")
    return hook_fn


# hook that raises -> the hook the message names (serialization_size is asked before serialize)
BUILD_HOOKS = {
    "clone": "clone",
    "get_output_datatype": "get_output_datatype",
    "get_output_dimensions": "get_output_dimensions",
    "supports_format_combination": "supports_format_combination",
    "configure_plugin": "configure_plugin",
    "get_workspace_size": "get_workspace_size",
    "initialize": "initialize",
    "serialize": "get_serialization_size",
}


@pytest.mark.parametrize("hook", sorted(BUILD_HOOKS))
def test_build_hook_raising_names_layer_plugin_and_hook(hook: str) -> None:
    name = unique(f"Raise_{hook}_")
    cls = type(f"RaiseIn_{hook}", (Tiny,), {hook: _raising(hook)})
    logger = Collect()
    builder = trt.Builder(logger)
    network = _network(builder, cls(name), layer=f"layer_{hook}")
    with pytest.raises(trt.PluginError, match=rf"layer 'layer_{hook}', plugin {name} v1, {BUILD_HOOKS[hook]}\(\).*RuntimeError: boom in {hook}") as info:
        build(network, builder)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert any(f"boom in {hook}" in m for m in logger.errors())


def test_build_hook_raising_tears_down_the_build_instance() -> None:
    name = unique("RaiseLate")
    cls = type("RaiseInWorkspace", (Tiny,), {"get_workspace_size": _raising("get_workspace_size")})
    builder = trt.Builder(Collect())
    with trt.trace_plugin_calls() as trace, pytest.raises(trt.PluginError):
        build(_network(builder, cls(name), layer="late"), builder)
    assert trace.methods("late")[-1] == "destroy"


def test_build_hook_returning_garbage_is_a_plugin_error() -> None:
    name = unique("BadWorkspace")
    cls = type("NegativeWorkspace", (Tiny,), {"get_workspace_size": lambda self, i, o: -5})
    builder = trt.Builder(Collect())
    with pytest.raises(trt.PluginError, match=rf"plugin {name} v1, get_workspace_size\(\) returned -5; expected a non-negative int"):
        build(_network(builder, cls(name), layer="ws"), builder)


def test_runtime_hook_raising_names_layer_plugin_and_hook(registry: Any) -> None:
    name = unique("RaiseAtRuntime")

    class InitFailsAtRuntime(Tiny):
        fail = False

        def initialize(self) -> int:
            if InitFailsAtRuntime.fail:
                raise OSError("no device memory")
            return 0

    registry(TinyCreator(InitFailsAtRuntime, name))
    builder = trt.Builder(Collect())
    plan = build(_network(builder, InitFailsAtRuntime(name), layer="init"), builder)
    InitFailsAtRuntime.fail = True
    with pytest.raises(trt.PluginError, match=rf"layer 'init', plugin {name} v1, initialize\(\) raised OSError: no device memory"):
        trt.Runtime(Collect()).deserialize_cuda_engine(plan)
    InitFailsAtRuntime.fail = False
    assert trt.Runtime(Collect()).deserialize_cuda_engine(plan).num_layers == 1


class NoOutputDimensions(trt.IPluginV2DynamicExt):
    def __init__(self, name: str = "") -> None:
        super().__init__()
        self.plugin_type = name

    def supports_format_combination(self, pos: int, in_out: list[trt.PluginTensorDesc], num_inputs: int) -> bool:
        return in_out[pos].type == trt.DataType.FLOAT

    def clone(self) -> NoOutputDimensions:
        return NoOutputDimensions(self.plugin_type)


class NoFormats(Tiny):
    supports_format_combination = trt.IPluginV2DynamicExt.supports_format_combination


class NoClone(trt.IPluginV2DynamicExt):
    def __init__(self, name: str = "") -> None:
        super().__init__()
        self.plugin_type = name


@pytest.mark.parametrize(("cls", "hook", "interface"), [
    (NoOutputDimensions, "get_output_dimensions", "IPluginV2DynamicExt"),
    (NoFormats, "supports_format_combination", "IPluginV2DynamicExt"),
    (NoClone, "clone", "IPluginV2"),
])
def test_build_missing_required_hook_names_hook_and_class(cls: type, hook: str, interface: str) -> None:
    builder = trt.Builder(Collect())
    with pytest.raises(trt.MissingHookError, match=rf"{cls.__name__} does not implement {interface}\.{hook}\(\), which is required"):
        build(_network(builder, cls(unique("Missing")), layer="missing"), builder)


def test_build_v3_missing_required_hook() -> None:
    class NoFieldsV3(circ_pad_v3.CircPadPluginV3):
        get_fields_to_serialize = trt.IPluginV3OneRuntime.get_fields_to_serialize

        def clone(self) -> NoFieldsV3:
            copy = NoFieldsV3()
            copy.plugin_name, copy.pads = self.plugin_name, list(self.pads)
            return copy

    plugin = NoFieldsV3()
    plugin.plugin_name = unique("NoFieldsV3_")
    builder = trt.Builder(Collect())
    with pytest.raises(trt.MissingHookError, match=r"NoFieldsV3 does not implement IPluginV3OneRuntime\.get_fields_to_serialize\(\)"):
        build(_network(builder, plugin, layer="nofields"), builder)


class NoEnqueue(Tiny):
    enqueue = trt.IPluginV2DynamicExt.enqueue


def test_missing_enqueue_is_a_missing_hook_error(registry: Any) -> None:
    """Found when the layer is built (or, at the latest, on the first run); never a generic error."""
    name = unique("NoEnqueue")
    registry(TinyCreator(NoEnqueue, name))
    with pytest.raises(trt.MissingHookError, match=r"NoEnqueue does not implement IPluginV2DynamicExt\.enqueue\(\), which is required; define enqueue on NoEnqueue"):
        context = _engine(NoEnqueue(name), shape=(2, 4), layer="noenq").create_execution_context()
        run(context, {"x": np.ones((2, 4), np.float32)})


def _engine_reviving_without_enqueue(registry: Any) -> trt.ICudaEngine:
    """Built with a complete plugin; the creator revives a class that lacks enqueue."""
    name = unique("RevivedNoEnqueue")
    registry(TinyCreator(NoEnqueue, name))
    return _engine(Tiny(name), shape=(2, 4), layer="revived")


def test_revived_plugin_missing_enqueue_is_a_missing_hook_error(registry: Any) -> None:
    with pytest.raises(trt.MissingHookError, match=r"NoEnqueue does not implement IPluginV2DynamicExt\.enqueue\(\)"):
        run(_engine_reviving_without_enqueue(registry).create_execution_context(), {"x": np.ones((2, 4), np.float32)})


def test_revived_plugin_missing_enqueue_names_layer_hook_and_class(registry: Any) -> None:
    """Whatever the outer type, the failure is (or is caused by) a MissingHookError naming hook and class."""
    with pytest.raises(trt.PlugrtError, match=r"NoEnqueue does not implement IPluginV2DynamicExt\.enqueue\(\)") as info:
        run(_engine_reviving_without_enqueue(registry).create_execution_context(), {"x": np.ones((2, 4), np.float32)})
    assert isinstance(info.value, trt.MissingHookError) or isinstance(info.value.__cause__, trt.MissingHookError)


def test_build_workspace_above_pool_limit() -> None:
    name = unique("Greedy")
    cls = type("Greedy", (Tiny,), {"get_workspace_size": lambda self, i, o: 1 << 20})
    builder = trt.Builder(Collect())
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, 1024)
    network = _network(builder, cls(name), layer="greedy")
    with pytest.raises(trt.BuildError, match=r"layer 'greedy' needs 1048576 bytes of workspace but MemoryPoolType.WORKSPACE is limited to 1024"):
        builder.build_serialized_network(network, config)
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, 1 << 20)
    assert len(builder.build_serialized_network(network, config)) > 0


def test_build_static_v2ext_plugin_with_dynamic_non_batch_dim() -> None:
    builder = trt.Builder(Collect())
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (-1, -1, 3))
    layer = network.add_plugin_v2([x], ScalePluginV2Ext(2.0))
    layer.name = "scale"
    network.mark_output(layer.get_output(0))
    profile = {"x": ((1, 1, 3), (2, 2, 3), (4, 4, 3))}
    with pytest.raises(trt.BuildError, match=r"layer 'scale'.*input 0 has dynamic dimension\(s\) \[1\].*Use IPluginV2DynamicExt"):
        build(network, builder, [profile])


def test_build_cancelled_by_progress_monitor() -> None:
    events: list[str] = []

    class Cancel(trt.IProgressMonitor):
        def phase_start(self, phase_name: str, parent_phase: str | None, num_steps: int) -> None:
            events.append(f"start {num_steps}")

        def step_complete(self, phase_name: str, step: int) -> bool:
            events.append(f"step {step}")
            return step < 1

        def phase_finish(self, phase_name: str) -> None:
            events.append("finish")

    builder = trt.Builder(Collect())
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (2, 4))
    first = network.add_plugin_v2([x], circ_pad_v2.register().create_plugin("p", fields(pads=[1, 1])))
    first.name = "first"
    second = network.add_plugin_v2([first.get_output(0)], Tiny(unique("Second")))
    second.name = "second"
    third = network.add_plugin_v2([second.get_output(0)], Tiny(unique("Third")))
    network.mark_output(third.get_output(0))
    config = builder.create_builder_config()
    config.progress_monitor = Cancel()
    with trt.trace_plugin_calls() as trace, pytest.raises(trt.BuildError, match=r"cancelled by the progress monitor after layer 'second'"):
        builder.build_serialized_network(network, config)
    assert events == ["start 3", "step 0", "step 1", "finish"]
    assert trace.methods("first")[-2:] == ["terminate", "destroy"]  # the build instance was torn down


def test_add_plugin_v2_with_a_v3_plugin_suggests_add_plugin_v3() -> None:
    network = trt.Builder(Collect()).create_network(0)
    x = network.add_input("x", trt.float32, (2, 4))
    with pytest.raises(trt.TypeMismatchError, match=r"add_plugin_v2 takes .* got CircPadPluginV3; use add_plugin_v3"):
        network.add_plugin_v2([x], circ_pad_v3.CircPadPluginV3())


def test_add_plugin_v3_with_a_v2_plugin_suggests_add_plugin_v2() -> None:
    network = trt.Builder(Collect()).create_network(0)
    x = network.add_input("x", trt.float32, (2, 4))
    with pytest.raises(trt.TypeMismatchError, match=r"add_plugin_v3 takes an IPluginV3, got CircPadPlugin; use add_plugin_v2"):
        network.add_plugin_v3([x], [], circ_pad_v2.CircPadPlugin())


# --- deserialization ----------------------------------------------------------------------


def _pad_plan() -> bytes:
    builder = trt.Builder(Collect())
    plugin = circ_pad_v2.register().create_plugin("pad", fields(pads=[1, 1]))
    return bytes(build(_network(builder, plugin, shape=(-1, 4), layer="pad"), builder, [{"x": ((1, 4), (2, 4), (4, 4))}]))


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda p: p[:0], "truncated"),
    (lambda p: p[:5], "truncated"),
    (lambda p: p[:40], "truncated"),
    (lambda p: p[: len(p) // 2], "truncated"),
    (lambda p: p[:-1], "truncated"),
    (lambda p: p + b"\0", "trailing bytes"),
    (lambda p: bytes([p[0] ^ 1]) + p[1:], "not a plugrt plan"),
    (lambda p: p[:100] + bytes([p[100] ^ 0x10]) + p[101:], "checksum mismatch|malformed"),
    (lambda p: p[:-3] + bytes([p[-3] ^ 0x80]) + p[-2:], "checksum mismatch"),
    (lambda p: p[:8] + (3).to_bytes(4, "little") + p[12:], "plan format version 3 is not supported; this plugrt reads version 2"),
    # a plan written before layers were one record (kind, params, weights)
    (lambda p: p[:8] + (1).to_bytes(4, "little") + p[12:], "plan format version 1 is not supported; this plugrt reads version 2"),
    (lambda p: p[:8] + (0).to_bytes(4, "little") + p[12:], "plan format version 0 is not supported"),
    (lambda p: b"PK\x03\x04" + p[4:], "not a plugrt plan"),
])
def test_deserialize_damaged_plan(mutate: Callable[[bytes], bytes], message: str) -> None:
    logger = Collect()
    damaged = mutate(_pad_plan())
    with pytest.raises(trt.PlanFormatError, match=message):
        trt.Runtime(logger).deserialize_cuda_engine(damaged)
    assert any("deserialize_cuda_engine failed" in m for m in logger.errors())


def test_deserialize_rejects_non_bytes() -> None:
    with pytest.raises(trt.TypeMismatchError, match="deserialize_cuda_engine takes bytes, got str"):
        trt.Runtime(Collect()).deserialize_cuda_engine("PLUGRTPL")  # type: ignore[arg-type]


def test_deserialize_unregistered_v2_plugin_names_it_and_close_matches(registry: Any) -> None:
    name = unique("Lonely")
    original = registry(TinyCreator(Tiny, name))
    plan = bytes(build(_network(trt.Builder(Collect()), Tiny(name), layer="lonely"), trt.Builder(Collect())))
    reg = trt.get_plugin_registry()
    assert reg.deregister_creator(original)
    registry(TinyCreator(Tiny, name), "other_ns")
    registry(TinyCreator(Tiny, name, version="2"))
    logger = Collect()
    with pytest.raises(trt.CreatorNotFoundError) as info:
        trt.Runtime(logger).deserialize_cuda_engine(plan)
    message = str(info.value)
    assert f"no plugin creator for '{name}' version '1' namespace ''" in message
    assert "close matches" in message
    assert f"'{name}' version '1' namespace 'other_ns'" in message
    assert f"'{name}' version '2' namespace ''" in message
    assert any(name in m for m in logger.errors())
    # registered again, the same plan loads
    registry(original)
    engine = trt.Runtime(Collect()).deserialize_cuda_engine(plan)
    out = run(engine.create_execution_context(), {"x": np.arange(8, dtype=np.float32).reshape(2, 4)})["y"]
    np.testing.assert_array_equal(out, np.arange(8).reshape(2, 4))


def test_deserialize_unregistered_example_plugins_then_register_again() -> None:
    """The brief's recipe with the example creators: deregister, fail, re-register, succeed."""
    reg = trt.get_plugin_registry()
    v2, v3 = circ_pad_v2.register(), circ_pad_v3.register()
    builder = trt.Builder(Collect())
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (-1, 4))
    a = network.add_plugin_v2([x], v2.create_plugin("a", fields(pads=[1, 0])))
    a.name = "pad_v2"
    b = network.add_plugin_v3([a.get_output(0)], [], v3.create_plugin("b", fields(pads=[0, 2]), trt.TensorRTPhase.BUILD))
    b.name = "pad_v3"
    b.get_output(0).name = "y"
    network.mark_output(b.get_output(0))
    plan = bytes(build(network, builder, [{"x": ((1, 4), (2, 4), (3, 4))}]))
    for creator, layer in ((v2, "pad_v2"), (v3, "pad_v3")):
        assert reg.deregister_creator(creator)
        try:
            stray = TinyCreator(Tiny, creator.name)
            reg.register_creator(stray, "elsewhere")
            try:
                with pytest.raises(trt.CreatorNotFoundError, match=rf"no plugin creator for '{creator.name}' version '1' namespace ''; close matches: '{creator.name}' version '1' namespace 'elsewhere'"):
                    trt.Runtime(Collect()).deserialize_cuda_engine(plan)
            finally:
                reg.deregister_creator(stray)
        finally:
            reg.register_creator(creator, "")
        assert layer  # both layers' creators were exercised
    engine = trt.Runtime(Collect()).deserialize_cuda_engine(plan)
    x_in = np.arange(8, dtype=np.float32).reshape(2, 4)
    out = run(engine.create_execution_context(), {"x": x_in})["y"]
    np.testing.assert_array_equal(out, np.pad(np.pad(x_in, [(0, 0), (1, 0)], mode="wrap"), [(0, 0), (0, 2)], mode="wrap"))


# --- plugin failures while running --------------------------------------------------------


def _poison_engines(registry: Any) -> list[tuple[str, str, trt.ICudaEngine, Callable[[np.ndarray], np.ndarray]]]:
    v2_name = unique("PoisonV2_")
    registry(TinyCreator(PoisonV2, v2_name))
    v2 = _engine(PoisonV2(v2_name), layer="poison_v2")
    v3_name = unique("PoisonV3_")
    v3_cls, v3_creator_cls = _poison_v3_class(v3_name)
    v3_creator = registry(v3_creator_cls())
    v3_plugin = v3_creator.create_plugin("p", fields(pads=[1, 2]), trt.TensorRTPhase.BUILD)
    assert isinstance(v3_plugin, v3_cls)
    v3 = _engine(v3_plugin, layer="poison_v3")
    return [
        (v2_name, "poison_v2", v2, lambda x: x),
        (v3_name, "poison_v3", v3, lambda x: np.pad(x, [(0, 0), (1, 2)], mode="wrap")),
    ]


def test_enqueue_raising_is_an_execution_error_and_the_context_recovers(registry: Any) -> None:
    rng = np.random.default_rng(7)
    for name, layer, engine, reference in _poison_engines(registry):
        bad_ctx, other_ctx = engine.create_execution_context(), engine.create_execution_context()
        bad = rng.random((3, 4), dtype=np.float32)
        bad[1, 2] = POISON
        with pytest.raises(trt.ExecutionError, match=rf"layer '{layer}', plugin {name} v1, enqueue\(\).*ValueError: poisoned input") as info:
            run(bad_ctx, {"x": bad})
        assert isinstance(info.value.__cause__, trt.PluginError)
        # the other context of the same engine is unaffected
        good = rng.random((2, 4), dtype=np.float32)
        np.testing.assert_array_equal(run(other_ctx, {"x": good})["y"], reference(good))
        # the same context runs again, at the same shape and at another one
        for shape in ((3, 4), (1, 4), (4, 4)):
            good = rng.random(shape, dtype=np.float32)
            np.testing.assert_array_equal(run(bad_ctx, {"x": good})["y"], reference(good))
        # and fails again, the same way, when poisoned again
        with pytest.raises(trt.ExecutionError, match=rf"layer '{layer}'"):
            run(bad_ctx, {"x": bad})
        np.testing.assert_array_equal(run(bad_ctx, {"x": good})["y"], reference(good))


def test_enqueue_raising_in_one_thread_leaves_other_threads_alone(registry: Any) -> None:
    name, layer, engine, reference = _poison_engines(registry)[1]
    errors: list[BaseException] = []
    failures = [0]

    def worker(seed: int, poisoned: bool) -> None:
        rng = np.random.default_rng(seed)
        context = engine.create_execution_context()
        try:
            for i in range(30):
                x = rng.random((int(rng.integers(1, 5)), 4), dtype=np.float32)
                if poisoned and i % 3 == 0:
                    x[0, 0] = POISON
                    try:
                        run(context, {"x": x})
                    except trt.ExecutionError as exc:
                        assert layer in str(exc) and name in str(exc)
                        failures[0] += 1
                        continue
                    raise AssertionError("poisoned run did not fail")
                np.testing.assert_array_equal(run(context, {"x": x})["y"], reference(x))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(seed, seed % 2 == 0)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert failures[0] == 2 * 10


@pytest.mark.parametrize("status", [1, -3, 7])
def test_enqueue_non_zero_status_is_an_execution_error(registry: Any, status: int) -> None:
    name = unique("Status")
    fails = {"on": True}

    class StatusPlugin(Tiny):
        def enqueue(self, input_desc: Any, output_desc: Any, inputs: Any, outputs: Any, workspace: int, stream: int) -> int:
            super().enqueue(input_desc, output_desc, inputs, outputs, workspace, stream)
            return status if fails["on"] else 0

    registry(TinyCreator(StatusPlugin, name))
    context = _engine(StatusPlugin(name), layer="status").create_execution_context()
    x = np.ones((2, 4), np.float32)
    with pytest.raises(trt.ExecutionError, match=rf"layer 'status', plugin {name} v1, enqueue\(\) returned {status}; 0 or None means success"):
        run(context, {"x": x})
    fails["on"] = False
    np.testing.assert_array_equal(run(context, {"x": x})["y"], x)


def test_enqueue_non_zero_status_v3(registry: Any) -> None:
    name = unique("StatusV3_")
    base_cls, creator_cls = _poison_v3_class(name)

    class StatusV3(base_cls):  # type: ignore[misc, valid-type]
        def enqueue(self, *args: Any) -> int:
            super().enqueue(*args)
            return 2

        def clone(self) -> StatusV3:
            copy = StatusV3()
            copy.pads, copy.widths = list(self.pads), list(self.widths)
            return copy

    class StatusV3Creator(creator_cls):  # type: ignore[misc, valid-type]
        def create_plugin(self, name_: str, fc: trt.PluginFieldCollection, phase: trt.TensorRTPhase) -> StatusV3:
            return StatusV3(fc)

    creator = registry(StatusV3Creator())
    plugin = creator.create_plugin("s", fields(pads=[1, 1]), trt.TensorRTPhase.BUILD)
    context = _engine(plugin, layer="status3").create_execution_context()
    with pytest.raises(trt.ExecutionError, match=rf"layer 'status3', plugin {name} v1, enqueue\(\) returned 2"):
        run(context, {"x": np.ones((2, 4), np.float32)})
