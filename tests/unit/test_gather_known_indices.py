"""Gather with indices known at bind (a constant or a shape tensor): one prepared call per run (a copy of a view,
or one take with a table made at bind), the same results as a take; indices that are data keep the take."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt


def _model(indices: np.ndarray | None, axis: int, data_shape: tuple[int, ...]) -> Any:
    """data -> Gather(axis) with ``indices`` as an initializer (None: a second graph input) -> y."""
    inputs = [helper.make_tensor_value_info("data", TensorProto.FLOAT, list(data_shape))]
    initializers = []
    if indices is None:
        inputs.append(helper.make_tensor_value_info("indices", TensorProto.INT64, [2]))
    else:
        initializers.append(numpy_helper.from_array(indices.astype(np.int64), "indices"))
    node = helper.make_node("Gather", ["data", "indices"], ["y"], axis=axis)
    graph = helper.make_graph(
        [node], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializers
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _gather_step(compiled: Any, feed: dict[str, np.ndarray]) -> tuple[Any, np.ndarray]:
    context = compiled.engine.create_execution_context()
    arrays = dict(feed)
    for name, array in feed.items():
        context.set_input_shape(name, array.shape)
        context.set_tensor_address(name, array.ctypes.data)
    arrays["y"] = np.full(tuple(context.get_tensor_shape("y")), 7, np.float32)
    context.set_tensor_address("y", arrays["y"].ctypes.data)
    context.execute_async_v3(0)
    step = next(s for s in context._executor.steps if s.layer.kind == "gather")
    return step.node, arrays["y"]


CASES = [
    (np.array(0), 0),
    (np.array(-1), 0),
    (np.array(2), 1),
    (np.array(-3), -1),
    (np.array([1, 2, 3]), 1),  # consecutive: a view
    (np.array([-2, -1]), 2),  # consecutive from the end
    (np.array([3, 0, 0, 2]), 1),  # a table
    (np.array([], dtype=np.int64), 1),
]


@pytest.mark.parametrize(("indices", "axis"), CASES, ids=[f"{c[0].tolist()}-axis{c[1]}" for c in CASES])
def test_known_indices_run_as_one_prepared_call_and_equal_a_take(indices: np.ndarray, axis: int) -> None:
    data = np.random.default_rng(3).standard_normal((3, 4, 5)).astype(np.float32)
    node, got = _gather_step(plugrt.compile(_model(indices, axis, data.shape)), {"data": data})
    np.testing.assert_array_equal(got, np.take(data, indices, axis=axis))
    assert node._direct is not None  # the run list calls the prepared copy or take, not run()


def test_indices_of_two_dimensions_are_not_values_and_are_taken_at_every_run() -> None:
    data = np.random.default_rng(5).standard_normal((3, 4, 5)).astype(np.float32)
    indices = np.array([[1, 0], [2, -1]])
    node, got = _gather_step(plugrt.compile(_model(indices, 0, data.shape)), {"data": data})
    np.testing.assert_array_equal(got, np.take(data, indices, axis=0))
    assert node._direct is None  # (values are kept for tensors of rank 0 and 1: shape tensors)


def test_indices_that_are_data_are_taken_at_every_run() -> None:
    data = np.random.default_rng(4).standard_normal((3, 4, 5)).astype(np.float32)
    compiled = plugrt.compile(_model(None, 1, data.shape))
    for picks in ([0, 3], [-1, 1]):
        indices = np.array(picks, np.int64)
        node, got = _gather_step(compiled, {"data": data, "indices": indices})
        np.testing.assert_array_equal(got, np.take(data, indices, axis=1))
        assert node._direct is None


@pytest.mark.parametrize("bad", [4, -5])
def test_known_indices_out_of_range_fail_naming_the_range(bad: int) -> None:
    data = np.zeros((3, 4, 5), np.float32)
    with pytest.raises(Exception, match=r"gather indices must be in \[-4, 3\]"):
        _gather_step(plugrt.compile(_model(np.array([0, bad]), 1, data.shape)), {"data": data})
