"""The plugin fallback: ONNX nodes without a built-in importer run as registered V2 and V3 plugins."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx_helpers import Collect, errors, model, onnxruntime_outputs, parse, tensor_info

import plugrt as trt
from plugrt.examples import circ_pad_v2, circ_pad_v3, nonzero_v3
from plugrt.onnx import ErrorCode
from plugrt.onnx.compile import compile as compile_model

from testing_plugins import ensure_registered, run

F = TensorProto.FLOAT


@pytest.fixture(autouse=True)
def _registered() -> None:
    circ_pad_v2.register()
    circ_pad_v3.register()


def _pad_reference(x: np.ndarray) -> np.ndarray:
    hidden = np.pad(np.maximum(x, 0), [(0, 0), (0, 0), (1, 2)], mode="wrap")
    return np.pad(hidden, [(0, 0), (2, 0), (0, 1)], mode="wrap") * np.float32(2.0)


def _pad_model(**v2_attrs: Any) -> onnx.ModelProto:
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("CircPadPlugin", ["r"], ["p"], name="pad_v2", domain="custom", pads=[1, 2], **v2_attrs),
        helper.make_node("CircPadPluginV3", ["p"], ["q"], name="pad_v3", domain="custom", pads=[0, 1, 2, 0]),
        helper.make_node("Mul", ["q", "two"], ["y"]),
    ]
    return model(
        nodes,
        [tensor_info("x", F, ["n", 3, "w"])],
        [tensor_info("y", F, ["n", 5, "w2"])],
        {"two": np.float32([2.0])},
        extra_opsets=[("custom", 1)],
    )


def test_v2_and_v3_plugins_import_build_serialize_reload_and_run() -> None:
    logger = Collect()
    ok, parser, network = parse(_pad_model(), logger)
    assert ok, errors(parser)
    kinds = [type(network.get_layer(i)).__name__ for i in range(network.num_layers)]
    assert "IPluginV2Layer" in kinds and "IPluginV3Layer" in kinds
    builder = trt.Builder(logger)
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    profile.set_shape("x", (1, 3, 1), (2, 3, 4), (4, 3, 9))
    config.add_optimization_profile(profile)
    plan = bytes(builder.build_serialized_network(network, config))
    engine = trt.Runtime(logger).deserialize_cuda_engine(plan)
    reloaded = trt.Runtime(logger).deserialize_cuda_engine(bytes(engine.serialize()))
    assert tuple(reloaded.get_tensor_shape("y")) == (-1, 5, -1)
    context = reloaded.create_execution_context()
    for shape in [(1, 3, 1), (4, 3, 9), (2, 3, 4)]:
        x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(run(context, {"x": x})["y"], _pad_reference(x), rtol=1e-6)


def test_standard_parts_match_onnxruntime_around_a_plugin() -> None:
    # onnxruntime runs the model with the plugin node replaced by the same padding written in ONNX (Pad wrap).
    x = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)
    standard = model(
        [
            helper.make_node("Relu", ["x"], ["r"]),
            helper.make_node("Pad", ["r", "pads"], ["p"], mode="wrap"),
            helper.make_node("Mul", ["p", "two"], ["y"]),
        ],
        [tensor_info("x", F, [2, 3, 4])],
        [tensor_info("y", F, [2, 3, 7])],
        {"two": np.float32([2.0]), "pads": np.int64([0, 0, 1, 0, 0, 2])},
        opset=19,
    )
    expected = onnxruntime_outputs(standard, {"x": x})[0]
    with_plugin = model(
        [
            helper.make_node("Relu", ["x"], ["r"]),
            helper.make_node("CircPadPlugin", ["r"], ["p"], pads=[1, 2]),
            helper.make_node("Mul", ["p", "two"], ["y"]),
        ],
        [tensor_info("x", F, [2, 3, 4])],
        [tensor_info("y", F, [2, 3, 7])],
        {"two": np.float32([2.0])},
    )
    np.testing.assert_allclose(compile_model(with_plugin)({"x": x})["y"], expected, rtol=1e-6)


def test_compile_runs_a_plugin_model() -> None:
    compiled = compile_model(_pad_model(), shapes={"x": ((1, 3, 2), (2, 3, 4), (3, 3, 6))})
    x = np.random.default_rng(5).standard_normal((3, 3, 6)).astype(np.float32)
    np.testing.assert_allclose(compiled(x=x)["y"], _pad_reference(x), rtol=1e-6)


def test_unknown_attribute_and_unset_field_are_warnings() -> None:
    logger = Collect()
    ok, parser, _ = parse(_pad_model(border="wrap"), logger)
    assert ok, errors(parser)
    warnings = "\n".join(logger.at(trt.Severity.WARNING))
    assert "attribute 'border' is not a field of creator CircPadPluginCreator" in warnings
    assert "it is dropped" in warnings and "pad_v2" in warnings
    unset = model(
        [helper.make_node("CircPadPlugin", ["x"], ["y"], name="bare")],
        [tensor_info("x", F, [1, 2])],
        [tensor_info("y", F, [1, 2])],
    )
    logger = Collect()
    ok, parser, _ = parse(unset, logger)
    assert ok, errors(parser)
    assert any("lists field 'pads' but the node does not set it" in m for m in logger.at(trt.Severity.WARNING))


@pytest.mark.parametrize(
    ("attrs", "needle"),
    [
        ({}, "CircPadPlugin"),  # misspelled op type below: the error names the close match
        ({"plugin_version": "2"}, "'CircPadPlugin' version '1' namespace ''"),
        ({"plugin_namespace": "vendor"}, "'CircPadPlugin' version '1' namespace ''"),
    ],
    ids=["misspelled", "wrong_version", "wrong_namespace"],
)
def test_missing_creator_errors_name_what_is_registered(attrs: dict, needle: str) -> None:
    op = "CircPadPlugn" if not attrs else "CircPadPlugin"
    proto = model(
        [helper.make_node(op, ["x"], ["y"], name="pad", pads=[1, 1], **attrs)],
        [tensor_info("x", F, [1, 2])],
        [tensor_info("y", F, [1, 4])],
    )
    ok, parser, _ = parse(proto)
    assert not ok
    error = parser.get_error(0)
    assert error.code() == ErrorCode.UNSUPPORTED_NODE and error.node_name() == "pad"
    assert "no plugin creator for" in error.desc() and needle in error.desc()


class _FieldProbe(trt.IPluginV2DynamicExt):
    """Identity plugin that remembers the fields it was created with."""

    def __init__(self, fields: trt.PluginFieldCollection | None = None) -> None:
        trt.IPluginV2DynamicExt.__init__(self)
        self.num_outputs = 1
        self.plugin_type, self.plugin_version, self.plugin_namespace = "FieldProbe", "1", ""
        self.fields = {f.name: (f.type, f.data.copy()) for f in (fields or [])}

    def get_output_datatype(self, index: int, input_types: list[trt.DataType]) -> trt.DataType:
        return input_types[0]

    def get_output_dimensions(
        self, index: int, inputs: list[trt.DimsExprs], builder: trt.IExprBuilder
    ) -> trt.DimsExprs:
        return trt.DimsExprs(inputs[0])

    def supports_format_combination(self, pos: int, in_out: list[trt.PluginTensorDesc], num_inputs: int) -> bool:
        return in_out[pos].type == trt.float32 and in_out[pos].format == trt.TensorFormat.LINEAR

    def enqueue(self, input_desc: Any, output_desc: Any, inputs: Any, outputs: Any, workspace: int, stream: int) -> int:
        trt.as_array(outputs[0], output_desc[0])[...] = trt.as_array(inputs[0], input_desc[0])
        return 0

    def serialize(self) -> bytes:
        return b""

    def clone(self) -> _FieldProbe:
        copy = _FieldProbe()
        copy.fields = dict(self.fields)
        return copy


class _FieldProbeCreator(trt.IPluginCreator):
    declared = {
        "f": trt.PluginFieldType.UNKNOWN,
        "i": trt.PluginFieldType.UNKNOWN,
        "s": trt.PluginFieldType.UNKNOWN,
        "fs": trt.PluginFieldType.UNKNOWN,
        "is_": trt.PluginFieldType.UNKNOWN,
        "t": trt.PluginFieldType.UNKNOWN,
        "as_float": trt.PluginFieldType.FLOAT32,
        "as_i64": trt.PluginFieldType.INT64,
    }

    def __init__(self) -> None:
        trt.IPluginCreator.__init__(self)
        self.name, self.plugin_version = "FieldProbe", "1"
        self.field_names = trt.PluginFieldCollection([trt.PluginField(n, None, t) for n, t in self.declared.items()])
        self.made: list[_FieldProbe] = []

    def create_plugin(self, name: str, fc: trt.PluginFieldCollection) -> _FieldProbe:
        plugin = _FieldProbe(fc)
        self.made.append(plugin)
        return plugin

    def deserialize_plugin(self, name: str, data: bytes) -> _FieldProbe:
        return _FieldProbe()


def test_attributes_become_fields_by_tensorrts_mapping() -> None:
    creator = ensure_registered(_FieldProbeCreator())
    creator.made.clear()
    node = helper.make_node(
        "FieldProbe",
        ["x"],
        ["y"],
        f=0.5,
        i=7,
        s="hello",
        fs=[1.0, 2.0],
        is_=[3, 4],
        t=onnx.numpy_helper.from_array(np.int64([5, 6])),
        as_float=3,
        as_i64=[1, 2],
    )
    ok, parser, _ = parse(model([node], [tensor_info("x", F, [2])], [tensor_info("y", F, [2])]))
    assert ok, errors(parser)
    fields = creator.made[-1].fields
    types = {name: field_type for name, (field_type, _) in fields.items()}
    assert types == {
        "f": trt.PluginFieldType.FLOAT32,
        "i": trt.PluginFieldType.INT32,
        "s": trt.PluginFieldType.CHAR,
        "fs": trt.PluginFieldType.FLOAT32,
        "is_": trt.PluginFieldType.INT32,
        "t": trt.PluginFieldType.INT64,
        "as_float": trt.PluginFieldType.FLOAT32,
        "as_i64": trt.PluginFieldType.INT64,
    }
    assert fields["s"][1].astype(np.uint8).tobytes() == b"hello"
    np.testing.assert_array_equal(fields["is_"][1], [3, 4])
    np.testing.assert_array_equal(fields["as_float"][1], [3.0])


def test_attribute_that_does_not_fit_the_declared_type_is_an_error() -> None:
    ensure_registered(_FieldProbeCreator())
    node = helper.make_node("FieldProbe", ["x"], ["y"], as_i64=[0.5])
    ok, parser, _ = parse(model([node], [tensor_info("x", F, [2])], [tensor_info("y", F, [2])]))
    assert not ok and "does not fit field type INT64" in errors(parser)[0]


class _NegRelu(_FieldProbe):
    def __init__(self, fields: trt.PluginFieldCollection | None = None) -> None:
        super().__init__(fields)
        self.plugin_type = "Relu"

    def enqueue(self, input_desc: Any, output_desc: Any, inputs: Any, outputs: Any, workspace: int, stream: int) -> int:
        trt.as_array(outputs[0], output_desc[0])[...] = -trt.as_array(inputs[0], input_desc[0])
        return 0

    def clone(self) -> _NegRelu:
        copy = _NegRelu()
        copy.plugin_namespace = self.plugin_namespace
        return copy


class _NegReluCreator(_FieldProbeCreator):
    declared = {}

    def __init__(self) -> None:
        super().__init__()
        self.name = "Relu"

    def create_plugin(self, name: str, fc: trt.PluginFieldCollection) -> _FieldProbe:
        plugin = _NegRelu(fc)
        plugin.plugin_namespace = self.plugin_namespace  # the plan records it; deserialization looks it up
        return plugin

    def deserialize_plugin(self, name: str, data: bytes) -> _FieldProbe:
        plugin = _NegRelu()
        plugin.plugin_namespace = self.plugin_namespace
        return plugin


def test_a_plugin_overrides_a_builtin_op_when_the_node_names_a_namespace() -> None:
    ensure_registered(_NegReluCreator(), "override")
    x = np.float32([-1.0, 2.0])
    graph_in, graph_out = [tensor_info("x", F, [2])], [tensor_info("y", F, [2])]
    builtin = model([helper.make_node("Relu", ["x"], ["y"])], graph_in, graph_out)
    np.testing.assert_array_equal(compile_model(builtin)({"x": x})["y"], [0.0, 2.0])
    plugin = model([helper.make_node("Relu", ["x"], ["y"], plugin_namespace="override")], graph_in, graph_out)
    np.testing.assert_array_equal(compile_model(plugin)({"x": x})["y"], [1.0, -2.0])
    missing = model([helper.make_node("Relu", ["x"], ["y"], plugin_namespace="absent")], graph_in, graph_out)
    ok, parser, _ = parse(missing)
    assert not ok and "asks for a plugin" in errors(parser)[0]


class _Broken(_FieldProbeCreator):
    declared = {}

    def __init__(self) -> None:
        super().__init__()
        self.name = "BrokenCreator"

    def create_plugin(self, name: str, fc: trt.PluginFieldCollection) -> _FieldProbe:
        raise RuntimeError("out of widgets")


def test_creator_failures_and_output_count_mismatch_are_errors() -> None:
    ensure_registered(_Broken())
    node = helper.make_node("BrokenCreator", ["x"], ["y"], name="b")
    ok, parser, _ = parse(model([node], [tensor_info("x", F, [2])], [tensor_info("y", F, [2])]))
    assert not ok and "raised RuntimeError: out of widgets" in errors(parser)[0]
    two = helper.make_node("CircPadPlugin", ["x"], ["y", "z"], pads=[1, 1])
    ok, parser, _ = parse(
        model([two], [tensor_info("x", F, [1, 2])], [tensor_info("y", F, [1, 4]), tensor_info("z", F, [1, 4])])
    )
    assert not ok and "has 2 outputs but plugin" in errors(parser)[0]


def test_data_dependent_plugin_outputs_through_compile() -> None:
    nonzero_v3.register()
    node = helper.make_node("NonZeroPlugin", ["x"], ["indices", "count"])
    proto = model(
        [node],
        [tensor_info("x", F, [3, 4])],
        [tensor_info("indices", TensorProto.INT32, None), tensor_info("count", TensorProto.INT32, [])],
    )
    x = np.zeros((3, 4), np.float32)
    x[0, 1] = x[2, 3] = x[1, 0] = 1
    out = compile_model(proto)({"x": x})
    np.testing.assert_array_equal(out["indices"], np.argwhere(x))
    assert int(out["count"]) == 3


def test_a_registered_plugin_takes_precedence_over_a_local_function() -> None:
    body = helper.make_function(
        "custom", "CircPadPlugin", ["a"], ["b"], [helper.make_node("Identity", ["a"], ["b"])], []
    )
    proto = model(
        [helper.make_node("CircPadPlugin", ["x"], ["y"], domain="custom", pads=[1, 1])],
        [tensor_info("x", F, [1, 2])],
        [tensor_info("y", F, [1, 4])],
        extra_opsets=[("custom", 1)],
    )
    proto.functions.append(body)
    x = np.float32([[1, 2]])
    np.testing.assert_array_equal(compile_model(proto)({"x": x})["y"], [[2, 1, 2, 1]])


def test_import_asks_the_networks_plugins_for_shapes_through_their_adapters_unrecorded() -> None:
    # The Mul after the plugins needs their output ranks: the V2 and V3 adapters ask the network's
    # plugins (no build clone), and the questions are not build-phase calls.
    with trt.trace_plugin_calls() as trace:
        ok, parser, network = parse(_pad_model())
    assert ok, errors(parser)
    assert trace.calls == []
    assert "elementwise" in [network.get_layer(i).to_operator().kind for i in range(network.num_layers - 2, network.num_layers)]


class _PadTwiceCalled(circ_pad_v3.CircPadPluginV3):
    """Pads by 3 and counts clones; the second shape question fails."""

    def __init__(self) -> None:
        super().__init__()
        self.pads, self.asked, self.clones = [1, 2], 0, 0

    def clone(self) -> circ_pad_v3.CircPadPluginV3:
        self.clones += 1
        return super().clone()

    def get_output_shapes(self, inputs: Any, shape_inputs: Any, exprBuilder: Any) -> Any:
        self.asked += 1
        if self.asked > 1:
            raise ValueError("asked twice")
        return super().get_output_shapes(inputs, shape_inputs, exprBuilder)


def test_network_outputs_asks_the_plugin_itself_and_names_it_when_it_fails() -> None:
    from plugrt.interfaces.adapters import adapter_for_plugin
    from plugrt.shape import constant, symbol

    plugin = _PadTwiceCalled()
    adapter = adapter_for_plugin(plugin, "pad", None)
    ((dtype, shape),) = adapter.network_outputs(plugin, [(trt.float32, [constant(2), symbol("x[1]")])], [])
    assert dtype == trt.float32 and shape[0] == constant(2)
    assert shape[1].evaluate({"x[1]": 4}) == 7
    assert plugin.clones == 0
    with pytest.raises(trt.PluginError, match=r"layer 'pad', plugin CircPadPluginV3 v1, get_output_shapes\(\).*asked twice"):
        adapter.network_outputs(plugin, [(trt.float32, [constant(2)])], [])
