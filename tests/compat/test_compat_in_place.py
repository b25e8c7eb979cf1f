"""Gap 5: in-place outputs plan memory so nobody reads an overwritten input; misuse is reported."""

from __future__ import annotations

import numpy as np
import pytest
from compat_helpers import LOGGER, build_plan, deserialize, infer

import plugrt as trt
from plugrt.engine.plan import EnginePlan

ALIASED = trt.PreviewFeature.ALIASED_PLUGIN_IO_10_03


class AddOneInPlace(trt.IPluginV3, trt.IPluginV3OneCore, trt.IPluginV3OneBuildV2, trt.IPluginV3OneRuntime):
    """x += 1 in place: output 0 aliases input ``alias`` (or what ``answer`` says)."""

    answer: object = 0
    out_shape_delta = 0

    def __init__(self) -> None:
        trt.IPluginV3.__init__(self)
        trt.IPluginV3OneCore.__init__(self)
        trt.IPluginV3OneBuildV2.__init__(self)
        trt.IPluginV3OneRuntime.__init__(self)
        self.plugin_name, self.plugin_version, self.plugin_namespace = "CompatAddOneInPlace", "1", ""
        self.num_outputs = 1
        self.same_pointer: list[bool] = []

    def get_capability_interface(self, type):
        return self

    def get_output_data_types(self, input_types):
        return [input_types[0]]

    def get_output_shapes(self, inputs, shape_inputs, exprBuilder):
        out = trt.DimsExprs(inputs[0])
        if self.out_shape_delta:
            out[0] = exprBuilder.operation(trt.DimensionOperation.SUM, inputs[0][0], exprBuilder.constant(self.out_shape_delta))
        return [out]

    def supports_format_combination(self, pos, in_out, num_inputs):
        return in_out[pos].desc.type == trt.float32 and in_out[pos].desc.format == trt.TensorFormat.LINEAR

    def get_aliased_input(self, output_index):
        return self.answer

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        self.same_pointer.append(inputs[0] == outputs[0])
        trt.as_array(inputs[0], input_desc[0])[...] += 1

    def attach_to_context(self, context):
        return self.clone()

    def get_fields_to_serialize(self):
        return trt.PluginFieldCollection([])

    def clone(self):
        copy = type(self)()
        copy.__dict__.update(self.__dict__)
        copy.same_pointer = []
        return copy


class AddOneInPlaceCreator(trt.IPluginCreatorV3One):
    def __init__(self) -> None:
        trt.IPluginCreatorV3One.__init__(self)
        self.name, self.plugin_version, self.plugin_namespace = "CompatAddOneInPlace", "1", ""
        self.field_names = trt.PluginFieldCollection([])

    def create_plugin(self, name, fc, phase):
        return AddOneInPlace()


@pytest.fixture(scope="module", autouse=True)
def creator():  # type: ignore[no-untyped-def]
    made = AddOneInPlaceCreator()
    trt.get_plugin_registry().register_creator(made, "")
    yield made
    trt.get_plugin_registry().deregister_creator(made)


def _build(read_later: bool, plugin_output_is_network_output: bool) -> bytes:
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (2, 3))
    t = network.add_elementwise(x, x, trt.ElementWiseOperation.SUM).get_output(0)  # internal: 2x
    y = network.add_plugin_v3([t], [], AddOneInPlace()).get_output(0)  # 2x + 1
    if plugin_output_is_network_output:
        y.name = "y"
        network.mark_output(y)
    else:
        z = network.add_elementwise(y, y, trt.ElementWiseOperation.PROD).get_output(0)
        z.name = "y"
        network.mark_output(z)
    if read_later:
        late = network.add_elementwise(t, x, trt.ElementWiseOperation.SUM).get_output(0)  # reads t after the plugin: 3x
        late.name = "late"
        network.mark_output(late)
    config = builder.create_builder_config()
    config.set_preview_feature(ALIASED, True)
    return build_plan(builder, network, config=config)


@pytest.mark.parametrize("read_later", [False, True])
@pytest.mark.parametrize("network_output", [False, True])
def test_in_place_plugin_results_and_memory(read_later: bool, network_output: bool) -> None:
    plan = _build(read_later, network_output)
    engine = deserialize(plan)
    layers = EnginePlan.from_bytes(plan).layers
    copies = [layer.name for layer in layers if layer.name.startswith("Copy ")]
    assert len(copies) == int(read_later) + int(network_output)
    context = engine.create_execution_context()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = infer(context, {"x": x})
    np.testing.assert_array_equal(out["y"], 2 * x + 1 if network_output else (2 * x + 1) ** 2)
    if read_later:
        np.testing.assert_array_equal(out["late"], 3 * x)  # t was not overwritten for its later reader
    plugin = next(step.node.plugin for step in context._executor.steps if step.layer.is_plugin)
    assert plugin.same_pointer == [True]


def test_in_place_output_shares_the_inputs_arena_block() -> None:
    plan = EnginePlan.from_bytes(_build(read_later=False, plugin_output_is_network_output=False))
    plugin_layer = next(layer for layer in plan.layers if layer.is_plugin)
    offsets = plan.profiles[0].offsets
    assert offsets[plugin_layer.inputs[0]] == offsets[plugin_layer.outputs[0]]


@pytest.mark.parametrize("answer", [1, -2, "0", 0.0])
def test_get_aliased_input_out_of_range_names_the_answer(answer: object) -> None:
    AddOneInPlace.answer = answer
    try:
        with pytest.raises(trt.PluginError, match=r"get_aliased_input\(\) returned .* for output 0; expected -1"):
            _build(False, False)
    finally:
        AddOneInPlace.answer = 0


def test_aliased_output_with_another_shape_fails_the_build() -> None:
    AddOneInPlace.out_shape_delta = 1
    try:
        with pytest.raises(trt.BuildError, match="output 0 aliases input 0, so both need one type, format and shape"):
            _build(False, False)
    finally:
        AddOneInPlace.out_shape_delta = 0


def test_two_outputs_aliasing_one_input_is_rejected() -> None:
    class Twice(AddOneInPlace):
        def get_output_data_types(self, input_types):
            return [input_types[0], input_types[0]]

        def get_output_shapes(self, inputs, shape_inputs, exprBuilder):
            return [trt.DimsExprs(inputs[0]), trt.DimsExprs(inputs[0])]

    plugin = Twice()
    plugin.num_outputs = 2
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (2, 3))
    layer = network.add_plugin_v3([x], [], plugin)
    network.mark_output(layer.get_output(0))
    config = builder.create_builder_config()
    config.set_preview_feature(ALIASED, True)
    with pytest.raises(trt.PluginError, match="outputs 0 and 1 both alias input 0; an input can be aliased to one output only"):
        build_plan(builder, network, config=config)


def test_preview_feature_switch_and_misuse() -> None:
    config = trt.Builder(LOGGER).create_builder_config()
    assert config.get_preview_feature(ALIASED) is False
    config.set_preview_feature(ALIASED, True)
    assert config.get_preview_feature(ALIASED) is True
    config.set_preview_feature(ALIASED, False)
    assert config.get_preview_feature(ALIASED) is False
    with pytest.raises(trt.TypeMismatchError, match="feature must be a PreviewFeature, got 0"):
        config.set_preview_feature(0, True)
