"""Plugins and standard layers built, serialized, reloaded and run, checked against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import plugrt as trt
from plugrt.examples import circ_pad_v2, circ_pad_v3, nonzero_v3

from testing_plugins import ScaleV2ExtCreator, build, ensure_registered, fields, run

LOGGER = trt.Logger(trt.Logger.ERROR)


def _engine(network: trt.INetworkDefinition, builder: trt.Builder, profiles=(), flags=()):  # type: ignore[no-untyped-def]
    plan = build(network, builder, profiles, flags)
    return trt.Runtime(LOGGER).deserialize_cuda_engine(plan)


def test_v2_dynamic_and_v3_plugins_at_several_shapes() -> None:
    v2 = circ_pad_v2.register()
    v3 = circ_pad_v3.register()
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (-1, 3, -1))
    a = network.add_plugin_v2([x], v2.create_plugin("a", fields(pads=[1, 2])))
    b = network.add_plugin_v3([a.get_output(0)], [], v3.create_plugin("b", fields(pads=[0, 1, 2, 0]), trt.TensorRTPhase.BUILD))
    b.get_output(0).name = "y"
    network.mark_output(b.get_output(0))
    engine = _engine(network, builder, [{"x": ((1, 3, 1), (2, 3, 4), (5, 3, 9))}])
    assert engine.get_tensor_shape("y") == (-1, 5, -1)
    context = engine.create_execution_context()
    rng = np.random.default_rng(1)
    for shape in [(1, 3, 1), (5, 3, 9), (2, 3, 4), (4, 3, 7)]:
        x_val = rng.standard_normal(shape).astype(np.float32)
        y = run(context, {"x": x_val})["y"]
        ref = np.pad(np.pad(x_val, [(0, 0), (0, 0), (1, 2)], mode="wrap"), [(0, 0), (2, 0), (0, 1)], mode="wrap")
        np.testing.assert_array_equal(y, ref)


def test_plugin_between_standard_layers() -> None:
    v2 = circ_pad_v2.register()
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (-1, 4))
    w = np.arange(24, dtype=np.float32).reshape(4, 6) / 10
    const = network.add_constant((4, 6), w)
    mm = network.add_matrix_multiply(x, trt.MatrixOperation.NONE, const.get_output(0), trt.MatrixOperation.NONE)
    relu = network.add_activation(mm.get_output(0), trt.ActivationType.RELU)
    pad = network.add_plugin_v2([relu.get_output(0)], v2.create_plugin("pad", fields(pads=[1, 1])))
    out = network.add_softmax(pad.get_output(0))
    out.axes = 1 << 1
    out.get_output(0).name = "probs"
    network.mark_output(out.get_output(0))
    engine = _engine(network, builder, [{"x": ((1, 4), (3, 4), (8, 4))}])
    context = engine.create_execution_context()
    x_val = np.random.default_rng(2).standard_normal((5, 4)).astype(np.float32)
    probs = run(context, {"x": x_val})["probs"]
    hidden = np.pad(np.maximum(x_val @ w, 0), [(0, 0), (1, 1)], mode="wrap")
    ref = np.exp(hidden - hidden.max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    np.testing.assert_allclose(probs, ref, rtol=1e-5, atol=1e-6)


def test_v2ext_static_plugin_with_dynamic_batch() -> None:
    creator = ensure_registered(ScaleV2ExtCreator())
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (-1, 2, 3))
    layer = network.add_plugin_v2([x], creator.create_plugin("s", fields(scale=-1.5)))
    network.mark_output(layer.get_output(0))
    engine = _engine(network, builder, [{"x": ((1, 2, 3), (2, 2, 3), (6, 2, 3))}])
    context = engine.create_execution_context()
    for batch in (1, 6, 3):
        x_val = np.random.default_rng(batch).standard_normal((batch, 2, 3)).astype(np.float32)
        np.testing.assert_array_equal(next(iter(run(context, {"x": x_val}).values())), x_val * np.float32(-1.5))


class _PadVariantCreator(circ_pad_v2.CircPadPluginCreator):
    """Recreates a CircPadPlugin subclass registered under its own plugin type."""

    def __init__(self, cls: type) -> None:
        super().__init__()
        self.cls = cls
        self.name = cls.TYPE

    def deserialize_plugin(self, name, data):  # type: ignore[no-untyped-def]
        plugin = self.cls()
        plugin.pads = super().deserialize_plugin(name, data).pads
        return plugin


class _HalfOnly(circ_pad_v2.CircPadPlugin):
    """Accepts only FP16: the builder must insert FP32 -> FP16 -> FP32 conversions around it."""

    TYPE = "TestPadHalfOnly"

    def __init__(self) -> None:
        super().__init__()
        self.plugin_type = self.TYPE

    def supports_format_combination(self, pos, in_out, num_inputs):  # type: ignore[no-untyped-def]
        return in_out[pos].type == trt.float16 and in_out[pos].format == trt.TensorFormat.LINEAR

    def clone(self):  # type: ignore[no-untyped-def]
        copy = _HalfOnly()
        copy.pads = list(self.pads)
        return copy


class _Chw4Only(circ_pad_v2.CircPadPlugin):
    """Works on CHW4 buffers only (a vectorised layout); output keeps the input layout."""

    TYPE = "TestPadChw4Only"

    def __init__(self) -> None:
        super().__init__()
        self.plugin_type = self.TYPE

    def supports_format_combination(self, pos, in_out, num_inputs):  # type: ignore[no-untyped-def]
        return in_out[pos].type == trt.float32 and in_out[pos].format == trt.TensorFormat.CHW4

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):  # type: ignore[no-untyped-def]
        x = trt.as_array(inputs[0], input_desc[0])  # [N, C/4, H, W, 4]
        y = trt.as_array(outputs[0], output_desc[0])
        assert x.shape[-1] == 4 and input_desc[0].format == trt.TensorFormat.CHW4
        y[...] = np.pad(x, [(0, 0), (0, 0), (0, 0), (self.pads[0], self.pads[1]), (0, 0)], mode="wrap")
        return 0

    def clone(self):  # type: ignore[no-untyped-def]
        copy = _Chw4Only()
        copy.pads = list(self.pads)
        return copy


@pytest.mark.parametrize("plugin_class", [_HalfOnly, _Chw4Only])
def test_builder_inserts_conversions(plugin_class: type) -> None:
    ensure_registered(_PadVariantCreator(plugin_class))
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (2, 6, 3, 5))
    plugin = plugin_class()
    plugin.pads = [2, 1]
    layer = network.add_plugin_v2([x], plugin)
    layer.get_output(0).name = "y"
    network.mark_output(layer.get_output(0))
    engine = _engine(network, builder)
    # FP16: reformat in, plugin, cast back to the declared FLOAT; CHW4: reformat, plugin, reformat back to LINEAR
    assert engine.num_layers == 3
    assert engine.get_tensor_dtype("y") == trt.float32
    assert engine.get_tensor_format("y") == trt.TensorFormat.LINEAR
    info = engine.create_engine_inspector().get_engine_information(trt.LayerInformationFormat.JSON)
    assert "reformat" in info
    x_val = np.random.default_rng(3).standard_normal((2, 6, 3, 5)).astype(np.float32)
    y = run(engine.create_execution_context(), {"x": x_val})["y"]
    ref = np.pad(x_val, [(0, 0), (0, 0), (0, 0), (2, 1)], mode="wrap")
    np.testing.assert_allclose(y.astype(np.float32), ref, rtol=1e-3, atol=1e-3)


def test_fp16_flag_offers_half_to_plugins() -> None:
    v2 = circ_pad_v2.register()
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (4, 4))
    layer = network.add_plugin_v2([x], v2.create_plugin("p", fields(pads=[1, 0])))
    layer.get_output(0).name = "y"
    network.mark_output(layer.get_output(0))
    engine = _engine(network, builder, flags=[trt.BuilderFlag.FP16])
    inspector = engine.create_engine_inspector()
    plugin_layer = next(
        inspector.layer_info(i) for i in range(engine.num_layers) if inspector.layer_info(i)["kind"] == "plugin"
    )
    assert plugin_layer["inputs"][0]["dtype"] == "HALF"
    x_val = np.arange(16, dtype=np.float32).reshape(4, 4)
    np.testing.assert_array_equal(run(engine.create_execution_context(), {"x": x_val})["y"], np.pad(x_val, [(0, 0), (1, 0)], mode="wrap"))


def test_data_dependent_output_through_output_allocator() -> None:
    creator = nonzero_v3.register()
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (-1, -1))
    layer = network.add_plugin_v3([x], [], creator.create_plugin("nz", trt.PluginFieldCollection(), trt.TensorRTPhase.BUILD))
    layer.get_output(0).name = "indices"
    network.mark_output(layer.get_output(0))
    engine = _engine(network, builder, [{"x": ((1, 1), (4, 4), (16, 16))}])
    assert engine.get_tensor_shape("indices") == (-1, 2)
    context = engine.create_execution_context()

    class Allocator(trt.IOutputAllocator):
        def __init__(self) -> None:
            super().__init__()
            self.buffer = np.zeros(0, np.uint8)
            self.shape: tuple[int, ...] = ()

        def reallocate_output(self, tensor_name: str, memory: int, size: int, alignment: int) -> int:
            if self.buffer.nbytes < size:
                self.buffer = np.zeros(size, np.uint8)
            return self.buffer.ctypes.data

        def notify_shape(self, tensor_name: str, shape: trt.Dims) -> None:
            self.shape = tuple(shape)

    allocator = Allocator()
    context.set_output_allocator("indices", allocator)
    rng = np.random.default_rng(4)
    for shape in [(3, 5), (16, 16), (1, 1), (4, 2)]:
        x_val = (rng.random(shape) > 0.6).astype(np.float32)
        context.set_input_shape("x", shape)
        context.set_tensor_address("x", x_val.ctypes.data)
        context.execute_async_v3(0)
        expected = np.argwhere(x_val)
        assert allocator.shape == expected.shape
        got = allocator.buffer[: expected.size * 4].view(np.int32).reshape(expected.shape)
        np.testing.assert_array_equal(got, expected)
    assert context.get_tensor_shape("indices") == allocator.shape


def test_data_dependent_output_needs_an_allocator() -> None:
    creator = nonzero_v3.register()
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (3, 3))
    layer = network.add_plugin_v3([x], [], creator.create_plugin("nz", trt.PluginFieldCollection(), trt.TensorRTPhase.BUILD))
    network.mark_output(layer.get_output(0))
    context = _engine(network, builder).create_execution_context()
    x_val = np.eye(3, dtype=np.float32)
    context.set_tensor_address("x", x_val.ctypes.data)
    with pytest.raises(trt.ExecutionError, match="data-dependent shape; set an IOutputAllocator"):
        context.execute_async_v3(0)


def test_two_profiles_and_execute_v2() -> None:
    v2 = circ_pad_v2.register()
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (-1, 2))
    layer = network.add_plugin_v2([x], v2.create_plugin("p", fields(pads=[0, 2])))
    network.mark_output(layer.get_output(0))
    engine = _engine(network, builder, [{"x": ((1, 2), (2, 2), (4, 2))}, {"x": ((5, 2), (8, 2), (64, 2))}])
    assert engine.num_optimization_profiles == 2
    assert engine.get_tensor_profile_shape("x", 1) == [(5, 2), (8, 2), (64, 2)]
    context = engine.create_execution_context()
    assert not context.set_input_shape("x", (10, 2))  # outside profile 0
    context.set_optimization_profile_async(1, 0)
    assert context.active_optimization_profile == 1
    x_val = np.arange(20, dtype=np.float32).reshape(10, 2)
    assert context.set_input_shape("x", (10, 2))
    y = np.empty((10, 4), np.float32)
    assert context.execute_v2([x_val.ctypes.data, y.ctypes.data])
    np.testing.assert_array_equal(y, np.pad(x_val, [(0, 0), (0, 2)], mode="wrap"))


def test_verbose_logger_receives_the_trace() -> None:
    class Collect(trt.ILogger):
        def __init__(self) -> None:
            super().__init__()
            self.lines: list[str] = []

        def log(self, severity: trt.Severity, msg: str) -> None:
            self.lines.append(msg)

    logger = Collect()
    v2 = circ_pad_v2.register()
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (2, 2))
    layer = network.add_plugin_v2([x], v2.create_plugin("p", fields(pads=[1, 1])))
    network.mark_output(layer.get_output(0))
    plan = build(network, builder)
    engine = trt.Runtime(logger).deserialize_cuda_engine(plan)
    run(engine.create_execution_context(), {"x": np.ones((2, 2), np.float32)})
    plugin_lines = [line for line in logger.lines if line.startswith("[plugin]")]
    assert any("CircPadPlugin v1.supports_format_combination" in line and "build" in line for line in plugin_lines)
    assert any("CircPadPlugin v1.enqueue" in line and "inference" in line for line in plugin_lines)


def test_engine_and_inspector_surface() -> None:
    v2 = circ_pad_v2.register()
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    network.name = "surface"
    x = network.add_input("x", trt.float32, (-1, 2))
    layer = network.add_plugin_v2([x], v2.create_plugin("p", fields(pads=[1, 1])))
    layer.name = "padder"
    layer.get_output(0).name = "y"
    network.mark_output(layer.get_output(0))
    plan = build(network, builder, [{"x": ((1, 2), (2, 2), (3, 2))}])
    engine = trt.Runtime(LOGGER).deserialize_cuda_engine(plan)
    assert engine.name == "surface"
    assert bytes(engine.serialize()) == bytes(plan)
    assert [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)] == ["x", "y"]
    assert engine.get_tensor_mode("x") == trt.TensorIOMode.INPUT
    assert engine.get_tensor_mode("y") == trt.TensorIOMode.OUTPUT
    assert engine.get_tensor_mode("nope") == trt.TensorIOMode.NONE
    assert engine.get_tensor_dtype("y") == trt.float32
    line = engine.create_engine_inspector().get_layer_information(0, trt.LayerInformationFormat.ONELINE)
    assert line.startswith("padder [CircPadPlugin v1]")
    context = engine.create_execution_context()
    assert context.infer_shapes() == ["x"]
    assert context.get_tensor_shape("y") == (-1, 4)
    context.set_input_shape("x", (3, 2))
    assert context.infer_shapes() == []
    assert context.get_tensor_shape("y") == (3, 4)
