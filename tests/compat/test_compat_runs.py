"""Gaps 6 and 9: data-dependent shapes are recomputed every run; FP16 never changes declared I/O types."""

from __future__ import annotations

import numpy as np
import pytest
from compat_helpers import LOGGER, HostOutputAllocator, build_plan, deserialize, infer

import plugrt as trt


class GuardedNonZero(trt.IPluginV3, trt.IPluginV3OneCore, trt.IPluginV3OneBuild, trt.IPluginV3OneRuntime):
    """NonZero as in TensorRT's non_zero_plugin sample (INT32 indices, INT64 size tensor).

    ``enqueue`` checks what it is given: the indices buffer must hold the upper bound, which
    is what it writes into before the count is known.
    """

    def __init__(self) -> None:
        trt.IPluginV3.__init__(self)
        trt.IPluginV3OneCore.__init__(self)
        trt.IPluginV3OneBuild.__init__(self)
        trt.IPluginV3OneRuntime.__init__(self)
        self.num_outputs = 2
        self.plugin_namespace = ""
        self.plugin_name = "CompatGuardedNonZero"
        self.plugin_version = "1"
        self.seen_output_dims: list[tuple[int, ...]] = []

    def get_capability_interface(self, type):
        return self

    def get_output_data_types(self, input_types):
        return [trt.DataType.INT32, trt.DataType.INT64]

    def get_output_shapes(self, inputs, shape_inputs, exprBuilder):
        output_dims = [trt.DimsExprs(2), trt.DimsExprs(0)]
        upper = exprBuilder.operation(trt.DimensionOperation.PROD, inputs[0][0], inputs[0][1])
        opt = exprBuilder.operation(trt.DimensionOperation.FLOOR_DIV, upper, exprBuilder.constant(2))
        output_dims[0][0] = exprBuilder.declare_size_tensor(1, opt, upper)
        output_dims[0][1] = exprBuilder.constant(2)
        return output_dims

    def supports_format_combination(self, pos, in_out, num_inputs):
        desc = in_out[pos].desc
        wanted = [(trt.DataType.FLOAT,), (trt.DataType.INT32,), (trt.DataType.INT64,)][pos]
        return desc.format == trt.TensorFormat.LINEAR and desc.type in wanted

    def configure_plugin(self, inp, out):
        pass

    def on_shape_change(self, inp, out):
        pass

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        x = trt.as_array(inputs[0], input_desc[0])
        upper = x.size
        self.seen_output_dims.append(tuple(output_desc[0].dims))
        if tuple(output_desc[0].dims) != (upper, 2):
            raise RuntimeError(f"indices buffer described as {tuple(output_desc[0].dims)}, not the upper bound {(upper, 2)}")
        found = np.argwhere(x).astype(np.int32)
        flat = trt.as_array(outputs[0], trt.PluginTensorDesc(trt.Dims((upper * 2,)), trt.DataType.INT32))
        flat[: found.size] = found.reshape(-1)
        trt.as_array(outputs[1], output_desc[1])[...] = len(found)

    def attach_to_context(self, context):
        return self.clone()

    def set_tactic(self, tactic):
        pass

    def get_fields_to_serialize(self):
        return trt.PluginFieldCollection([])

    def clone(self):
        copy = GuardedNonZero()
        copy.__dict__.update(self.__dict__)
        copy.seen_output_dims = []
        return copy


class GuardedNonZeroCreator(trt.IPluginCreatorV3One):
    def __init__(self) -> None:
        trt.IPluginCreatorV3One.__init__(self)
        self.name = "CompatGuardedNonZero"
        self.plugin_namespace = ""
        self.plugin_version = "1"
        self.field_names = trt.PluginFieldCollection([])

    def create_plugin(self, name, fc, phase):
        return GuardedNonZero()


@pytest.fixture(scope="module")
def nonzero_creator():  # type: ignore[no-untyped-def]
    creator = GuardedNonZeroCreator()
    trt.get_plugin_registry().register_creator(creator, "")
    yield creator
    trt.get_plugin_registry().deregister_creator(creator)


def _rerun_same_shape(engine: trt.ICudaEngine, output: str, reference, runs: int = 40) -> HostOutputAllocator:  # type: ignore[no-untyped-def]
    context = engine.create_execution_context()
    allocators: dict[str, HostOutputAllocator] = {}
    rng = np.random.default_rng(11)
    counts = set()
    for run in range(runs):
        # the same shape every time; the data (and so the count) changes, down to none and all
        density = [0.0, 1.0, 0.5, 0.1, 0.9][run % 5] if run < 10 else rng.random()
        x = (rng.random((6, 5)) < density).astype(np.float32)
        got = infer(context, {"x": x}, allocators)[output]
        expected = reference(x)
        assert allocators[output].shape == expected.shape, f"run {run}"
        np.testing.assert_array_equal(got, expected, err_msg=f"run {run}")
        counts.add(expected.shape)
    assert len(counts) > 5
    return allocators[output]


def test_v3_size_tensor_output_is_recomputed_every_run(nonzero_creator) -> None:  # type: ignore[no-untyped-def]
    """Gap 6 (memory safety): the same input shape with other data must give the new size."""
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (6, 5))
    layer = network.add_plugin_v3([x], [], nonzero_creator.create_plugin("nz", trt.PluginFieldCollection([]), trt.TensorRTPhase.BUILD))
    layer.get_output(0).name = "Y"
    network.mark_output(layer.get_output(0))
    engine = deserialize(build_plan(builder, network))
    allocator = _rerun_same_shape(engine, "Y", lambda x: np.argwhere(x).astype(np.int32))
    # every run asks the allocator for the size of that run's result, never the previous one's
    assert len(allocator.sizes) == 40


def test_nonzero_operator_output_is_recomputed_every_run() -> None:
    """Gap 6 with the NonZero operator the ONNX importer uses."""
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (6, 5))
    layer = network.add_operator("nonzero", [x], num_outputs=2)
    layer.get_output(0).name = "Y"
    network.mark_output(layer.get_output(0))
    engine = deserialize(build_plan(builder, network))
    _rerun_same_shape(engine, "Y", lambda x: np.stack(np.nonzero(x)).astype(np.int64))


def test_rebinding_an_input_between_runs_keeps_sizes_fresh(nonzero_creator) -> None:  # type: ignore[no-untyped-def]
    """A new input address (a re-bind) after a run must not freeze the last run's size."""
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (4, 4))
    layer = network.add_plugin_v3([x], [], nonzero_creator.create_plugin("nz", trt.PluginFieldCollection([]), trt.TensorRTPhase.BUILD))
    layer.get_output(0).name = "Y"
    network.mark_output(layer.get_output(0))
    context = deserialize(build_plan(builder, network)).create_execution_context()
    allocators: dict[str, HostOutputAllocator] = {}
    for x_val in (np.eye(4, dtype=np.float32), np.ones((4, 4), np.float32), np.zeros((4, 4), np.float32), np.eye(4, dtype=np.float32)):
        got = infer(context, {"x": x_val.copy()}, allocators)["Y"]  # a new array, so a new address each run
        np.testing.assert_array_equal(got, np.argwhere(x_val))


class HalfOrFloatPad(trt.IPluginV2DynamicExt):
    """Prefers HALF when offered it (as the samples' FP16 kernels do); output type = input type."""

    def __init__(self) -> None:
        trt.IPluginV2DynamicExt.__init__(self)
        self.num_outputs = 1
        self.plugin_type = "CompatHalfOrFloatPad"
        self.plugin_version = "1"
        self.plugin_namespace = ""
        self.enqueued_types: list[trt.DataType] = []

    def get_output_datatype(self, index, input_types):
        return input_types[0]

    def get_output_dimensions(self, output_index, inputs, exprBuilder):
        out = trt.DimsExprs(inputs[0])
        out[1] = exprBuilder.operation(trt.DimensionOperation.SUM, inputs[0][1], exprBuilder.constant(2))
        return out

    def supports_format_combination(self, pos, in_out, num_inputs):
        desc = in_out[pos]
        if desc.format != trt.TensorFormat.LINEAR:
            return False
        if pos == 0:
            return desc.type in (trt.DataType.FLOAT, trt.DataType.HALF)
        return desc.type == in_out[0].type

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        x = trt.as_array(inputs[0], input_desc[0])
        trt.as_array(outputs[0], output_desc[0])[...] = np.pad(x, [(0, 0), (1, 1)], mode="wrap")

    def serialize(self):
        return b""

    def clone(self):
        return HalfOrFloatPad()


class HalfOrFloatPadCreator(trt.IPluginCreator):
    def __init__(self) -> None:
        trt.IPluginCreator.__init__(self)
        self.name = "CompatHalfOrFloatPad"
        self.plugin_version = "1"
        self.plugin_namespace = ""
        self.field_names = trt.PluginFieldCollection([])

    def create_plugin(self, name, fc):
        return HalfOrFloatPad()

    def deserialize_plugin(self, name, data):
        return HalfOrFloatPad()


@pytest.fixture(scope="module")
def pad_creator():  # type: ignore[no-untyped-def]
    creator = HalfOrFloatPadCreator()
    trt.get_plugin_registry().register_creator(creator, "")
    yield creator
    trt.get_plugin_registry().deregister_creator(creator)


@pytest.mark.parametrize("flag", [trt.BuilderFlag.FP16, trt.BuilderFlag.BF16, trt.BuilderFlag.INT8])
def test_reduced_precision_flags_keep_declared_io_types(pad_creator, flag: trt.BuilderFlag) -> None:  # type: ignore[no-untyped-def]
    """Gap 9: with FP16 on the plugin may run in HALF, but a FLOAT output stays FLOAT for the caller."""
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (3, 4))
    first = network.add_plugin_v2([x], pad_creator.create_plugin("a", trt.PluginFieldCollection([])))
    second = network.add_plugin_v2([first.get_output(0)], pad_creator.create_plugin("b", trt.PluginFieldCollection([])))
    second.get_output(0).name = "y"
    first.get_output(0).name = "mid"
    network.mark_output(second.get_output(0))
    network.mark_output(first.get_output(0))
    engine = deserialize(build_plan(builder, network, flags=[flag]))
    assert engine.get_tensor_dtype("x") == trt.float32
    assert engine.get_tensor_dtype("y") == trt.float32
    assert engine.get_tensor_dtype("mid") == trt.float32
    x_val = (np.arange(12, dtype=np.float32).reshape(3, 4) + 0.25)
    out = infer(engine.create_execution_context(), {"x": x_val})
    assert out["y"].dtype == np.float32
    np.testing.assert_array_equal(out["mid"], np.pad(x_val, [(0, 0), (1, 1)], mode="wrap"))
    mid = np.pad(x_val, [(0, 0), (1, 1)], mode="wrap")
    np.testing.assert_array_equal(out["y"], np.pad(mid, [(0, 0), (1, 1)], mode="wrap"))
    if flag == trt.BuilderFlag.FP16:  # the plugins ran in HALF, one cast in, one out per boundary, none between
        info = engine.create_engine_inspector()
        kinds = [info.layer_info(i)["kind"] for i in range(engine.num_layers)]
        plugin_types = [info.layer_info(i)["inputs"][0]["dtype"] for i in range(engine.num_layers) if kinds[i] == "plugin"]
        assert plugin_types == ["HALF", "HALF"]
        assert kinds.count("reformat") == 3


def test_fp16_keeps_a_half_network_half(pad_creator) -> None:  # type: ignore[no-untyped-def]
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float16, (2, 3))
    layer = network.add_plugin_v2([x], pad_creator.create_plugin("a", trt.PluginFieldCollection([])))
    layer.get_output(0).name = "y"
    network.mark_output(layer.get_output(0))
    engine = deserialize(build_plan(builder, network, flags=[trt.BuilderFlag.FP16]))
    assert engine.get_tensor_dtype("y") == trt.float16
    assert engine.num_layers == 1
