"""Narrow storage types (BF16, FP8, FP4, INT4, INT2): held in FLOAT/INT8/UINT8, casts round to their values."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

import plugrt
from plugrt.core.errors import NetworkError
from plugrt.ops.storage_cast import StorageCastOperator, round_to_narrow


def cast_model(to: int, out_type: int, saturate: int | None = None):
    attrs = {} if saturate is None else {"saturate": saturate}
    nodes = [helper.make_node("Cast", ["x"], ["y"], to=to, **attrs)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", out_type, [4])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def test_fp8_cast_rounds_to_nearest_and_saturates_by_default():
    got = plugrt.compile(cast_model(TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E4M3FN))(
        {"x": np.array([0.3, 500.0, -np.inf, np.nan], np.float32)}
    )["y"]
    assert got.dtype == ml_dtypes.float8_e4m3fn  # the declared type at the boundary
    values = got.astype(np.float32)
    assert values[:3].tolist() == [0.3125, 448.0, -448.0]
    assert np.isnan(values[3])


def test_fp8_cast_without_saturation_overflows_to_nan():
    got = plugrt.compile(cast_model(TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E4M3FN, saturate=0))(
        {"x": np.array([0.3, 500.0, 1.0, -2.0], np.float32)}
    )["y"].astype(np.float32)
    assert got[0] == 0.3125 and np.isnan(got[1]) and got[2:].tolist() == [1.0, -2.0]


def test_bf16_round_trip_inside_the_graph_is_round_to_nearest_even():
    nodes = [
        helper.make_node("Cast", ["x"], ["b"], to=TensorProto.BFLOAT16),
        helper.make_node("Cast", ["b"], ["y"], to=TensorProto.FLOAT),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    compiled = plugrt.compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]))
    # 1 + 2^-8 is halfway between 1 and 1 + 2^-7: even wins; 1 + 3 * 2^-8 rounds up
    got = compiled({"x": np.array([1.00390625, 1.01171875], np.float32)})["y"]
    assert got.tolist() == [1.0, 1.015625]


def test_int4_input_is_held_as_int8():
    nodes = [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.INT4, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    compiled = plugrt.compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]))
    x = np.array([-8, 0, 7], np.int8).astype(ml_dtypes.int4)
    assert compiled({"x": x})["y"].tolist() == [-8.0, 0.0, 7.0]
    assert compiled.network.get_input(0).dtype == plugrt.DataType.INT8


def test_round_to_narrow_keeps_representable_values():
    values = np.array([0.0, -0.5, 1.5, 6.0], np.float32)  # all exact in FP4 E2M1
    assert round_to_narrow(values, "float4_e2m1fn", True).astype(np.float32).tolist() == values.tolist()


def test_unknown_narrow_type_is_rejected():
    op = StorageCastOperator({"narrow": "float7"})
    with pytest.raises(NetworkError, match="unknown narrow type 'float7'"):
        op.output_types([plugrt.DataType.FLOAT])
