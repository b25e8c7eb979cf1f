"""A plan whose plugin record was edited (checksums recomputed) fails at load, naming the layer and the plugin.

The memory of a plan is planned for the output shapes it records; a plugin computes from its
own payload. When a plan loads, each revived plugin's output-shape hook is asked again (on a
throwaway clone, phase ``load_check``) with the plan's input shapes; a record that gives other
shapes is refused before any context exists, so it can never allocate for, or write past, the
wrong sizes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import plugrt as trt
from plugrt.engine.plan_format import PlanContents, decode_plan, encode_plan
from plugrt.examples import circ_pad_v2, circ_pad_v3
from plugrt.interfaces.field_codec import encode_fields

from testing_plugins import build, circ_pad_network, fields, run

QUIET = trt.Logger(trt.Logger.INTERNAL_ERROR)
PROFILE = {"x": ((1, 4), (2, 4), (3, 4))}


def with_payload(plan: bytes, payload: bytes) -> bytes:
    """``plan`` with its only plugin record's payload replaced (checksums are those of the new bytes)."""
    contents = decode_plan(plan)
    (record,) = contents.plugins
    return encode_plan(
        PlanContents(contents.header, dict(contents.weights), [dataclasses.replace(record, payload=payload)])
    )


def load(data: bytes) -> trt.ICudaEngine:
    return trt.Runtime(QUIET).deserialize_cuda_engine(data)


def plugin_plan(name: str, add: Callable[[trt.INetworkDefinition, trt.ITensor], Any]) -> bytes:
    """The plan of x [-1, 4] -> the plugin layer ``add`` makes, named ``name`` -> output (profile PROFILE)."""
    builder = trt.Builder(QUIET)
    network = builder.create_network(0)
    layer = add(network, network.add_input("x", trt.float32, (-1, 4)))
    layer.name = name
    network.mark_output(layer.get_output(0))
    return build(network, builder, [PROFILE])


@contextlib.contextmanager
def registered(creator: Any) -> Iterator[Any]:
    trt.get_plugin_registry().register_creator(creator, "")
    try:
        yield creator
    finally:
        trt.get_plugin_registry().deregister_creator(creator)


@pytest.fixture(scope="module")
def v2_plan() -> bytes:
    builder = trt.Builder(QUIET)
    return build(circ_pad_network(builder), builder, [PROFILE])


def v2_payload(pads: list[int]) -> bytes:
    return bytes(circ_pad_v2.register().create_plugin("pad", fields(pads=pads)).serialize())


@pytest.fixture(scope="module")
def v3_plan() -> bytes:
    plugin = circ_pad_v3.register().create_plugin("pad", fields(pads=[2, 0]), trt.TensorRTPhase.BUILD)
    return plugin_plan("pad3", lambda network, x: network.add_plugin_v3([x], [], plugin))


def v3_payload(pads: list[int]) -> bytes:
    plugin = circ_pad_v3.register().create_plugin("pad", fields(pads=pads), trt.TensorRTPhase.RUNTIME)
    runtime = plugin.get_capability_interface(trt.PluginCapabilityType.RUNTIME)
    return encode_fields(runtime.get_fields_to_serialize())


def test_the_plan_as_built_loads_and_runs(v2_plan: bytes) -> None:
    engine = load(with_payload(v2_plan, v2_payload([1, 1])))  # the same record, written again
    out = run(engine.create_execution_context(), {"x": np.arange(8, dtype=np.float32).reshape(2, 4)})
    np.testing.assert_array_equal(next(iter(out.values())), np.pad(np.arange(8).reshape(2, 4), [(0, 0), (1, 1)], "wrap"))


def test_absurd_sizes_in_a_v2_record_fail_at_load(v2_plan: bytes) -> None:
    edited = with_payload(v2_plan, v2_payload([1_000_000_000, 1_000_000_000]))
    with pytest.raises(trt.PlanFormatError) as info:
        load(edited)
    message = str(info.value)
    assert "layer 'pad'" in message and "plugin CircPadPlugin v1" in message, message
    assert "get_output_dimensions()" in message, message
    assert "the shape [x[0], 2000000004] where the plan records [x[0], 6]" in message, message
    assert "at profile 0's min shapes, [1, 2000000004] against [1, 6]" in message, message


def test_other_small_sizes_in_a_v2_record_fail_at_load(v2_plan: bytes) -> None:
    """One element more per row: no allocation would notice, the plugin would write past its output."""
    with pytest.raises(trt.PlanFormatError, match=r"layer 'pad', plugin CircPadPlugin v1, get_output_dimensions\(\)"):
        load(with_payload(v2_plan, v2_payload([1, 2])))


def test_an_edited_v3_record_fails_at_load(v3_plan: bytes) -> None:
    load(with_payload(v3_plan, v3_payload([2, 0])))
    with pytest.raises(trt.PlanFormatError) as info:
        load(with_payload(v3_plan, v3_payload([2, 4096])))
    message = str(info.value)
    assert "layer 'pad3', plugin CircPadPluginV3 v1, get_output_shapes()" in message, message
    assert "[1, 4102] against [1, 6]" in message, message


def test_the_check_asks_a_throwaway_clone_in_its_own_phase(v2_plan: bytes) -> None:
    with trt.trace_plugin_calls() as trace:
        engine = load(v2_plan)
        del engine
        gc.collect()
    check = [c for c in trace.calls if c.phase == "load_check"]
    assert [c.method for c in check] == ["clone", "get_output_dimensions", "destroy"]
    assert all(c.layer == "pad" and c.plugin == "CircPadPlugin v1" for c in check)
    # TensorRT's calls are untouched: revive, then (here, no context) the engine's teardown
    assert [c.method for c in trace.calls if c.phase != "load_check"] == [
        "deserialize_plugin", "initialize", "terminate", "destroy"
    ]
    assert "[  load_check] pad: CircPadPlugin v1.get_output_dimensions" in trace.format()


class _KeepsState:
    """``clone()`` copies every attribute, the test's flags included (the examples copy their pads only)."""

    def clone(self):  # type: ignore[no-untyped-def]
        copy = type(self)()
        copy.__dict__.update({k: list(v) if isinstance(v, list) else v for k, v in vars(self).items()})
        return copy


class _Forgetful(_KeepsState, circ_pad_v2.CircPadPlugin):
    """Answers output shapes only until serialized: a revived instance raises."""

    revived = False

    def __init__(self) -> None:
        super().__init__()
        self.plugin_type = "ForgetfulPad"

    def get_output_dimensions(self, output_index, inputs, exprBuilder):  # type: ignore[no-untyped-def]
        if self.revived:
            raise RuntimeError("no pads after deserialization")
        return super().get_output_dimensions(output_index, inputs, exprBuilder)


class _ForgetfulCreator(circ_pad_v2.CircPadPluginCreator):
    def __init__(self) -> None:
        super().__init__()
        self.name = "ForgetfulPad"

    def create_plugin(self, name, fc):  # type: ignore[no-untyped-def]
        plugin = _Forgetful()
        plugin.pads = list(circ_pad_v2.CircPadPluginCreator.create_plugin(self, name, fc).pads)
        return plugin

    def deserialize_plugin(self, name, data):  # type: ignore[no-untyped-def]
        plugin = _Forgetful()
        plugin.pads = list(circ_pad_v2.CircPadPluginCreator.deserialize_plugin(self, name, data).pads)
        plugin.revived = True
        return plugin


def test_a_v2_plugin_that_cannot_say_its_shapes_at_load_is_refused() -> None:
    with registered(_ForgetfulCreator()) as creator:
        plugin = creator.create_plugin("pad", fields(pads=[1, 1]))
        plan = plugin_plan("forgetful", lambda network, x: network.add_plugin_v2([x], plugin))
        with pytest.raises(trt.PlanFormatError) as info:
            load(plan)
    message = str(info.value)
    assert message.startswith("plan layer 'forgetful': its revived plugin could not be asked for its output shapes")
    assert "plugin ForgetfulPad v1, get_output_dimensions() raised RuntimeError: no pads after deserialization" in message


class _RuntimeOnly(_KeepsState, circ_pad_v3.CircPadPluginV3):
    """Created for TensorRT's RUNTIME phase: no BUILD capability (``refuse="capability"``) or a shape hook
    that raises (``refuse="shapes"``), as TensorRT allows of runtime-phase V3 plugins."""

    refuse = ""

    def __init__(self, fc: trt.PluginFieldCollection | None = None) -> None:
        super().__init__(fc)
        self.plugin_name = "RuntimeOnlyPad"

    def get_capability_interface(self, type):  # type: ignore[no-untyped-def]
        if self.refuse == "capability" and type == trt.PluginCapabilityType.BUILD:
            return None
        return super().get_capability_interface(type)

    def get_output_shapes(self, inputs, shape_inputs, exprBuilder):  # type: ignore[no-untyped-def]
        if self.refuse == "shapes":
            raise RuntimeError("built only for running")
        return super().get_output_shapes(inputs, shape_inputs, exprBuilder)



class _RuntimeOnlyCreator(circ_pad_v3.CircPadPluginV3Creator):
    refuse = ""

    def __init__(self) -> None:
        super().__init__()
        self.name = "RuntimeOnlyPad"

    def create_plugin(self, name, fc, phase):  # type: ignore[no-untyped-def]
        plugin = _RuntimeOnly(fc)
        plugin.refuse = self.refuse if phase == trt.TensorRTPhase.RUNTIME else ""
        return plugin


class _Messages(trt.ILogger):
    def __init__(self) -> None:
        trt.ILogger.__init__(self)
        self.min_severity = trt.Logger.INFO
        self.messages: list[str] = []

    def log(self, severity, msg):  # type: ignore[no-untyped-def]
        self.messages.append(msg)


@pytest.mark.parametrize("refuse", ["capability", "shapes"])
def test_a_v3_plugin_revived_for_running_need_not_answer(refuse: str) -> None:
    with registered(_RuntimeOnlyCreator()) as creator:
        creator.refuse = refuse
        plugin = creator.create_plugin("pad", fields(pads=[1, 1]), trt.TensorRTPhase.BUILD)
        plan = plugin_plan("runtime_only", lambda network, x: network.add_plugin_v3([x], [], plugin))
        logger = _Messages()
        with trt.trace_plugin_calls() as trace:
            engine = trt.Runtime(logger).deserialize_cuda_engine(plan)
        out = run(engine.create_execution_context(), {"x": np.ones((2, 4), np.float32)})
    assert next(iter(out.values())).shape == (2, 6)
    asked = trace.methods("runtime_only", "load_check")
    if refuse == "capability":
        assert asked == ["clone", "get_capability_interface", "destroy"]
        assert not [m for m in logger.messages if "not checked" in m]
    else:
        assert asked == ["clone", "get_capability_interface", "get_output_shapes", "destroy"]
        (note,) = [m for m in logger.messages if "not checked against the plan" in m]
        assert "layer 'runtime_only', plugin RuntimeOnlyPad v1, get_output_shapes() raised RuntimeError" in note


class _PadToShape(_KeepsState, circ_pad_v3.CircPadPluginV3):
    """CircPadPluginV3 whose output shape is read from a shape input (the values of ``shape(x)``)."""

    def __init__(self, fc: trt.PluginFieldCollection | None = None) -> None:
        super().__init__(fc)
        self.plugin_name = "PadToShape"

    def get_output_shapes(self, inputs, shape_inputs, exprBuilder):  # type: ignore[no-untyped-def]
        rows, cols = shape_inputs[0]
        extra = exprBuilder.constant(self.pads[0] + self.pads[1])
        return [trt.DimsExprs([rows, exprBuilder.operation(trt.DimensionOperation.SUM, cols, extra)])]


class _PadToShapeCreator(circ_pad_v3.CircPadPluginV3Creator):
    def __init__(self) -> None:
        super().__init__()
        self.name = "PadToShape"

    def create_plugin(self, name, fc, phase):  # type: ignore[no-untyped-def]
        return _PadToShape(fc)


def test_shape_input_values_come_from_the_plan() -> None:
    with registered(_PadToShapeCreator()) as creator:
        plugin = creator.create_plugin("pad", fields(pads=[1, 1]), trt.TensorRTPhase.BUILD)
        plan = plugin_plan(
            "to_shape",
            lambda network, x: network.add_plugin_v3([x], [network.add_operator("shape", [x]).get_output(0)], plugin),
        )
        with trt.trace_plugin_calls() as trace:
            engine = load(plan)
        out = run(engine.create_execution_context(), {"x": np.arange(8, dtype=np.float32).reshape(2, 4)})
        assert next(iter(out.values())).shape == (2, 6)
        assert "get_output_shapes" in trace.methods("to_shape", "load_check")
        edited = _PadToShape(fields(pads=[1, 100]))
        payload = encode_fields(edited.get_capability_interface(trt.PluginCapabilityType.RUNTIME).get_fields_to_serialize())
        with pytest.raises(trt.PlanFormatError, match=r"layer 'to_shape', plugin PadToShape v1, get_output_shapes\(\)"):
            load(with_payload(plan, payload))
