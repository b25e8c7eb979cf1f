"""Shape tensors live on the host: layers computing only shape values never run per inference.

Exported models are full of ``Shape -> Gather -> Concat -> Reshape``. The builder keeps each
shape tensor's values as expressions of the input shapes (``TensorPlan.values``); the
executor writes them once per shape change and leaves those layers out of the run, and the
layers reading them (Slice, Pad, TopK, Trilu, CumSum parameters) get the values at bind time
instead of reading device memory. That is what lets a CUDA graph hold a real export.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import plugrt as trt
import plugrt.ops.base as ops_base
from plugrt.core.errors import PlanFormatError
from plugrt.engine.plan import EnginePlan, host_computed, profile_envs, tensor_max_bytes
from plugrt.engine.plan_format import PlanContents, decode_plan, encode_plan

from export_graphs import bert_attention_reshape, conv_length_chain, onnx_model

_SHAPE_KINDS = {"shape", "size"}


def _ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray], types: dict[str, int]) -> list[np.ndarray]:
    """onnxruntime's outputs (the graphs leave output types open; ``types`` declares them)."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    del model.graph.output[:]
    model.graph.output.extend(helper.make_tensor_value_info(n, t, None) for n, t in types.items())
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _no_device_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(array: object) -> list[int]:
        raise AssertionError("a kernel read shape values back from its input array during the run")

    monkeypatch.setattr(ops_base, "host_ints", refuse)


def test_shape_layers_leave_the_run_and_results_follow_every_shape_change(monkeypatch: pytest.MonkeyPatch) -> None:
    """BERT's head split/merge: every Shape/Gather/Slice/Concat of shape values is a host step."""
    model = bert_attention_reshape()
    compiled = trt.compile(model, shapes={"x": ((1, 2, 768), (1, 16, 768), (4, 64, 768))})
    executor = compiled.context._executor
    plan = compiled.engine.plan
    host = [step for step in executor.steps if step.host]
    kinds = {step.layer.kind for step in host}
    assert _SHAPE_KINDS & kinds and {"gather", "concatenation", "slice"} & kinds
    for step in executor.steps:  # a Shape layer is never left to run
        if step.layer.kind in _SHAPE_KINDS:
            assert step.host or step.constant, step.layer.name
    _no_device_reads(monkeypatch)
    for batch, seq in ((2, 7), (1, 64), (4, 3), (2, 7)):
        x = np.random.default_rng(seq).standard_normal((batch, seq, 768)).astype(np.float32)
        got = compiled(x)["y"]
        np.testing.assert_allclose(got, _ort(model, {"x": x}, {"y": TensorProto.FLOAT})[0], rtol=1e-6, atol=1e-6)
        run = {id(step) for step, _, _ in executor._calls or []}
        assert not any(id(step) in run for step in host)
    assert all(plan.tensors[o].values is not None for step in host for o in step.layer.outputs)


def test_slice_reshape_and_expand_parameters_come_from_bound_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """wav2vec2's length arithmetic (Div, Mod, Min, Max, Where on shape values) feeding Slice's end,
    Reshape and Expand: no kernel reads a parameter back, across shape changes."""
    model = conv_length_chain()
    compiled = trt.compile(model, shapes={"audio": ((2, 20), (2, 100), (2, 4000))})
    _no_device_reads(monkeypatch)
    for samples in (23, 3999, 100, 23):
        audio = np.arange(2 * samples, dtype=np.float32).reshape(2, samples)
        out = compiled(audio)
        expected = _ort(
            model,
            {"audio": audio},
            {"positions": TensorProto.INT64, "framed": TensorProto.FLOAT, "ones": TensorProto.FLOAT},
        )
        for name, want in zip(("positions", "framed", "ones"), expected):
            np.testing.assert_array_equal(out[name], want)


def test_shape_tensors_stay_valid_while_other_tensors_reuse_memory() -> None:
    """A host-written tensor is live for the whole run: its arena range overlaps no other tensor's."""
    compiled = trt.compile(bert_attention_reshape(), shapes={"x": ((1, 2, 768), (1, 16, 768), (4, 64, 768))})
    plan = compiled.engine.plan
    low, _, high = profile_envs(plan, 0)
    offsets = plan.profiles[0].offsets
    symbols = {s for layer in plan.layers for s in layer.size_outputs.values()}
    host_tensors = {o for layer in plan.layers if host_computed(layer, plan.tensors, symbols) for o in layer.outputs}
    assert host_tensors
    spans = {i: (offsets[i], offsets[i] + tensor_max_bytes(plan.tensors[i], low, high)) for i in offsets}
    for h in host_tensors:
        for other, (lo, hi) in spans.items():
            if other != h and spans[h][1] > spans[h][0] and hi > lo:
                assert hi <= spans[h][0] or lo >= spans[h][1], (plan.tensors[h].name, plan.tensors[other].name)


def test_values_survive_the_plan_file() -> None:
    compiled = trt.compile(conv_length_chain(), shapes={"audio": ((2, 20), (2, 100), (2, 4000))})
    plan = compiled.engine.plan
    again = EnginePlan.from_bytes(plan.to_bytes())
    assert [t.values for t in again.tensors] == [t.values for t in plan.tensors]
    assert sum(t.values is not None for t in again.tensors) >= 5


def _edited(plan: bytes, edit: object) -> bytes:
    contents = decode_plan(plan)
    header = json.loads(json.dumps(contents.header))
    edit(header)  # type: ignore[operator]
    return encode_plan(PlanContents(header, contents.weights, contents.plugins))


def _valued(header: dict) -> dict:
    return next(t for t in header["tensors"] if "values" in t)


def test_a_plan_with_values_on_a_float_tensor_is_refused() -> None:
    plan = trt.compile(conv_length_chain(), shapes={"audio": ((2, 20), (2, 100), (2, 4000))}).engine.plan.to_bytes()

    def to_float(header: dict) -> None:
        _valued(header)["dtype"] = "FLOAT"

    with pytest.raises(PlanFormatError, match=r"holds shape values but is FLOAT/LINEAR"):
        EnginePlan.from_bytes(_edited(plan, to_float))


def test_a_plan_with_more_values_than_elements_is_refused() -> None:
    plan = trt.compile(conv_length_chain(), shapes={"audio": ((2, 20), (2, 100), (2, 4000))}).engine.plan.to_bytes()
    name = {}

    def one_more(header: dict) -> None:
        tensor = _valued(header)
        tensor["values"] = tensor["values"] + tensor["values"][:1]
        name["tensor"] = tensor["name"]

    with pytest.raises(PlanFormatError, match=r"holds \d+ shape values") as info:
        EnginePlan.from_bytes(_edited(plan, one_more))
    assert repr(name["tensor"]) in str(info.value)


def test_a_shape_tensor_that_is_an_engine_output_is_still_written_every_run() -> None:
    """Engine outputs are the caller's memory: their kernel runs per inference, as before."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Relu", ["x"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])
    compiled = trt.compile(onnx_model(nodes, [x], ["s", "y"], {}), shapes={"x": ((1, 3), (2, 3), (9, 3))})
    for n in (2, 5):
        out = compiled(np.ones((n, 3), np.float32))
        np.testing.assert_array_equal(out["s"], [n, 3])
    assert not any(step.host for step in compiled.context._executor.steps)


def test_shape_tensors_are_written_when_shapes_change_not_when_only_addresses_move(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compiled = trt.compile(bert_attention_reshape(), shapes={"x": ((1, 2, 768), (1, 16, 768), (4, 64, 768))})
    executor = compiled.context._executor
    writes: list[int] = []
    original = executor._write_values
    monkeypatch.setattr(executor, "_write_values", lambda step: (writes.append(step.index), original(step)))
    x = np.random.default_rng(0).standard_normal((2, 7, 768)).astype(np.float32)
    first = compiled(x)["y"]
    assert writes  # a new shape: the values are written
    writes.clear()
    again = compiled(x.copy())["y"]  # same shape, another input buffer: bound again
    assert not writes
    np.testing.assert_array_equal(first, again)
    compiled(np.ones((3, 5, 768), np.float32))
    assert writes
