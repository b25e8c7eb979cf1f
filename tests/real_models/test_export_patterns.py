"""Regression tests for the import failures of real exports, as small hand-written ONNX graphs.

Each graph reproduces the exporter's pattern exactly (torch 2.13's dynamo exporter, opset 18):
a Reshape whose inferred size cancels only after simplification (BERT), integer arithmetic
on shape values feeding Range and Reshape (wav2vec2, CRNN), and long chains of strided
convolutions with dynamic H/W whose plans must load again (PP-OCR).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt as trt
from plugrt.core.errors import PlanFormatError
from plugrt.engine.plan import MAX_EXPR_DEPTH, EnginePlan
from plugrt.engine.plan_format import PlanContents, decode_plan, encode_plan

from export_graphs import bert_attention_reshape, conv_length_chain, onnx_model


def test_bert_reshape_back_to_hidden_size_plans_a_small_arena() -> None:
    """The merged dimension is 768 exactly, so the arena holds [B, S, 768] tensors, not gigabytes."""
    model = bert_attention_reshape()
    compiled = trt.compile(model, shapes={"x": ((1, 2, 768), (1, 16, 768), (8, 512, 768))})
    largest = 8 * 512 * 768 * 4
    assert compiled.engine.plan.profiles[0].arena_size <= 8 * largest
    x = np.random.default_rng(1).standard_normal((2, 7, 768)).astype(np.float32)
    table = numpy_helper.to_array(model.graph.initializer[0])
    np.testing.assert_allclose(compiled(x)["y"], x + table[:, :7], rtol=1e-6)


def test_integer_arithmetic_on_shape_values_is_a_shape_expression() -> None:
    """Range's limit and Reshape's shape come from Div/Mod/Min/Max/Sub/Mul/Where of a shape: the graph imports."""
    compiled = trt.compile(conv_length_chain(), shapes={"audio": ((2, 20), (2, 100), (2, 4000))})
    for samples in (23, 100, 3999):
        audio = np.arange(2 * samples, dtype=np.float32).reshape(2, samples)
        out = compiled(audio)
        frames = samples // 5 - 1
        np.testing.assert_array_equal(out["positions"], np.arange(frames))
        np.testing.assert_array_equal(out["framed"], audio[:, : frames * 5].reshape(2, frames, 5))
        rows = min(max(frames - samples % 5, 1), frames)
        assert out["ones"].shape == (rows,)


def test_truncating_division_of_a_possibly_negative_shape_value_rounds_toward_zero() -> None:
    """ONNX's integer Div truncates: (L - 30) / 4 for L = 21 is -2, not floor's -3; as Range's start it shows."""
    nodes = [
        helper.make_node("Shape", ["x"], ["length_1d"], start=0, end=1),
        helper.make_node("Squeeze", ["length_1d"], ["length"]),
        helper.make_node("Sub", ["length", "thirty"], ["shifted"]),
        helper.make_node("Div", ["shifted", "four"], ["start"]),
        helper.make_node("Range", ["start", "three", "one"], ["values"]),
    ]
    inits = {
        "thirty": np.array(30, np.int64),
        "four": np.array(4, np.int64),
        "three": np.array(3, np.int64),
        "one": np.array(1, np.int64),
    }
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])
    compiled = trt.compile(onnx_model(nodes, [x], ["values"], inits), shapes={"x": ((1,), (21,), (64,))})
    for n in (21, 30, 33, 50):
        start = int((n - 30) / 4)
        np.testing.assert_array_equal(compiled(np.zeros(n, np.float32))["values"], np.arange(start, 3))


def _ocr_conv_chain(count: int) -> onnx.ModelProto:
    """``count`` convolutions with dynamic H/W, every third one strided (PP-OCR's backbone shape)."""
    nodes, inits = [], {}
    previous = "x"
    for k in range(count):
        inits[f"w{k}"] = np.full((1, 1, 3, 3), 1 / 9, np.float32)
        stride = 2 if k % 3 == 0 and k < 15 else 1
        nodes.append(helper.make_node("Conv", [previous, f"w{k}"], [f"c{k}"], pads=[1, 1, 1, 1], strides=[stride] * 2))
        previous = f"c{k}"
    nodes.append(helper.make_node("Identity", [previous], ["y"]))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1, "h", "w"])
    return onnx_model(nodes, [x], ["y"], inits)


def test_plans_of_long_conv_chains_with_dynamic_hw_load_again() -> None:
    """63 chained convolutions: the plan deserializes (shared expression table) and runs."""
    compiled = trt.compile(_ocr_conv_chain(63), shapes={"x": ((1, 1, 32, 32), (1, 1, 64, 64), (1, 1, 320, 320))})
    plan = compiled.serialize()
    engine = trt.Runtime(trt.Logger()).deserialize_cuda_engine(plan)
    assert engine is not None
    y = compiled(np.ones((1, 1, 64, 96), np.float32))["y"]
    assert y.shape == (1, 1, 2, 3)
    header = decode_plan(plan).header
    assert max(len(str(entry)) for entry in header["dims"]) < 200  # one node per entry


def _tampered(plan: bytes, edit: object) -> bytes:
    contents = decode_plan(plan)
    edit(contents.header)  # type: ignore[operator]
    return encode_plan(PlanContents(contents.header, contents.weights, contents.plugins))


def test_hostile_expression_tables_are_refused_with_a_clear_error() -> None:
    plan = trt.compile(_ocr_conv_chain(3), shapes={"x": ((1, 1, 8, 8), (1, 1, 16, 16), (1, 1, 64, 64))}).serialize()

    def deep(header: dict) -> None:
        # ceil-halving repeated: (((x + 1) // 2 + 1) // 2 ...), which no rewrite shortens
        entries: list = [["sym", "x[2]"]]
        while len(entries) < 2 * MAX_EXPR_DEPTH:
            entries.append(["SUM", ["ref", len(entries) - 1], 1])
            entries.append(["FLOOR_DIV", ["ref", len(entries) - 1], 2])
        header["dims"] = entries

    def forward(header: dict) -> None:
        header["dims"][0] = ["SUM", ["ref", 0], 1]

    def not_a_list(header: dict) -> None:
        header["dims"] = {"0": 1}

    for edit, message in ((deep, "nested deeper than"), (forward, "outside its table"), (not_a_list, "must be a list")):
        with pytest.raises(PlanFormatError, match=message):
            EnginePlan.from_bytes(_tampered(plan, edit))
