"""Mirrors TensorRT's ``samples/python/python_plugin/circ_pad_plugin_multi_tactic.py`` (gaps 7, 8).

Two CircPadPlugin (IPluginV3) nodes in an ONNX model, each offering two tactics (the sample's
Torch and Triton kernels; two NumPy implementations here), with ``timing_cache_id = ""`` so
the second, identical instance is not timed again. ``per_format_tactics`` restricts HALF to one
tactic. The ONNX model is built with ``onnx.helper`` instead of onnx-graphsurgeon.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np
import pytest
from compat_helpers import LOGGER, build_plan, deserialize, infer
from onnx import TensorProto, helper

import plugrt as trt
from plugrt.engine.plan import EnginePlan


class Tactic(IntEnum):
    PAD = 1  # the sample's TORCH tactic: a library call
    INDEX = 2  # the sample's TRITON tactic: index arithmetic, like the kernel


class CircPadPlugin(trt.IPluginV3, trt.IPluginV3OneCore, trt.IPluginV3OneBuild, trt.IPluginV3OneRuntime):
    timed: list[tuple[int, tuple[int, ...], tuple[int, ...]]] = []  # (tactic, input dims, output dims) per timing enqueue

    def __init__(self, fc=None, phase=None):
        trt.IPluginV3.__init__(self)
        trt.IPluginV3OneCore.__init__(self)
        trt.IPluginV3OneBuild.__init__(self)
        trt.IPluginV3OneRuntime.__init__(self)
        self.pads = []
        self.X_shape = []
        self.per_format_tactics = False
        self.curr_type = None
        self.num_outputs = 1
        self.plugin_namespace = ""
        self.plugin_name = "CompatCircPadMultiTactic"
        self.plugin_version = "1"
        self.timing_cache_id = ""
        self.tactic = None
        if fc is not None:
            for f in fc:
                if f.name == "pads":
                    self.pads = f.data
                elif f.name == "per_format_tactics":
                    self.per_format_tactics = int(f.data[0])  # the sample's int(f.data) needs NumPy < 2.4
        if phase is not None:
            self.phase = phase

    def get_capability_interface(self, type):
        return self

    def get_output_data_types(self, input_types):
        return [input_types[0]]

    def get_output_shapes(self, inputs, shape_inputs, exprBuilder):
        output_dims = trt.DimsExprs(inputs[0])
        for i in range(np.size(self.pads) // 2):
            output_dims[len(output_dims) - i - 1] = exprBuilder.operation(
                trt.DimensionOperation.SUM,
                inputs[0][len(output_dims) - i - 1],
                exprBuilder.constant(self.pads[i * 2] + self.pads[i * 2 + 1]),
            )
        return [output_dims]

    def get_fields_to_serialize(self):
        return trt.PluginFieldCollection([
            trt.PluginField("pads", self.pads, trt.PluginFieldType.INT32),
            trt.PluginField("per_format_tactics", np.array([self.per_format_tactics], dtype=np.int32), trt.PluginFieldType.INT32),
        ])

    def configure_plugin(self, inp, out):
        assert inp[0].desc.type == trt.float32 or inp[0].desc.type == trt.float16
        self.curr_type = inp[0].desc.type

    def on_shape_change(self, inp, out):
        if self.phase == trt.TensorRTPhase.RUNTIME and self.per_format_tactics and inp[0].type == trt.float16:
            assert self.tactic == Tactic.INDEX
        X_dims = inp[0].dims
        self.X_shape = np.zeros((len(X_dims),))
        for i in range(len(X_dims)):
            self.X_shape[i] = X_dims[i]

    def supports_format_combination(self, pos, in_out, num_inputs):
        desc = in_out[pos].desc
        if desc.format != trt.TensorFormat.LINEAR:
            return False
        if pos == 0:
            return desc.type == trt.DataType.FLOAT or desc.type == trt.DataType.HALF
        if pos == 1:
            return in_out[0].desc.type == desc.type
        raise AssertionError(pos)

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        x = trt.as_array(inputs[0], input_desc[0])
        y = trt.as_array(outputs[0], output_desc[0])
        # as the sample's Triton kernel does, size the work from the *output* descriptor
        out_dims = [int(d) for d in output_desc[0].dims]
        if self.phase == trt.TensorRTPhase.BUILD:
            CircPadPlugin.timed.append((int(self.tactic), tuple(input_desc[0].dims), tuple(out_dims)))
        pads = [int(p) for p in self.pads]
        if self.tactic == Tactic.PAD:
            y[...] = np.pad(x, [(0, 0), (0, 0), (pads[0], pads[1]), (pads[2], pads[3])], mode="wrap")
        elif self.tactic == Tactic.INDEX:
            n = len(out_dims)
            before = [0] * (n - len(pads) // 2) + [pads[2 * i] for i in range(len(pads) // 2)]
            grids = np.indices(out_dims, sparse=True)
            source = tuple((g - b) % s for g, b, s in zip(grids, before, self.X_shape.astype(int)))
            y[...] = x[source]
        else:
            raise RuntimeError("Invalid tactic")

    def attach_to_context(self, context):
        return self.clone()

    def get_valid_tactics(self):
        assert self.curr_type is not None
        if self.per_format_tactics and self.curr_type == trt.float16:
            return [int(Tactic.INDEX)]
        return [int(Tactic.PAD), int(Tactic.INDEX)]

    def set_tactic(self, tactic):
        self.tactic = Tactic(tactic)

    def clone(self):
        cloned_plugin = CircPadPlugin()
        cloned_plugin.__dict__.update(self.__dict__)
        return cloned_plugin


class CircPadPluginCreator(trt.IPluginCreatorV3One):
    def __init__(self):
        trt.IPluginCreatorV3One.__init__(self)
        self.name = "CompatCircPadMultiTactic"
        self.plugin_namespace = ""
        self.plugin_version = "1"
        self.field_names = trt.PluginFieldCollection([
            trt.PluginField("pads", np.array([]), trt.PluginFieldType.INT32),
            trt.PluginField("per_format_tactics", np.array([]), trt.PluginFieldType.INT32),
        ])

    def create_plugin(self, name, fc, phase):
        return CircPadPlugin(fc, phase)


@pytest.fixture(scope="module", autouse=True)
def creator():  # type: ignore[no-untyped-def]
    made = CircPadPluginCreator()
    trt.get_plugin_registry().register_creator(made, "")
    yield made
    trt.get_plugin_registry().deregister_creator(made)


PADS = (1, 1, 1, 1)
SHAPE = (10, 3, 32, 32)


def _model(per_format: int, elem: int, second_pads: tuple[int, ...] = PADS) -> bytes:
    nodes = [
        helper.make_node(
            "CompatCircPadMultiTactic", [f"X_{n}"], [f"Y_{n}"], name=f"CircPadPlugin_{n}", pads=list(pads),
            per_format_tactics=helper.make_tensor("t", TensorProto.INT32, [1], [per_format]),
        )
        for n, pads in (("A", PADS), ("B", second_pads))
    ]
    graph = helper.make_graph(
        nodes,
        "multi_tactic",
        [helper.make_tensor_value_info(f"X_{n}", elem, SHAPE) for n in "AB"],
        [helper.make_tensor_value_info(f"Y_{n}", elem, None) for n in "AB"],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)]).SerializeToString()


def _build(model: bytes, flags=()) -> bytes:  # type: ignore[no-untyped-def]
    builder = trt.Builder(LOGGER)
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    parser = trt.OnnxParser(network, LOGGER)
    assert parser.parse(model)
    return build_plan(builder, network, flags=flags)


@pytest.mark.parametrize(("precision", "elem"), [(np.float32, TensorProto.FLOAT), (np.float16, TensorProto.FLOAT16)])
@pytest.mark.parametrize("per_format", [0, 1])
def test_multi_tactic_sample(precision: type, elem: int, per_format: int) -> None:
    CircPadPlugin.timed = []
    plan = _build(_model(per_format, elem))
    expected_tactics = [2] if per_format and precision is np.float16 else [1, 2]
    # gap 8: the second identical instance (same timing_cache_id, I/O) reuses the first one's timing
    assert sorted({t for t, _, _ in CircPadPlugin.timed}) == expected_tactics
    assert len(CircPadPlugin.timed) == 3 * len(expected_tactics)
    # gap 7: inputs and outputs are described consistently, at the profile's opt dims
    padded = (10, 3, 34, 34)
    assert {(i, o) for _, i, o in CircPadPlugin.timed} == {(SHAPE, padded)}
    tactics = [layer.tactic for layer in EnginePlan.from_bytes(plan).layers if layer.is_plugin]
    assert len(tactics) == 2 and tactics[0] == tactics[1] and tactics[0] in expected_tactics  # the shared timing
    with trt.trace_plugin_calls() as trace:
        engine = deserialize(plan)
    assert trace.methods(phase="deserialize").count("set_tactic") == 2
    rng = np.random.default_rng(0)
    X_A, X_B = (rng.normal(size=SHAPE).astype(precision) for _ in range(2))
    out = infer(engine.create_execution_context(), {"X_A": X_A, "X_B": X_B})
    pad_width = [[0, 0], [0, 0], [PADS[0], PADS[1]], [PADS[2], PADS[3]]]
    np.testing.assert_array_equal(out["Y_A"], np.pad(X_A, pad_width, "wrap"))
    np.testing.assert_array_equal(out["Y_B"], np.pad(X_B, pad_width, "wrap"))


def test_other_io_shapes_are_timed_separately() -> None:
    CircPadPlugin.timed = []
    _build(_model(0, TensorProto.FLOAT, second_pads=(2, 2, 2, 2)))
    assert len(CircPadPlugin.timed) == 2 * 3 * 2  # another output shape: its own timing


def test_different_ids_are_timed_separately(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    original = CircPadPlugin.__init__

    def id_from_pads(self, fc=None, phase=None):  # type: ignore[no-untyped-def]
        original(self, fc, phase)
        self.timing_cache_id = ",".join(str(int(p)) for p in self.pads)  # the creation state, as TensorRT advises

    monkeypatch.setattr(CircPadPlugin, "__init__", id_from_pads)
    CircPadPlugin.timed = []
    _build(_model(0, TensorProto.FLOAT, second_pads=(2, 0, 0, 2)))  # same I/O shapes, other pads
    assert len(CircPadPlugin.timed) == 2 * 3 * 2
    CircPadPlugin.timed = []
    _build(_model(0, TensorProto.FLOAT))  # same pads: same id, timed once
    assert len(CircPadPlugin.timed) == 3 * 2


def test_disable_timing_cache_times_every_instance() -> None:
    CircPadPlugin.timed = []
    _build(_model(0, TensorProto.FLOAT), flags=[trt.BuilderFlag.DISABLE_TIMING_CACHE])
    assert len(CircPadPlugin.timed) == 2 * 3 * 2


def test_unset_timing_cache_id_times_every_instance(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    original = CircPadPlugin.__init__

    def without_id(self, fc=None, phase=None):  # type: ignore[no-untyped-def]
        original(self, fc, phase)
        del self.timing_cache_id  # back to the class default: None, i.e. no timing cache

    monkeypatch.setattr(CircPadPlugin, "__init__", without_id)
    CircPadPlugin.timed = []
    _build(_model(0, TensorProto.FLOAT))
    assert len(CircPadPlugin.timed) == 2 * 3 * 2


def test_timing_cache_id_must_be_a_string(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    original = CircPadPlugin.__init__

    def bad_id(self, fc=None, phase=None):  # type: ignore[no-untyped-def]
        original(self, fc, phase)
        self.timing_cache_id = 7

    monkeypatch.setattr(CircPadPlugin, "__init__", bad_id)
    with pytest.raises(trt.PlugrtError, match="timing_cache_id must be a str or None, got 7"):
        _build(_model(0, TensorProto.FLOAT))


def test_timing_describes_outputs_at_opt_like_the_inputs() -> None:
    """Gap 7: with a dynamic profile (opt below max) the output descriptor is the opt shape too."""
    CircPadPlugin.timed = []
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x = network.add_input("X", trt.float32, (-1, 3, -1, 32))
    fields = trt.PluginFieldCollection([
        trt.PluginField("pads", np.array(PADS, dtype=np.int32), trt.PluginFieldType.INT32),
        trt.PluginField("per_format_tactics", np.array([0], dtype=np.int32), trt.PluginFieldType.INT32),
    ])
    plugin = CircPadPluginCreator().create_plugin("pad", fields, trt.TensorRTPhase.BUILD)
    layer = network.add_plugin_v3([x], [], plugin)
    layer.get_output(0).name = "Y"
    network.mark_output(layer.get_output(0))
    plan = build_plan(builder, network, profiles=[{"X": ((1, 3, 8, 32), (4, 3, 16, 32), (10, 3, 32, 32))}])
    assert {(i, o) for _, i, o in CircPadPlugin.timed} == {((4, 3, 16, 32), (4, 3, 18, 34))}
    X = np.random.default_rng(5).normal(size=(2, 3, 9, 32)).astype(np.float32)
    out = infer(deserialize(plan).create_execution_context(), {"X": X})
    np.testing.assert_array_equal(out["Y"], np.pad(X, [(0, 0), (0, 0), (1, 1), (1, 1)], "wrap"))
