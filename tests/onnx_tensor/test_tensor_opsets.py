"""Older opsets' forms of the same ops (attributes where later opsets take inputs), against the reference."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper
from tensor_harness import Compiled, check, make_model

RNG = np.random.default_rng(11)
X = RNG.standard_normal((4, 1, 6)).astype(np.float32)


@pytest.mark.parametrize(
    ("opset", "op", "outputs", "attrs"),
    [
        (9, "Slice", ["y"], {"starts": [1, -4], "ends": [100, -1], "axes": [0, 2]}),
        (9, "Slice", ["y"], {"starts": [0], "ends": [2]}),
        (11, "Split", ["a", "b"], {"axis": 2, "split": [2, 4]}),
        (11, "Split", ["a", "b", "c"], {"axis": -1}),
        (11, "Squeeze", ["y"], {"axes": [1]}),
        (11, "Squeeze", ["y"], {}),
        (11, "Unsqueeze", ["y"], {"axes": [0, -1]}),
        (9, "TopK", ["v", "i"], {"k": 3, "axis": 2}),
        (11, "ArgMax", ["y"], {"axis": -1, "keepdims": 0}),
        (11, "Flatten", ["y"], {"axis": 0}),
    ],
)
def test_attribute_forms(opset: int, op: str, outputs: list[str], attrs: dict) -> None:
    inputs = {"x": (TP.FLOAT, list(X.shape))}
    node = helper.make_node(op, ["x"], outputs, **attrs)
    check(make_model([node], inputs, outputs, opset=opset), {"x": X}, rtol=1e-6)


def test_opset9_scatter_is_scatter_elements() -> None:
    indices = np.array([[[4, 0, -1]]] * 4, np.int64)
    updates = np.arange(12, dtype=np.float32).reshape(4, 1, 3)
    node = helper.make_node("Scatter", ["x", "i", "u"], ["y"], axis=2)
    model = make_model([node], {"x": (TP.FLOAT, list(X.shape))}, ["y"], {"i": indices, "u": updates}, opset=9)
    expected = X.copy()
    expected[:, :, [4, 0, 5]] = updates
    np.testing.assert_array_equal(Compiled(model)({"x": X})[0], expected)


def test_split_with_a_sizes_input_and_opset18_num_outputs() -> None:
    split = np.array([1, 5], np.int64)
    nodes = [
        helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=2),
        helper.make_node("Split", ["x"], ["c", "d", "e", "f"], axis=2, num_outputs=4),
    ]
    model = make_model(nodes, {"x": (TP.FLOAT, list(X.shape))}, ["a", "b", "c", "d", "e", "f"], {"sizes": split})
    check(model, {"x": X}, rtol=1e-6)


def test_cumsum_with_a_runtime_axis_and_trilu_with_a_runtime_k() -> None:
    nodes = [
        helper.make_node("CumSum", ["x", "axis"], ["c"], exclusive=1, reverse=1),
        helper.make_node("Trilu", ["m", "k"], ["t"], upper=0),
    ]
    inputs = {"x": (TP.FLOAT, [3, 4]), "axis": (TP.INT64, []), "m": (TP.FLOAT, [3, 5]), "k": (TP.INT64, [])}
    model = make_model(nodes, inputs, ["c", "t"])
    x, m = RNG.standard_normal((3, 4)).astype(np.float32), RNG.standard_normal((3, 5)).astype(np.float32)
    for axis, k in [(0, 0), (-1, 2), (1, -1)]:
        feeds = {"x": x, "axis": np.array(axis, np.int64), "m": m, "k": np.array(k, np.int64)}
        check(model, feeds, rtol=1e-6)
