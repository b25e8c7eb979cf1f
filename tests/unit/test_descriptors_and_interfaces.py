"""Tests for tensor descriptors and the plugin/creator base classes (descriptors, v2, v3, creator, hooks)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import plugrt as trt
from plugrt.core.dims import Dims
from plugrt.core.errors import MissingHookError, PluginError
from plugrt.core.types import DataType, TensorFormat
from plugrt.interfaces.creator import IPluginCreator, IPluginCreatorInterface, IPluginCreatorV3One
from plugrt.interfaces.descriptors import DynamicPluginTensorDesc, PluginTensorDesc
from plugrt.interfaces.fields import PluginField, PluginFieldCollection
from plugrt.interfaces.hooks import is_overridden, missing_hook
from plugrt.interfaces.v2 import IPluginV2, IPluginV2DynamicExt, IPluginV2Ext
from plugrt.interfaces.v3 import (
    IPluginResourceContext,
    IPluginV3,
    IPluginV3OneBuild,
    IPluginV3OneCore,
    IPluginV3OneRuntime,
    PluginCapabilityType,
    TensorRTPhase,
)
from plugrt.shape import DimsExprs, IExprBuilder


def missing(hook: str, interface: str, cls: str) -> str:
    """The regex of the MissingHookError message for ``cls`` lacking ``interface.hook``."""
    return rf"^{cls} does not implement {interface}\.{hook}\(\), which is required; define {hook} on {cls}$"


# ---------------------------------------------------------------------------
# Descriptors
# ---------------------------------------------------------------------------


def test_plugin_tensor_desc_defaults() -> None:
    desc = PluginTensorDesc()
    assert desc.dims == Dims() and len(desc.dims) == 0
    assert desc.type is DataType.FLOAT
    assert desc.format is TensorFormat.LINEAR
    assert desc.scale == 1.0
    assert trt.PluginTensorDesc is PluginTensorDesc


def test_plugin_tensor_desc_fields_and_equality() -> None:
    a = PluginTensorDesc(Dims((1, 3, 8, 8)), DataType.HALF, TensorFormat.CHW4, 0.5)
    b = PluginTensorDesc(dims=Dims((1, 3, 8, 8)), type=DataType.HALF, format=TensorFormat.CHW4, scale=0.5)
    assert a == b
    assert a != PluginTensorDesc(Dims((1, 3, 8, 8)), DataType.HALF, TensorFormat.LINEAR, 0.5)
    assert hash(a) == hash(b)
    assert dataclasses.replace(a, type=DataType.FLOAT).type is DataType.FLOAT
    assert a.type is DataType.HALF


def test_default_dims_are_not_shared() -> None:
    assert PluginTensorDesc().dims is not PluginTensorDesc().dims
    assert DynamicPluginTensorDesc().min is not DynamicPluginTensorDesc().min
    assert DynamicPluginTensorDesc().desc is not DynamicPluginTensorDesc().desc


@pytest.mark.parametrize(
    ("field", "value"), [("dims", Dims((2,))), ("type", DataType.INT8), ("format", TensorFormat.HWC8), ("scale", 2.0)]
)
def test_plugin_tensor_desc_is_frozen(field: str, value: object) -> None:
    desc = PluginTensorDesc()
    with pytest.raises(dataclasses.FrozenInstanceError, match=f"cannot assign to field '{field}'"):
        setattr(desc, field, value)
    with pytest.raises(dataclasses.FrozenInstanceError, match=f"cannot delete field '{field}'"):
        delattr(desc, field)
    assert desc == PluginTensorDesc()


def test_plugin_tensor_desc_rejects_new_attributes() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'extra'"):
        PluginTensorDesc().extra = 1  # type: ignore[attr-defined]


def test_dynamic_plugin_tensor_desc_defaults() -> None:
    desc = DynamicPluginTensorDesc()
    assert desc.desc == PluginTensorDesc()
    assert desc.min == () and desc.opt == () and desc.max == ()
    assert trt.DynamicPluginTensorDesc is DynamicPluginTensorDesc


def test_dynamic_plugin_tensor_desc_fields() -> None:
    inner = PluginTensorDesc(Dims((-1, 4)), DataType.INT32)
    desc = DynamicPluginTensorDesc(inner, min=Dims((1, 4)), max=Dims((8, 4)), opt=Dims((4, 4)))
    assert desc.desc is inner
    assert (desc.min, desc.opt, desc.max) == ((1, 4), (4, 4), (8, 4))
    assert [f.name for f in dataclasses.fields(desc)] == ["desc", "min", "max", "opt"]


@pytest.mark.parametrize("field", ["desc", "min", "max", "opt"])
def test_dynamic_plugin_tensor_desc_is_frozen(field: str) -> None:
    desc = DynamicPluginTensorDesc()
    with pytest.raises(dataclasses.FrozenInstanceError, match=f"cannot assign to field '{field}'"):
        setattr(desc, field, Dims((1,)))


# ---------------------------------------------------------------------------
# hooks helpers
# ---------------------------------------------------------------------------


def test_missing_hook_message() -> None:
    class Thing:
        pass

    with pytest.raises(MissingHookError, match=missing("frob", "IThing", "Thing")):
        missing_hook(Thing(), "frob", "IThing")


def test_missing_hook_error_hierarchy() -> None:
    assert issubclass(MissingHookError, PluginError)
    assert issubclass(MissingHookError, NotImplementedError)


def test_is_overridden() -> None:
    class Plain(IPluginV2):
        pass

    class Custom(IPluginV2):
        def initialize(self) -> int:
            return 0

    assert not is_overridden(Plain(), "initialize", IPluginV2)
    assert is_overridden(Custom(), "initialize", IPluginV2)


# ---------------------------------------------------------------------------
# IPluginV2 family: required hooks
# ---------------------------------------------------------------------------


class BareV2(IPluginV2):
    pass


class BareV2Ext(IPluginV2Ext):
    pass


class BareDynamic(IPluginV2DynamicExt):
    pass


@pytest.mark.parametrize(
    ("hook", "interface", "args"),
    [
        ("get_output_shape", "IPluginV2", (0, [Dims((3,))])),
        ("execute_async", "IPluginV2", (1, [0], [0], 0, 0)),
        ("clone", "IPluginV2", ()),
    ],
)
@pytest.mark.parametrize("cls", [BareV2, BareV2Ext])
def test_v2_missing_required_hooks(cls: type, hook: str, interface: str, args: tuple[Any, ...]) -> None:
    with pytest.raises(MissingHookError, match=missing(hook, interface, cls.__name__)):
        getattr(cls(), hook)(*args)


@pytest.mark.parametrize(
    ("hook", "interface", "args"),
    [
        ("enqueue", "IPluginV2DynamicExt", ([], [], [], [], 0, 0)),
        ("get_output_dimensions", "IPluginV2DynamicExt", (0, [DimsExprs(1)], IExprBuilder())),
        ("supports_format_combination", "IPluginV2DynamicExt", (0, [PluginTensorDesc()], 1)),
        ("clone", "IPluginV2", ()),
    ],
)
def test_dynamic_ext_missing_required_hooks(hook: str, interface: str, args: tuple[Any, ...]) -> None:
    with pytest.raises(MissingHookError, match=missing(hook, interface, "BareDynamic")):
        getattr(BareDynamic(), hook)(*args)


def test_missing_hook_names_the_most_derived_class() -> None:
    class Intermediate(IPluginV2DynamicExt):
        def enqueue(self, *args: Any) -> int:
            return 0

    class Leaf(Intermediate):
        pass

    with pytest.raises(MissingHookError, match=missing("get_output_dimensions", "IPluginV2DynamicExt", "Leaf")):
        Leaf().get_output_dimensions(0, [], IExprBuilder())
    assert Leaf().enqueue() == 0


def test_implemented_hooks_do_not_raise() -> None:
    class Complete(IPluginV2DynamicExt):
        def get_output_dimensions(self, output_index: int, inputs: Any, exprBuilder: Any) -> Any:
            return inputs[0]

        def supports_format_combination(self, pos: int, in_out: Any, num_inputs: int) -> bool:
            return True

        def enqueue(self, *args: Any) -> int:
            return 0

        def clone(self) -> Complete:
            return Complete()

    plugin = Complete()
    dims = DimsExprs([trt.IExprBuilder().constant(3)])
    assert plugin.get_output_dimensions(0, [dims], IExprBuilder()) is dims
    assert plugin.supports_format_combination(0, [], 1)
    assert plugin.enqueue() == 0
    assert isinstance(plugin.clone(), Complete)


# ---------------------------------------------------------------------------
# IPluginV2 family: defaults
# ---------------------------------------------------------------------------


def test_v2_class_attribute_defaults() -> None:
    plugin = BareV2()
    assert plugin.num_outputs == 1
    assert plugin.plugin_type == ""
    assert plugin.plugin_version == "1"
    assert plugin.plugin_namespace == ""
    assert plugin.tensorrt_version == 100000


def test_v2_default_hooks() -> None:
    plugin = BareV2()
    assert plugin.initialize() == 0
    assert plugin.terminate() is None
    assert plugin.get_workspace_size(32) == 0
    assert plugin.serialize() == b""
    assert plugin.serialization_size == 0
    assert plugin.destroy() is None
    assert plugin.configure_with_format([Dims((3,))], [Dims((3,))], DataType.FLOAT, TensorFormat.LINEAR, 1) is None


@pytest.mark.parametrize("dtype", list(DataType))
@pytest.mark.parametrize("fmt", [TensorFormat.LINEAR, TensorFormat.CHW4, TensorFormat.HWC8])
def test_v2_default_supports_format_is_float_linear(dtype: DataType, fmt: TensorFormat) -> None:
    expected = dtype is DataType.FLOAT and fmt is TensorFormat.LINEAR
    assert BareV2().supports_format(dtype, fmt) is expected


def test_serialization_size_defaults_to_len_serialize() -> None:
    class Stateful(IPluginV2DynamicExt):
        def __init__(self, payload: bytes) -> None:
            super().__init__()
            self.payload = payload

        def serialize(self) -> bytes:
            return self.payload

    plugin = Stateful(b"12345")
    assert plugin.serialization_size == 5 == len(plugin.serialize())
    plugin.payload = b"1234567890"
    assert plugin.serialization_size == 10  # recomputed from serialize() on each access


def test_serialization_size_can_be_overridden_by_assignment() -> None:
    a, b = BareV2(), BareV2()
    a.serialization_size = 42
    assert a.serialization_size == 42
    assert b.serialization_size == 0  # per instance
    a.serialization_size = "7"  # type: ignore[assignment]
    assert a.serialization_size == 7


def test_serialization_size_can_be_overridden_in_a_subclass() -> None:
    class Fixed(IPluginV2):
        @property
        def serialization_size(self) -> int:  # type: ignore[override]
            return 12

    assert Fixed().serialization_size == 12


def test_v2_ext_output_data_type_defaults_to_first_input() -> None:
    plugin = BareV2Ext()
    assert plugin.get_output_data_type(0, [DataType.HALF, DataType.INT32]) is DataType.HALF
    assert plugin.get_output_data_type(1, [DataType.INT8]) is DataType.INT8
    assert plugin.get_output_data_type(0, []) is DataType.FLOAT


def test_dynamic_output_datatype_aliases_get_output_data_type() -> None:
    assert BareDynamic().get_output_datatype(0, [DataType.BF16]) is DataType.BF16

    class Custom(IPluginV2DynamicExt):
        def get_output_data_type(self, index: int, input_types: list[DataType]) -> DataType:
            return DataType.INT64

    assert Custom().get_output_datatype(0, [DataType.FLOAT]) is DataType.INT64


def test_v2_ext_configure_plugin_forwards_to_configure_with_format() -> None:
    calls: list[tuple[Any, ...]] = []

    class Recorder(IPluginV2Ext):
        def configure_with_format(self, *args: Any) -> None:
            calls.append(args)

    plugin = Recorder()
    shapes_in, shapes_out = [Dims((3, 4))], [Dims((12,))]
    plugin.configure_plugin(
        shapes_in, shapes_out, [DataType.HALF], [DataType.FLOAT], [False], [False], TensorFormat.LINEAR, 8
    )
    plugin.configure_plugin([], shapes_out, [], [DataType.INT32], [], [False], TensorFormat.CHW4, 2)
    plugin.configure_plugin([], [], [], [], [], [], TensorFormat.LINEAR, 1)
    assert calls == [
        (shapes_in, shapes_out, DataType.HALF, TensorFormat.LINEAR, 8),
        ([], shapes_out, DataType.INT32, TensorFormat.CHW4, 2),
        ([], [], DataType.FLOAT, TensorFormat.LINEAR, 1),
    ]


def test_v2_ext_context_hooks_are_no_ops() -> None:
    plugin = BareV2Ext()
    assert plugin.attach_to_context(object()) is None
    assert plugin.detach_from_context() is None


def test_dynamic_defaults() -> None:
    plugin = BareDynamic()
    descs = [PluginTensorDesc(Dims((2, 3)))]
    assert plugin.get_workspace_size(descs, descs) == 0
    assert plugin.configure_plugin([DynamicPluginTensorDesc()], [DynamicPluginTensorDesc()]) is None
    assert plugin.initialize() == 0
    assert plugin.serialization_size == 0
    assert isinstance(plugin, IPluginV2Ext) and isinstance(plugin, IPluginV2)


def test_v2_exports() -> None:
    assert trt.IPluginV2 is IPluginV2
    assert trt.IPluginV2Ext is IPluginV2Ext
    assert trt.IPluginV2DynamicExt is IPluginV2DynamicExt


# ---------------------------------------------------------------------------
# IPluginV3 family
# ---------------------------------------------------------------------------


def test_v3_enum_values_match_tensorrt() -> None:
    assert {m.name: int(m) for m in PluginCapabilityType} == {"CORE": 0, "BUILD": 1, "RUNTIME": 2}
    assert {m.name: int(m) for m in TensorRTPhase} == {"BUILD": 0, "RUNTIME": 1}
    assert trt.PluginCapabilityType is PluginCapabilityType
    assert trt.TensorRTPhase is TensorRTPhase


class BareBuild(IPluginV3OneBuild):
    pass


class BareRuntime(IPluginV3OneRuntime):
    pass


class BareV3(IPluginV3, IPluginV3OneCore, IPluginV3OneBuild, IPluginV3OneRuntime):
    pass


@pytest.mark.parametrize(
    ("hook", "args"),
    [
        ("get_output_shapes", ([DimsExprs(1)], [], IExprBuilder())),
        ("get_output_data_types", ([DataType.FLOAT],)),
        ("supports_format_combination", (0, [DynamicPluginTensorDesc()], 1)),
    ],
)
@pytest.mark.parametrize("cls", [BareBuild, BareV3])
def test_v3_build_missing_required_hooks(cls: type, hook: str, args: tuple[Any, ...]) -> None:
    with pytest.raises(MissingHookError, match=missing(hook, "IPluginV3OneBuild", cls.__name__)):
        getattr(cls(), hook)(*args)


@pytest.mark.parametrize(
    ("hook", "args"),
    [("enqueue", ([], [], [], [], 0, 0)), ("get_fields_to_serialize", ())],
)
@pytest.mark.parametrize("cls", [BareRuntime, BareV3])
def test_v3_runtime_missing_required_hooks(cls: type, hook: str, args: tuple[Any, ...]) -> None:
    with pytest.raises(MissingHookError, match=missing(hook, "IPluginV3OneRuntime", cls.__name__)):
        getattr(cls(), hook)(*args)


def test_v3_missing_clone() -> None:
    with pytest.raises(MissingHookError, match=missing("clone", "IPluginV3", "BareV3")):
        BareV3().clone()


def test_v3_attach_to_context_defaults_to_clone() -> None:
    class Clonable(IPluginV3, IPluginV3OneRuntime):
        def clone(self) -> Clonable:
            copy = Clonable()
            copy.origin = self  # type: ignore[attr-defined]
            return copy

    plugin = Clonable()
    attached = plugin.attach_to_context(IPluginResourceContext("cpu"))
    assert isinstance(attached, Clonable)
    assert attached is not plugin
    assert attached.origin is plugin


def test_v3_attach_to_context_without_clone_raises() -> None:
    with pytest.raises(MissingHookError, match=missing("clone", "IPluginV3", "BareRuntime")):
        BareRuntime().attach_to_context(IPluginResourceContext("cpu"))
    with pytest.raises(MissingHookError, match=missing("clone", "IPluginV3", "BareV3")):
        BareV3().attach_to_context(IPluginResourceContext("cpu"))


def test_v3_build_defaults() -> None:
    plugin = BareBuild()
    assert plugin.num_outputs == 1
    assert plugin.format_combination_limit == 100
    assert plugin.metadata_string == ""
    assert plugin.timing_cache_id is None  # unset: TensorRT times every instance
    assert plugin.get_workspace_size([DynamicPluginTensorDesc()], []) == 0
    assert plugin.get_valid_tactics() == []
    assert plugin.configure_plugin([], []) is None


def test_v3_runtime_and_core_defaults() -> None:
    runtime = BareRuntime()
    assert runtime.set_tactic(3) is None
    assert runtime.on_shape_change([PluginTensorDesc()], []) is None
    core = IPluginV3OneCore()
    assert (core.plugin_name, core.plugin_version, core.plugin_namespace) == ("", "1", "")


def test_resource_context() -> None:
    ctx = IPluginResourceContext("cuda", allocator="alloc")
    assert (ctx.backend, ctx.allocator) == ("cuda", "alloc")
    assert IPluginResourceContext("cpu").allocator is None
    assert trt.IPluginResourceContext is IPluginResourceContext


@pytest.mark.parametrize(
    ("bases", "expected"),
    [
        ((IPluginV3, IPluginV3OneCore, IPluginV3OneBuild, IPluginV3OneRuntime), {0, 1, 2}),
        ((IPluginV3, IPluginV3OneCore), {0}),
        ((IPluginV3, IPluginV3OneCore, IPluginV3OneBuild), {0, 1}),
        ((IPluginV3, IPluginV3OneCore, IPluginV3OneRuntime), {0, 2}),
        ((IPluginV3, IPluginV3OneBuild), {1}),
        ((IPluginV3,), set()),
    ],
)
def test_get_capability_interface(bases: tuple[type, ...], expected: set[int]) -> None:
    cls = type("Plugin", bases, {})
    plugin = cls()
    for capability in PluginCapabilityType:
        result = plugin.get_capability_interface(capability)
        if int(capability) in expected:
            assert result is plugin, capability
        else:
            assert result is None, capability
        assert plugin.get_capability_interface(int(capability)) is result


def test_get_capability_interface_through_indirect_inheritance() -> None:
    class MyBuild(IPluginV3OneBuild):
        pass

    class Plugin(IPluginV3, IPluginV3OneCore, MyBuild):
        pass

    plugin = Plugin()
    assert plugin.get_capability_interface(PluginCapabilityType.BUILD) is plugin
    assert plugin.get_capability_interface(PluginCapabilityType.RUNTIME) is None


def test_get_capability_interface_can_be_overridden() -> None:
    runtime_part = BareRuntime()

    class Split(IPluginV3, IPluginV3OneCore):
        def get_capability_interface(self, type: PluginCapabilityType) -> Any:
            if type == PluginCapabilityType.RUNTIME:
                return runtime_part
            return super().get_capability_interface(type)

    plugin = Split()
    assert plugin.get_capability_interface(PluginCapabilityType.RUNTIME) is runtime_part
    assert plugin.get_capability_interface(PluginCapabilityType.CORE) is plugin


def test_get_capability_interface_rejects_unknown_capability() -> None:
    with pytest.raises(ValueError, match="3 is not a valid PluginCapabilityType"):
        BareV3().get_capability_interface(3)  # type: ignore[arg-type]


def test_v3_exports() -> None:
    assert trt.IPluginV3 is IPluginV3
    assert trt.IPluginV3OneCore is IPluginV3OneCore
    assert trt.IPluginV3OneBuild is IPluginV3OneBuild
    assert trt.IPluginV3OneRuntime is IPluginV3OneRuntime


# ---------------------------------------------------------------------------
# Creators
# ---------------------------------------------------------------------------


class BareCreator(IPluginCreator):
    pass


class BareCreatorV3(IPluginCreatorV3One):
    pass


def test_creator_missing_create_plugin() -> None:
    with pytest.raises(MissingHookError, match=missing("create_plugin", "IPluginCreator", "BareCreator")):
        BareCreator().create_plugin("p", PluginFieldCollection())


def test_creator_missing_deserialize_plugin() -> None:
    with pytest.raises(MissingHookError, match=missing("deserialize_plugin", "IPluginCreator", "BareCreator")):
        BareCreator().deserialize_plugin("p", b"")


def test_v3_creator_missing_create_plugin() -> None:
    with pytest.raises(MissingHookError, match=missing("create_plugin", "IPluginCreatorV3One", "BareCreatorV3")):
        BareCreatorV3().create_plugin("p", PluginFieldCollection(), TensorRTPhase.BUILD)


def test_creator_attribute_defaults() -> None:
    for creator in (BareCreator(), BareCreatorV3()):
        assert isinstance(creator, IPluginCreatorInterface)
        assert creator.name == ""
        assert creator.plugin_version == "1"
        assert creator.plugin_namespace == ""
        assert isinstance(creator.field_names, PluginFieldCollection)
        assert len(creator.field_names) == 0


def test_creator_with_assigned_field_names() -> None:
    class Creator(IPluginCreator):
        def __init__(self) -> None:
            super().__init__()
            self.name = "Clip"
            self.field_names = PluginFieldCollection([PluginField("min"), PluginField("max")])

        def create_plugin(self, name: str, field_collection: PluginFieldCollection) -> Any:
            return (name, field_collection.names())

    creator = Creator()
    assert creator.field_names.names() == ["min", "max"]
    fc = PluginFieldCollection([PluginField("min", [0.0], trt.PluginFieldType.FLOAT32)])
    assert creator.create_plugin("clip", fc) == ("clip", ["min"])


def test_default_field_names_are_not_shared_between_creators() -> None:
    class A(IPluginCreator):
        pass

    class B(IPluginCreatorV3One):
        pass

    a = A()
    a.field_names.append(PluginField("alpha"))
    try:
        assert len(B().field_names) == 0
        assert len(IPluginCreator().field_names) == 0
    finally:
        a.field_names._items.clear()  # undo the shared mutation for the other tests


def test_creator_exports() -> None:
    assert trt.IPluginCreator is IPluginCreator
    assert trt.IPluginCreatorV3One is IPluginCreatorV3One
    assert trt.IPluginCreatorInterface is IPluginCreatorInterface


def test_descriptor_dims_are_read_only_copies() -> None:
    import plugrt as trt

    source = trt.Dims((2, 3))
    desc = trt.PluginTensorDesc(source, trt.float32)
    source[0] = 7  # the descriptor kept its own copy
    assert desc.dims == (2, 3)
    with pytest.raises(trt.ShapeError, match=r"read-only .* copy them with Dims\(desc.dims\)"):
        desc.dims[0] = 5
    dynamic = trt.DynamicPluginTensorDesc(desc, trt.Dims((1, 3)), trt.Dims((4, 3)), trt.Dims((2, 3)))
    with pytest.raises(trt.ShapeError, match="read-only"):
        dynamic.max[0] = 9
    mutable = trt.Dims(desc.dims)
    mutable[0] = 5
    assert mutable == (5, 3)
