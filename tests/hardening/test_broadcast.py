"""Elementwise inputs that cannot broadcast fail at build (every profile's min/opt/max) or at shape
change, naming the layer and both sizes; never as a NumPy error during a run."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper

import plugrt as trt

ADD = helper.make_model(helper.make_graph(
    [helper.make_node("Add", ["a", "b"], ["y"])], "add",
    [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["n", 4]),
     helper.make_tensor_value_info("b", TensorProto.FLOAT, ["m", 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]))
MESSAGE = r"layer 'Add_y/sum#\d+': its inputs cannot broadcast: dimension 0 is {} in one and {} in the other"


@pytest.mark.parametrize("shapes, sizes, point", [
    ({"a": ((2, 4),) * 3, "b": ((3, 4),) * 3}, (2, 3), "profile 0 min"),
    ({"a": ((1, 4), (2, 4), (2, 4)), "b": ((1, 4), (5, 4), (5, 4))}, (2, 5), "profile 0 opt"),
    ({"a": ((1, 4), (1, 4), (6, 4)), "b": ((1, 4), (1, 4), (7, 4))}, (6, 7), "profile 0 max"),
])
def test_unbroadcastable_profile_shapes_fail_the_build(shapes: Any, sizes: tuple[int, int], point: str) -> None:
    with pytest.raises(trt.BuildError, match=MESSAGE.format(*sizes) + rf".*at {point} shapes"):
        trt.compile(ADD, shapes=shapes)


def test_unbroadcastable_shapes_inside_the_profile_fail_at_shape_change() -> None:
    model = trt.compile(ADD, shapes={"a": ((1, 4), (2, 4), (4, 4)), "b": ((1, 4), (2, 4), (4, 4))})
    with pytest.raises(trt.ShapeError, match=MESSAGE.format(2, 3) + r".*at the input shapes"):
        model({"a": np.ones((2, 4), np.float32), "b": np.ones((3, 4), np.float32)})
    y = model({"a": np.ones((1, 4), np.float32), "b": np.ones((3, 4), np.float32)})["y"]  # 1 stretches
    np.testing.assert_array_equal(y, np.full((3, 4), 2, np.float32))
    y = model({"a": np.ones((3, 4), np.float32), "b": np.ones((3, 4), np.float32)})["y"]
    assert y.shape == (3, 4)


def test_a_fixed_size_against_a_dynamic_one_is_checked_too() -> None:
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Mul", ["a", "b"], ["y"])], "mul",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, 4]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, ["m", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]))
    with pytest.raises(trt.BuildError, match=r"dimension 0 is 3 in one and 2 in the other.*profile 0 max"):
        trt.compile(model, shapes={"b": ((1, 4), (1, 4), (2, 4))})
    engine = trt.compile(model, shapes={"b": ((1, 4), (3, 4), (3, 4))})
    assert engine({"a": np.ones((3, 4), np.float32), "b": np.ones((1, 4), np.float32)})["y"].shape == (3, 4)
