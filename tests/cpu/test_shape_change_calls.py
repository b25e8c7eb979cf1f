"""When a context tells its plugins about a shape change, by family, as TensorRT documents it.

IPluginV2DynamicExt::configurePlugin: "IExecutionContext will call this during the next
subsequent instance enqueue[V2]() or execute[V2]() if the optimization profile is changed via
setOptimizationProfileAsync(), or an input execution binding is changed via setInputShape()":
not when only tensor addresses move. IPluginV3OneRuntime::onShapeChange is called for those too:
"An input binding is changed via setInputTensorAddress() or setTensorAddress() or setInputShape()".
"""

from __future__ import annotations

import numpy as np

import plugrt as trt
from plugrt.examples import circ_pad_v3

from testing_plugins import build, circ_pad_network, fields

QUIET = trt.Logger(trt.Logger.ERROR)


def _run_at_new_addresses(context: trt.IExecutionContext, x: np.ndarray, keep: list[np.ndarray]) -> np.ndarray:
    """Run with ``x`` copied to a new buffer and a new output buffer (both kept alive, so addresses differ)."""
    source = x.copy()
    out = np.zeros((x.shape[0], x.shape[1] + 2), np.float32)
    keep += [source, out]
    assert context.set_input_shape("x", source.shape)
    context.set_tensor_address("x", source.ctypes.data)
    context.set_tensor_address(context.engine.get_tensor_name(1), out.ctypes.data)
    context.execute_async_v3(0)
    return out


def _expected(x: np.ndarray) -> np.ndarray:
    return np.pad(x, [(0, 0), (1, 1)], mode="wrap")


def test_v2_dynamic_ext_is_configured_on_shape_changes_not_on_new_addresses() -> None:
    builder = trt.Builder(QUIET)
    plan = build(circ_pad_network(builder), builder, [{"x": ((1, 4), (2, 4), (3, 4))}])
    engine = trt.Runtime(QUIET).deserialize_cuda_engine(plan)
    context = engine.create_execution_context()
    keep: list[np.ndarray] = []
    x2 = np.arange(8, dtype=np.float32).reshape(2, 4)
    with trt.trace_plugin_calls() as trace:
        first = _run_at_new_addresses(context, x2, keep)
        second = _run_at_new_addresses(context, x2 + 10, keep)  # same shapes, other buffers
        third = _run_at_new_addresses(context, np.ones((3, 4), np.float32), keep)  # a new shape
    assert trace.methods("pad") == ["configure_plugin", "enqueue", "enqueue", "configure_plugin", "enqueue"]
    np.testing.assert_array_equal(first, _expected(x2))
    np.testing.assert_array_equal(second, _expected(x2 + 10))  # the new addresses were used
    np.testing.assert_array_equal(third, _expected(np.ones((3, 4), np.float32)))


def test_v2_dynamic_ext_is_configured_again_after_a_profile_change() -> None:
    builder = trt.Builder(QUIET)
    profiles = [{"x": ((1, 4), (2, 4), (3, 4))}, {"x": ((2, 4), (2, 4), (8, 4))}]
    engine = trt.Runtime(QUIET).deserialize_cuda_engine(build(circ_pad_network(builder), builder, profiles))
    context = engine.create_execution_context()
    keep: list[np.ndarray] = []
    x2 = np.arange(8, dtype=np.float32).reshape(2, 4)
    with trt.trace_plugin_calls() as trace:
        _run_at_new_addresses(context, x2, keep)
        assert context.set_optimization_profile_async(1, 0)
        out = _run_at_new_addresses(context, x2, keep)  # the same shapes, the other profile's ranges
    assert trace.methods("pad") == ["configure_plugin", "enqueue", "configure_plugin", "enqueue"]
    np.testing.assert_array_equal(out, _expected(x2))


def test_v3_hears_of_new_addresses_too() -> None:
    builder = trt.Builder(QUIET)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (-1, 4))
    plugin = circ_pad_v3.register().create_plugin("pad", fields(pads=[1, 1]), trt.TensorRTPhase.BUILD)
    layer = network.add_plugin_v3([x], [], plugin)
    layer.name = "pad3"
    network.mark_output(layer.get_output(0))
    engine = trt.Runtime(QUIET).deserialize_cuda_engine(build(network, builder, [{"x": ((1, 4), (2, 4), (3, 4))}]))
    context = engine.create_execution_context()
    keep: list[np.ndarray] = []
    x2 = np.arange(8, dtype=np.float32).reshape(2, 4)
    with trt.trace_plugin_calls() as trace:
        _run_at_new_addresses(context, x2, keep)
        out = _run_at_new_addresses(context, x2 + 1, keep)
        context.execute_async_v3(0)  # nothing changed: enqueue only
    assert trace.methods("pad3") == ["on_shape_change", "enqueue", "on_shape_change", "enqueue", "enqueue"]
    np.testing.assert_array_equal(out, _expected(x2 + 1))
