"""Gaps 1-3: what TensorRT's binding accepts from V2 serialize() and V3 capability annotations."""

import json

import numpy as np
import pytest
from compat_helpers import LOGGER, build_plan, deserialize, infer

import plugrt as trt


class JsonScale(trt.IPluginV2DynamicExt):
    """y = x * scale; serialize() returns json.dumps(...) (a str), as TensorRT's Python samples do."""

    serialized: object = None  # what serialize() returns, set per test
    size: object = None  # what get_serialization_size() returns; None: the class does not define it

    def __init__(self, scale: float = 1.0) -> None:
        trt.IPluginV2DynamicExt.__init__(self)
        self.num_outputs = 1
        self.plugin_type = "CompatJsonScale"
        self.plugin_version = "1"
        self.plugin_namespace = ""
        self.scale = scale

    def get_output_datatype(self, index, input_types):
        return input_types[0]

    def get_output_dimensions(self, output_index, inputs, exprBuilder):
        return trt.DimsExprs(inputs[0])

    def supports_format_combination(self, pos, in_out, num_inputs):
        return in_out[pos].type == trt.float32 and in_out[pos].format == trt.TensorFormat.LINEAR

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        x = trt.as_array(inputs[0], input_desc[0])
        trt.as_array(outputs[0], output_desc[0])[...] = x * self.scale

    def serialize(self):
        return json.dumps({"scale": self.scale}) if self.serialized is None else self.serialized

    def clone(self):
        copy = type(self)(self.scale)
        copy.__dict__.update(self.__dict__)
        return copy


class SizedJsonScale(JsonScale):
    """Defines get_serialization_size(), as the cookbook's V2 sample does."""

    def get_serialization_size(self):
        return len(json.dumps({"scale": self.scale})) if self.size is None else self.size


class JsonScaleCreator(trt.IPluginCreator):
    def __init__(self, plugin_class: type = JsonScale) -> None:
        trt.IPluginCreator.__init__(self)
        self.name = "CompatJsonScale"
        self.plugin_version = "1"
        self.plugin_namespace = ""
        self.field_names = trt.PluginFieldCollection([trt.PluginField("scale", np.array([]), trt.PluginFieldType.FLOAT32)])
        self.plugin_class = plugin_class
        self.received: list[bytes] = []

    def create_plugin(self, name, fc):
        scale = 1.0
        for f in fc:
            if f.name == "scale":
                scale = float(f.data[0])
        return self.plugin_class(scale)

    def deserialize_plugin(self, name, data):
        self.received.append(data)
        plugin = self.plugin_class()
        plugin.__dict__.update(dict(json.loads(data)))
        return plugin


@pytest.fixture
def registered():  # type: ignore[no-untyped-def]
    creators: list[JsonScaleCreator] = []

    def register(plugin_class: type) -> JsonScaleCreator:
        creator = JsonScaleCreator(plugin_class)
        trt.get_plugin_registry().register_creator(creator, "")
        creators.append(creator)
        return creator

    yield register
    for creator in creators:
        trt.get_plugin_registry().deregister_creator(creator)


def _network(plugin: trt.IPluginV2DynamicExt) -> tuple[trt.Builder, trt.INetworkDefinition]:
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (2, 3))
    layer = network.add_plugin_v2([x], plugin)
    layer.get_output(0).name = "y"
    network.mark_output(layer.get_output(0))
    return builder, network


@pytest.mark.parametrize("kind", ["str", "bytes", "bytearray", "memoryview", "ndarray"])
def test_serialize_may_return_str_or_bytes_like(registered, kind: str) -> None:  # type: ignore[no-untyped-def]
    """Gap 1: TensorRT's binding turns a str (as UTF-8) or anything bytes-like into the plan's bytes."""
    creator = registered(JsonScale)
    text = json.dumps({"scale": 2.5, "note": "é"})
    value = {
        "str": text,
        "bytes": text.encode(),
        "bytearray": bytearray(text.encode()),
        "memoryview": memoryview(text.encode()),
        "ndarray": np.frombuffer(text.encode(), dtype=np.uint8),
    }[kind]
    plugin = creator.create_plugin("p", trt.PluginFieldCollection())
    JsonScale.serialized = value
    try:
        builder, network = _network(plugin)
        plan = build_plan(builder, network)
    finally:
        JsonScale.serialized = None
    engine = deserialize(plan)
    assert creator.received == [text.encode("utf-8")]
    assert isinstance(creator.received[0], bytes)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(infer(engine.create_execution_context(), {"x": x})["y"], x * 2.5)


def test_serialize_returning_something_else_names_the_type(registered) -> None:  # type: ignore[no-untyped-def]
    creator = registered(JsonScale)
    JsonScale.serialized = {"scale": 1.0}
    try:
        builder, network = _network(creator.create_plugin("p", trt.PluginFieldCollection()))
        with pytest.raises(trt.SerializationError, match=r"serialize\(\) returned dict; expected bytes"):
            build_plan(builder, network)
    finally:
        JsonScale.serialized = None


def test_user_get_serialization_size_is_called_before_serialize(registered) -> None:  # type: ignore[no-untyped-def]
    """Gap 2: TensorRT asks get_serialization_size() (when the plugin defines it), then serialize()."""
    creator = registered(SizedJsonScale)
    calls: list[str] = []

    class Traced(SizedJsonScale):
        def get_serialization_size(self):
            calls.append("get_serialization_size")
            return super().get_serialization_size()

        def serialize(self):
            calls.append("serialize")
            return super().serialize()

    builder, network = _network(Traced(3.0))
    with trt.trace_plugin_calls() as trace:
        build_plan(builder, network)
    assert calls == ["get_serialization_size", "serialize"]
    serialize_phase = trace.methods(phase="serialize")
    assert serialize_phase == ["get_serialization_size", "serialize"]
    assert creator.received == []  # nothing deserialized yet


@pytest.mark.parametrize("size", [5, 1000])
def test_size_that_differs_from_the_bytes_fails_the_build_naming_both(registered, size: int) -> None:  # type: ignore[no-untyped-def]
    registered(SizedJsonScale)
    plugin = SizedJsonScale(1.5)
    written = len(json.dumps({"scale": 1.5}))
    SizedJsonScale.size = size
    try:
        builder, network = _network(plugin)
        with pytest.raises(trt.BuildError, match=rf"wrote {written} bytes but get_serialization_size\(\) says {size}"):
            build_plan(builder, network)
    finally:
        SizedJsonScale.size = None


@pytest.mark.parametrize("size", [-1, "12", 2.0, True])
def test_get_serialization_size_must_return_a_non_negative_int(registered, size: object) -> None:  # type: ignore[no-untyped-def]
    registered(SizedJsonScale)
    SizedJsonScale.size = size
    try:
        builder, network = _network(SizedJsonScale(1.0))
        with pytest.raises(trt.PluginError, match=r"get_serialization_size\(\) returned .*expected a non-negative int"):
            build_plan(builder, network)
    finally:
        SizedJsonScale.size = None


def test_serialization_size_attribute_asks_the_plugin_as_tensorrt_does() -> None:
    plain, sized = JsonScale(2.0), SizedJsonScale(2.0)
    assert plain.serialization_size == len(json.dumps({"scale": 2.0}))
    SizedJsonScale.size = 3
    try:
        assert sized.serialization_size == 3
    finally:
        SizedJsonScale.size = None


def test_capability_annotations_evaluate_at_class_definition() -> None:
    """Gap 3: samples annotate ``-> trt.IPluginCapability``; the V3 capability classes derive from it."""

    class Annotated(trt.IPluginV3, trt.IPluginV3OneCore, trt.IPluginV3OneBuild, trt.IPluginV3OneRuntime):
        def get_capability_interface(self, plugin_capability_type: trt.PluginCapabilityType) -> trt.IPluginCapability:
            return self

    assert Annotated.get_capability_interface.__annotations__["return"] is trt.IPluginCapability
    for cls in (trt.IPluginV3OneCore, trt.IPluginV3OneBuild, trt.IPluginV3OneBuildV2, trt.IPluginV3OneRuntime):
        assert issubclass(cls, trt.IPluginCapability)
    plugin = Annotated()
    for kind in trt.PluginCapabilityType:
        assert isinstance(plugin.get_capability_interface(kind), trt.IPluginCapability)
    assert not issubclass(trt.IPluginV3, trt.IPluginCapability)
