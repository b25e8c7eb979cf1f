"""CumProd, LpNormalization, BitCast, EyeLike: results (the node suite has more) and misuse."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import plugrt
from plugrt.core.errors import TypeMismatchError
from plugrt.onnx.importers.base import OnnxImportError
from plugrt.ops.reinterpret import BitCastOperator

F = TensorProto.FLOAT


def one_node(node, inputs, outputs, opset=23):
    graph = helper.make_graph([node], "g", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def test_cumprod_exclusive_reverse():
    axis = helper.make_tensor("axis", TensorProto.INT64, [], [1])
    node = helper.make_node("CumProd", ["x", "axis"], ["y"], exclusive=1, reverse=1)
    graph = helper.make_graph([node], "g", [vi("x", F, [2, 3])], [vi("y", F, [2, 3])], [axis])
    compiled = plugrt.compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)]))
    x = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    assert compiled({"x": x})["y"].tolist() == [[6, 3, 1], [30, 6, 1]]


def test_lp_normalization_p1_and_bad_p():
    node = helper.make_node("LpNormalization", ["x"], ["y"], axis=0, p=1)
    compiled = plugrt.compile(one_node(node, [vi("x", F, [2, 2])], [vi("y", F, [2, 2])], opset=17))
    got = compiled({"x": np.array([[1, 0], [-3, 0]], np.float32)})["y"]
    assert got.tolist() == [[0.25, 0.0], [-0.75, 0.0]]
    bad = helper.make_node("LpNormalization", ["x"], ["y"], p=3)
    with pytest.raises(OnnxImportError, match="p must be 1 or 2, got 3"):
        plugrt.compile(one_node(bad, [vi("x", F, [2, 2])], [vi("y", F, [2, 2])], opset=17))


def test_bitcast_reads_the_same_bytes():
    node = helper.make_node("BitCast", ["x"], ["y"], to=TensorProto.INT32)
    compiled = plugrt.compile(one_node(node, [vi("x", F, [2])], [vi("y", TensorProto.INT32, [2])], opset=26))
    x = np.array([1.0, -2.5], np.float32)
    assert compiled({"x": x})["y"].tolist() == x.view(np.int32).tolist()


def test_bitcast_of_a_widened_type_is_rejected():
    node = helper.make_node("BitCast", ["x"], ["y"], to=TensorProto.INT64)
    model = one_node(node, [vi("x", TensorProto.DOUBLE, [2])], [vi("y", TensorProto.INT64, [2])], opset=26)
    with pytest.raises(OnnxImportError, match="the input is DOUBLE, which plugrt holds as FLOAT"):
        plugrt.compile(model)


def test_bitcast_between_sizes_is_rejected():
    op = BitCastOperator({"to_type": "INT64"})
    with pytest.raises(TypeMismatchError, match=r"FLOAT \(4 bytes\) cannot become INT64 \(8 bytes\)"):
        op.output_types([plugrt.DataType.FLOAT])


def test_eye_like_offset_and_rank_check():
    node = helper.make_node("EyeLike", ["x"], ["y"], k=-1, dtype=TensorProto.INT32)
    compiled = plugrt.compile(one_node(node, [vi("x", F, [3, 2])], [vi("y", TensorProto.INT32, [3, 2])]))
    assert compiled({"x": np.zeros((3, 2), np.float32)})["y"].tolist() == [[0, 0], [1, 0], [0, 1]]
    node = helper.make_node("EyeLike", ["x"], ["y"])
    with pytest.raises(OnnxImportError, match="EyeLike needs a 2-D input, got rank 3"):
        plugrt.compile(one_node(node, [vi("x", F, [1, 2, 2])], [vi("y", F, [1, 2, 2])]))


def _unique_model(sorted_: int, axis: int | None = None, shape=(6,)):
    attrs = {"sorted": sorted_} if axis is None else {"sorted": sorted_, "axis": axis}
    node = helper.make_node("Unique", ["x"], ["y", "first", "inverse", "counts"], **attrs)
    outs = [vi("y", F, None)] + [vi(n, TensorProto.INT64, None) for n in ("first", "inverse", "counts")]
    return one_node(node, [vi("x", F, list(shape))], outs, opset=17)


def test_unique_in_order_of_first_occurrence_across_calls():
    compiled = plugrt.compile(_unique_model(0))
    got = compiled({"x": np.array([3, 1, 3, 2, 1, 3], np.float32)})
    assert got["y"].tolist() == [3, 1, 2]
    assert got["first"].tolist() == [0, 1, 3]
    assert got["inverse"].tolist() == [0, 1, 0, 2, 1, 0]
    assert got["counts"].tolist() == [3, 2, 1]
    again = compiled({"x": np.array([5, 5, 5, 5, 4, 5], np.float32)})  # another count of distinct values
    assert again["y"].tolist() == [5, 4] and again["counts"].tolist() == [5, 1]


def test_unique_rows_sorted():
    compiled = plugrt.compile(_unique_model(1, axis=0, shape=(3, 2)))
    got = compiled({"x": np.array([[2, 1], [0, 5], [2, 1]], np.float32)})
    assert got["y"].tolist() == [[0, 5], [2, 1]] and got["inverse"].tolist() == [1, 0, 1]


def test_unique_axis_out_of_range_is_rejected():
    with pytest.raises(OnnxImportError, match="axis 3 is out of range for a tensor of rank 2"):
        plugrt.compile(_unique_model(1, axis=3, shape=(3, 2)))
