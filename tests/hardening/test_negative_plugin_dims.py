"""A plugin whose output-shape hook yields a negative dimension fails with a PlugrtError naming the layer,
the plugin (name, version, namespace), the output index and the value: at every profile's min/opt/max when
the engine is built, when a plan is loaded, and at shape change for shapes inside the profile."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

import plugrt as trt
from plugrt.engine.plan_format import PlanContents, decode_plan, encode_plan
from plugrt.examples.circ_pad_v2 import CircPadPlugin, CircPadPluginCreator
from plugrt.examples.circ_pad_v3 import CircPadPluginV3, CircPadPluginV3Creator

SUB, PROD = trt.DimensionOperation.SUB, trt.DimensionOperation.PROD


def _last_dim(eb: trt.IExprBuilder, x: trt.IDimensionExpr) -> trt.IDimensionExpr:
    """(x - 5)^2 - 10: positive at x = 1 and x = 9, negative at x = 5 (-10) and x = 4 (-9)."""
    d = eb.operation(SUB, x, eb.constant(5))
    return eb.operation(SUB, eb.operation(PROD, d, d), eb.constant(10))


class ShrinkV2(CircPadPlugin):
    def __init__(self) -> None:
        super().__init__()
        self.plugin_type = "ShrinkV2"
        self.plugin_namespace = "tests"

    def get_output_dimensions(self, output_index: int, inputs: list[trt.DimsExprs],
                              exprBuilder: trt.IExprBuilder) -> trt.DimsExprs:
        out = trt.DimsExprs(inputs[0])
        out[1] = _last_dim(exprBuilder, inputs[0][1])
        return out

    def clone(self) -> ShrinkV2:
        return ShrinkV2()


class ShrinkV3(CircPadPluginV3):
    def __init__(self) -> None:
        super().__init__()
        self.plugin_name = "ShrinkV3"
        self.plugin_version = "2"

    def get_output_shapes(self, inputs: list[trt.DimsExprs], shape_inputs: list[trt.DimsExprs],
                          exprBuilder: trt.IExprBuilder) -> list[trt.DimsExprs]:
        out = trt.DimsExprs(inputs[0])
        out[1] = _last_dim(exprBuilder, inputs[0][1])
        return [out]

    def clone(self) -> ShrinkV3:
        return ShrinkV3()


class ShrinkV2Creator(CircPadPluginCreator):
    def __init__(self) -> None:
        super().__init__()
        self.name = "ShrinkV2"

    def deserialize_plugin(self, name: str, data: bytes) -> ShrinkV2:
        return ShrinkV2()


class ShrinkV3Creator(CircPadPluginV3Creator):
    def __init__(self) -> None:
        super().__init__()
        self.name, self.plugin_version = "ShrinkV3", "2"

    def create_plugin(self, name: str, fc: trt.PluginFieldCollection, phase: trt.TensorRTPhase) -> ShrinkV3:
        return ShrinkV3()


@pytest.fixture()
def creators() -> Any:
    registry = trt.get_plugin_registry()
    made = [(ShrinkV2Creator(), "tests"), (ShrinkV3Creator(), "")]
    for creator, namespace in made:
        registry.register_creator(creator, namespace)
    yield
    for creator, _ in made:
        registry.deregister_creator(creator)


PLUGINS = {
    "v2": (ShrinkV2, r"plugin ShrinkV2 v1 \(namespace 'tests'\), get_output_dimensions\(\)"),
    "v3": (ShrinkV3, r"plugin ShrinkV3 v2, get_output_shapes\(\)"),
}


def _build(family: str, lo: int, opt: int, hi: int) -> Any:
    builder = trt.Builder(trt.Logger(trt.Logger.ERROR))
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (2, -1))
    plugin = PLUGINS[family][0]()
    layer = network.add_plugin_v2([x], plugin) if family == "v2" else network.add_plugin_v3([x], [], plugin)
    layer.name = "shrink"
    network.mark_output(layer.get_output(0))
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    profile.set_shape("x", (2, lo), (2, opt), (2, hi))
    config.add_optimization_profile(profile)
    return builder.build_serialized_network(network, config)


@pytest.mark.parametrize("family", sorted(PLUGINS))
@pytest.mark.parametrize("lo, opt, hi, point, value", [
    (5, 9, 9, "profile 0 min", -10),
    (1, 4, 9, "profile 0 opt", -9),
    (1, 1, 5, "profile 0 max", -10),
])
def test_negative_dimension_at_a_profile_point_fails_the_build(
        family: str, lo: int, opt: int, hi: int, point: str, value: int) -> None:
    with pytest.raises(trt.BuildError, match=rf"layer 'shrink', {PLUGINS[family][1]}.*output 0 dimension 1 is "
                                             rf"{value}.*at {point} shapes"):
        _build(family, lo, opt, hi)


@pytest.mark.parametrize("family", sorted(PLUGINS))
def test_negative_dimension_inside_the_profile_fails_at_shape_change(family: str, creators: None) -> None:
    plan = _build(family, 1, 1, 9)  # (x - 5)^2 - 10 is 6 at min and max, -10 at x = 5
    engine = trt.Runtime(trt.Logger(trt.Logger.ERROR)).deserialize_cuda_engine(plan)
    context = engine.create_execution_context()
    out = engine.get_tensor_name(1)
    assert context.set_input_shape("x", (2, 5))
    message = rf"layer 'shrink', {PLUGINS[family][1]}: output 0 dimension 1 is -10 .*at the input shapes"
    with pytest.raises(trt.ShapeError, match=message):
        context.get_tensor_shape(out)
    y = np.zeros((2, 1), np.float32)
    context.set_tensor_address("x", np.ones((2, 5), np.float32).ctypes.data)
    context.set_tensor_address(out, y.ctypes.data)
    with pytest.raises(trt.ShapeError, match=message):
        context.execute_async_v3(0)
    assert context.set_input_shape("x", (2, 9))
    assert tuple(context.get_tensor_shape(out)) == (2, 6)


@pytest.mark.parametrize("family", sorted(PLUGINS))
def test_plan_whose_profile_gives_a_negative_plugin_dimension_is_refused_at_load(family: str, creators: None) -> None:
    contents = decode_plan(bytes(_build(family, 1, 1, 9)))
    header = copy.deepcopy(contents.header)
    header["profiles"][0]["shapes"]["x"][1] = [2, 5]  # opt edited to a point where the plugin's output is -10
    edited = encode_plan(PlanContents(header, dict(contents.weights), list(contents.plugins)))
    runtime = trt.Runtime(trt.Logger(trt.Logger.INTERNAL_ERROR))
    with pytest.raises(trt.PlanFormatError, match=r"tensor '.*_output_0' axis 1 is -10 for profile shapes \{'x\[1\]': 5\}"):
        runtime.deserialize_cuda_engine(edited)
