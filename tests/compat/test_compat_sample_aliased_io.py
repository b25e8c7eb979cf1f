"""Mirrors TensorRT's ``samples/python/aliased_io_plugin`` (gap 5: in-place plugin outputs).

The sample's ScatterAddPlugin (IPluginV3OneBuildV2) adds ``src`` into ``X`` in place (output 0
aliases input 0) and counts each index (output 1); a small GNN classifier follows (cast,
FLOOR_DIV, matrix multiply, ReLU, softmax). Its Triton kernel is replaced by NumPy here.
"""

from __future__ import annotations

import numpy as np
import pytest
from compat_helpers import build_plan, deserialize, infer

import plugrt as trt


class ScatterAddPlugin(trt.IPluginV3, trt.IPluginV3OneCore, trt.IPluginV3OneBuildV2, trt.IPluginV3OneRuntime):
    def __init__(self, fc=None):
        trt.IPluginV3.__init__(self)
        trt.IPluginV3OneCore.__init__(self)
        trt.IPluginV3OneBuildV2.__init__(self)
        trt.IPluginV3OneRuntime.__init__(self)
        self.plugin_namespace = ""
        self.plugin_name = "CompatScatterAddPlugin"
        self.plugin_version = "1"
        self.num_outputs = 2
        self.pointers: list[tuple[int, int]] = []

    def get_capability_interface(self, type):
        return self

    def get_output_data_types(self, input_types):
        self.type = input_types[0]
        return [input_types[0], trt.int64]

    def get_fields_to_serialize(self):
        return trt.PluginFieldCollection([])

    def get_output_shapes(self, inputs, shape_inputs, exprBuilder):
        return [inputs[0], trt.DimsExprs([inputs[0][0], exprBuilder.constant(1)])]

    def configure_plugin(self, inp, out):
        pass

    def on_shape_change(self, inp, out):
        pass

    def supports_format_combination(self, pos: int, in_out: list[trt.PluginTensorDesc], num_inputs: int):
        assert num_inputs == 3
        desc = in_out[pos].desc
        if desc.format != trt.TensorFormat.LINEAR:
            return False
        if pos in [0, 1, 3]:
            return desc.type == self.type
        return desc.type == trt.int64

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        self.pointers.append((inputs[0], outputs[0]))
        target = trt.as_array(inputs[0], input_desc[0])  # read-modify-write: the aliased buffer
        src = trt.as_array(inputs[1], input_desc[1])
        idx = trt.as_array(inputs[2], input_desc[2])
        counts = trt.as_array(outputs[1], output_desc[1])
        counts[...] = 0
        np.add.at(target.reshape(-1), idx - 1, src)
        np.add.at(counts.reshape(-1), idx - 1, 1)

    def attach_to_context(self, context):
        return self.clone()

    def set_tactic(self, tactic):
        pass

    def get_aliased_input(self, output_index: int):
        if output_index == 0:
            return 0
        return -1

    def clone(self):
        cloned_plugin = ScatterAddPlugin()
        cloned_plugin.__dict__.update(self.__dict__)
        cloned_plugin.pointers = []
        return cloned_plugin


class ScatterAddPluginCreator(trt.IPluginCreatorV3One):
    def __init__(self):
        trt.IPluginCreatorV3One.__init__(self)
        self.name = "CompatScatterAddPlugin"
        self.plugin_namespace = ""
        self.plugin_version = "1"
        self.field_names = trt.PluginFieldCollection([])
        self.made: list[ScatterAddPlugin] = []

    def create_plugin(self, name, fc, phase):
        plugin = ScatterAddPlugin()
        self.made.append(plugin)
        return plugin


@pytest.fixture
def creator():  # type: ignore[no-untyped-def]
    made = ScatterAddPluginCreator()
    trt.get_plugin_registry().register_creator(made, "")
    yield made
    trt.get_plugin_registry().deregister_creator(made)


NODES = np.array([1.0, 3.0, 5.0, 7.0], dtype=np.float32).reshape(-1, 1)
EDGES = np.array([[0, 1], [1, 2], [2, 3], [3, 0], [0, 2], [1, 3]], dtype=np.int64)


def _reference(W: np.ndarray) -> np.ndarray:
    aggregated = np.zeros_like(NODES)
    np.add.at(aggregated[:, 0], EDGES[:, 1], NODES[EDGES[:, 0], 0])
    counts = np.bincount(EDGES[:, 1]).reshape(-1, 1).astype(np.float32)
    y = W @ np.floor_divide(aggregated, counts).T
    y = np.maximum(y, 0)
    e = np.exp(y - y.max(axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)


def _gnn(aliased: bool, logger: trt.ILogger | None = None) -> tuple[bytes, np.ndarray]:
    builder = trt.Builder(logger or trt.Logger(trt.Logger.WARNING))
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    W = np.random.default_rng(0).standard_normal((3, 1)).astype(np.float32)
    input_x = network.add_input(name="X", dtype=trt.float32, shape=NODES.shape)
    input_src = network.add_input(name="src", dtype=trt.float32, shape=(len(EDGES),))
    input_idx = network.add_input(name="idx", dtype=trt.int64, shape=(len(EDGES),))
    w_t = network.add_input(name="W", dtype=trt.float32, shape=W.shape)
    out = network.add_plugin_v3([input_x, input_src, input_idx], [], ScatterAddPlugin())
    cast_layer = network.add_cast(out.get_output(1), trt.float32)
    div_layer = network.add_elementwise(out.get_output(0), cast_layer.get_output(0), op=trt.ElementWiseOperation.FLOOR_DIV)
    matmul_layer = network.add_matrix_multiply(
        w_t, trt.MatrixOperation.NONE, div_layer.get_output(0), trt.MatrixOperation.TRANSPOSE
    )
    relu_layer = network.add_activation(matmul_layer.get_output(0), type=trt.ActivationType.RELU)
    softmax_layer = network.add_softmax(relu_layer.get_output(0))
    softmax_layer.get_output(0).name = "softmax"
    network.mark_output(tensor=softmax_layer.get_output(0))
    config = builder.create_builder_config()
    if aliased:
        config.set_preview_feature(trt.PreviewFeature.ALIASED_PLUGIN_IO_10_03, True)
    return build_plan(builder, network, config=config), W


def _inputs(W: np.ndarray) -> dict[str, np.ndarray]:
    return {"X": np.zeros_like(NODES), "src": NODES[EDGES[:, 0], 0].copy(), "idx": EDGES[:, 1] + 1, "W": W}


class Messages(trt.ILogger):
    def __init__(self) -> None:
        trt.ILogger.__init__(self)
        self.lines: list[tuple[trt.ILogger.Severity, str]] = []

    def log(self, severity, msg):  # type: ignore[no-untyped-def]
        self.lines.append((severity, msg))


def test_aliased_io_sample_gives_the_reference_and_leaves_the_callers_input_alone(creator) -> None:  # type: ignore[no-untyped-def]
    logger = Messages()
    logger.min_severity = trt.ILogger.Severity.INFO
    plan, W = _gnn(aliased=True, logger=logger)
    assert any("network input the caller owns" in msg and "'X'" in msg for _, msg in logger.lines)
    engine = deserialize(plan)
    context = engine.create_execution_context()
    inputs = _inputs(W)
    for _ in range(3):  # the copy is refreshed each run: the plugin always starts from X
        out = infer(context, inputs)
        np.testing.assert_allclose(out["softmax"], _reference(W), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(inputs["X"], np.zeros_like(NODES))  # the caller's X was not written
    runtime_plugin = context._executor.steps[1].node.plugin
    assert runtime_plugin.pointers and all(i == o for i, o in runtime_plugin.pointers)


def test_without_the_preview_feature_aliasing_is_off_and_the_builder_says_so(creator) -> None:  # type: ignore[no-untyped-def]
    logger = Messages()
    with trt.trace_plugin_calls() as trace:
        _gnn(aliased=False, logger=logger)
    assert "get_aliased_input" not in trace.methods()
    warnings = [msg for severity, msg in logger.lines if severity == trt.ILogger.Severity.WARNING]
    assert any("ALIASED_PLUGIN_IO_10_03 is off" in msg and "get_aliased_input" in msg for msg in warnings)


def test_get_aliased_input_is_asked_once_per_output_after_format_negotiation(creator) -> None:  # type: ignore[no-untyped-def]
    with trt.trace_plugin_calls() as trace:
        _gnn(aliased=True)
    build = [m for m in trace.methods(phase="build") if m != "clone" and m != "get_capability_interface"]
    first_alias = build.index("get_aliased_input")
    assert build[first_alias : first_alias + 2] == ["get_aliased_input", "get_aliased_input"]
    assert max(i for i, m in enumerate(build) if m == "supports_format_combination") < first_alias
    assert build.index("configure_plugin") > first_alias + 1
