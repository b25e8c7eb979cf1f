"""Pin TensorRT's plugin call order for each interface family."""

from __future__ import annotations

import gc

import numpy as np

import plugrt as trt
from plugrt.examples import circ_pad_v2, circ_pad_v3

from testing_plugins import ScaleV2ExtCreator, build, circ_pad_network, ensure_registered, fields, run


def tensorrt_methods(trace: trt.CallRecorder, layer: str) -> list[str]:
    """``layer``'s calls in TensorRT's phases: plugrt's own check at load (phase load_check, a throwaway clone
    asked its output shapes) is not a TensorRT call, and each test pins it on its own."""
    return [c.method for c in trace.calls if c.layer == layer and c.phase != "load_check"]


V2_DYNAMIC_BUILD = [
    "clone", "get_output_datatype", "get_output_dimensions",
    "supports_format_combination", "supports_format_combination",
    "configure_plugin", "get_workspace_size", "initialize",
    "get_serialization_size", "serialize", "terminate", "destroy",
]


def _trace_v2_dynamic() -> trt.CallRecorder:
    logger = trt.Logger(trt.Logger.ERROR)
    builder = trt.Builder(logger)
    network = circ_pad_network(builder)
    with trt.trace_plugin_calls() as trace:
        plan = build(network, builder, [{"x": ((1, 4), (2, 4), (3, 4))}])
        engine = trt.Runtime(logger).deserialize_cuda_engine(plan)
        context = engine.create_execution_context()
        run(context, {"x": np.ones((2, 4), np.float32)})
        run(context, {"x": np.ones((2, 4), np.float32)})  # same shapes: no configure_plugin
        run(context, {"x": np.ones((3, 4), np.float32)})
        del context, engine
        gc.collect()
    return trace


def test_v2_dynamic_ext_order() -> None:
    trace = _trace_v2_dynamic()
    assert trace.methods("pad", "build") == V2_DYNAMIC_BUILD[:8]
    assert trace.methods("pad", "serialize") == ["get_serialization_size", "serialize"]
    assert trace.methods("pad", "load_check") == ["clone", "get_output_dimensions", "destroy"]
    assert tensorrt_methods(trace, "pad") == V2_DYNAMIC_BUILD + [
        "deserialize_plugin", "initialize",          # runtime: creator, then initialize
        "clone", "attach_to_context",                # context creation: clone of the initialized plugin
        "configure_plugin", "enqueue",               # first shapes
        "enqueue",                                   # same shapes again
        "configure_plugin", "enqueue",               # new shapes
        "detach_from_context", "destroy",            # context teardown (clone)
        "terminate", "destroy",                      # engine teardown
    ]


def test_phases_are_recorded() -> None:
    trace = _trace_v2_dynamic()
    phases = [c.phase for c in trace.calls]
    assert phases[:8] == ["build"] * 8
    assert phases[8:10] == ["serialize"] * 2
    assert [c.phase for c in trace.calls if c.method == "enqueue"] == ["inference"] * 3
    assert all(str(c).count(c.method) for c in trace.calls)


def test_v2ext_static_order() -> None:
    logger = trt.Logger(trt.Logger.ERROR)
    creator = ensure_registered(ScaleV2ExtCreator())
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (-1, 3))
    layer = network.add_plugin_v2([x], creator.create_plugin("scale", fields(scale=2.0)))
    layer.name = "scale"
    network.mark_output(layer.get_output(0))
    with trt.trace_plugin_calls() as trace:
        plan = build(network, builder, [{"x": ((1, 3), (2, 3), (4, 3))}])
        engine = trt.Runtime(logger).deserialize_cuda_engine(plan)
        context = engine.create_execution_context()
        out = run(context, {"x": np.arange(6, dtype=np.float32).reshape(2, 3)})
        del context, engine
        gc.collect()
    np.testing.assert_array_equal(next(iter(out.values())), np.arange(6).reshape(2, 3) * 2.0)
    assert trace.methods("scale", "load_check") == ["clone", "get_output_shape", "destroy"]
    assert tensorrt_methods(trace, "scale") == [
        "clone", "get_output_data_type", "get_output_shape", "supports_format",
        "configure_plugin", "get_workspace_size", "initialize",
        "get_serialization_size", "serialize", "terminate", "destroy",
        "deserialize_plugin", "initialize", "clone", "attach_to_context",
        "execute_async", "detach_from_context", "destroy", "terminate", "destroy",
    ]


def test_v3_order() -> None:
    logger = trt.Logger(trt.Logger.ERROR)
    creator = circ_pad_v3.register()
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (-1, 4))
    plugin = creator.create_plugin("pad", fields(pads=[2, 0]), trt.TensorRTPhase.BUILD)
    layer = network.add_plugin_v3([x], [], plugin)
    layer.name = "pad3"
    network.mark_output(layer.get_output(0))
    with trt.trace_plugin_calls() as trace:
        plan = build(network, builder, [{"x": ((1, 4), (2, 4), (3, 4))}])
        engine = trt.Runtime(logger).deserialize_cuda_engine(plan)
        context = engine.create_execution_context()
        out = run(context, {"x": np.arange(8, dtype=np.float32).reshape(2, 4)})
        run(context, {"x": np.arange(12, dtype=np.float32).reshape(3, 4)})
    np.testing.assert_array_equal(next(iter(out.values())), np.pad(np.arange(8).reshape(2, 4), [(0, 0), (2, 0)], mode="wrap"))
    assert trace.methods("pad3", "load_check") == ["clone", "get_capability_interface", "get_output_shapes", "destroy"]
    methods = [m for m in tensorrt_methods(trace, "pad3") if m != "get_capability_interface"]
    assert methods == [
        "clone", "get_output_data_types", "get_output_shapes",
        "supports_format_combination", "supports_format_combination",
        "configure_plugin", "get_workspace_size", "get_valid_tactics",
        "get_fields_to_serialize", "destroy",        # the build instance goes away
        "create_plugin", "set_tactic",
        "attach_to_context",
        "on_shape_change", "enqueue",
        "on_shape_change", "enqueue",
    ]
    with trt.trace_plugin_calls() as teardown:
        del context, engine
        gc.collect()
    assert teardown.methods("pad3") == ["destroy", "destroy"]  # the context's clone, then the engine's plugin


def test_incremental_format_questions_see_only_earlier_positions() -> None:
    """supports_format_combination is asked position by position, inputs before outputs."""
    seen: list[tuple[int, list[str]]] = []

    class Watcher(circ_pad_v2.CircPadPlugin):
        def supports_format_combination(self, pos, in_out, num_inputs):  # type: ignore[no-untyped-def]
            seen.append((pos, [d.type.name for d in in_out[:pos]]))
            return super().supports_format_combination(pos, in_out, num_inputs)

        def clone(self):  # type: ignore[no-untyped-def]
            copy = Watcher()
            copy.pads = list(self.pads)
            return copy

    logger = trt.Logger(trt.Logger.ERROR)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float16, (2, 4))
    plugin = Watcher()
    plugin.pads = [1, 1]
    network.mark_output(network.add_plugin_v2([x], plugin).get_output(0))
    build(network, builder)
    assert seen == [(0, []), (1, ["HALF"])]
