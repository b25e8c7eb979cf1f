"""Tensor operators on their own: symbolic shape rules, value propagation, kernels and misuse."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper
from tensor_harness import Compiled, make_model, parser_class

import plugrt as trt
from plugrt.core.errors import NetworkError, ShapeError, TypeMismatchError
from plugrt.core.types import DataType
from plugrt.ops.base import create_operator, registered_operators
from plugrt.ops.einsum import parse_equation
from plugrt.ops.slicing import _sliced_length, onnx_slice
from plugrt.shape import constant, symbol

N = symbol("x[0]")
BIG = np.iinfo(np.int64).max

KINDS = (
    "arg_reduce compress constant_of_shape cumsum depth_to_space einsum expand flatten gather gather_elements "
    "gather_nd nonzero one_hot range recurrent reverse_sequence scatter_elements scatter_nd shape size slice "
    "space_to_depth split squeeze tile topk trilu unsqueeze where"
).split()


def c(*values: int) -> list:
    return [constant(v) for v in values]


def test_every_kind_is_registered() -> None:
    assert set(KINDS) <= set(registered_operators())


def onnx_length(dim: int, start: int, end: int, step: int) -> int:
    """ONNX's Slice length, written from the specification's clamping rules."""
    start, end = (start + dim if start < 0 else start), (end + dim if end < 0 else end)
    if step > 0:
        start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        return max(0, -(-(end - start) // step))
    start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
    return max(0, -(-(start - end) // -step))


def test_slice_length_and_kernel_follow_the_onnx_clamping_rules() -> None:
    """The symbolic length, evaluated, is ONNX's; bounds contain it; the kernel's slice has that length."""
    points = [-BIG, -7, -3, -1, 0, 1, 2, 5, 9, BIG]
    for start, end, step in itertools.product(points, points, [-3, -2, -1, 1, 2, 3]):
        length = _sliced_length(N, constant(start), constant(end), step)
        low, high = length.bounds({"x[0]": 0}, {"x[0]": 8})
        for dim in range(9):
            expected = onnx_length(dim, start, end, step)
            assert len(range(dim)[onnx_slice(dim, start, end, step)]) == expected
            assert length.evaluate({"x[0]": dim}) == expected, (dim, start, end, step)
            assert low <= expected <= high


def test_slice_with_symbolic_starts_keeps_an_expression() -> None:
    op = create_operator("slice", {"tensor_inputs": ["starts", "ends"]}, {})
    (shape,) = op.output_shapes([[N, constant(4)], [constant(1)], [constant(1)]], [None, [symbol("s")], [N]])
    # a symbol is a dimension (never negative: the simplifier relies on it)
    for n, s in [(5, 2), (5, 5), (3, 7), (0, 0)]:
        assert shape[0].evaluate({"x[0]": n, "s": s}) == onnx_length(n, s, n, 1) and shape[1] == constant(4)


def test_shape_gather_slice_split_and_squeeze_propagate_values() -> None:
    shape_op = create_operator("shape", {"start": -2}, {})
    values = shape_op.output_values([[constant(2), N, constant(5)]], [None])
    assert values == [[N, constant(5)]] and shape_op.output_shapes([[constant(2), N, constant(5)]], [None]) == [c(2)]
    gather = create_operator("gather", {"axis": 0}, {})
    assert gather.output_values([c(3), []], [[constant(2), N, constant(5)], c(-2)]) == [[N]]
    with pytest.raises(ShapeError, match="out of range for 3 values"):
        gather.output_values([c(3), []], [[constant(2), N, constant(5)], c(3)])
    sliced = create_operator("slice", {"starts": [1], "ends": [BIG]}, {})
    assert sliced.output_values([c(3)], [[constant(2), N, constant(5)]]) == [[N, constant(5)]]
    split = create_operator("split", {"num_outputs": 2, "split": [1, 2]}, {})
    assert split.output_values([c(3)], [[constant(2), N, constant(5)]]) == [[constant(2)], [N, constant(5)]]
    squeeze = create_operator("squeeze", {"axes": [0]}, {})
    assert squeeze.output_values([c(1)], [[N]]) == [[N]]


def test_range_and_expand_values_and_shapes_from_expressions() -> None:
    rng = create_operator("range", {}, {})
    (length,) = rng.output_shapes([[], [], []], [c(0), [N], c(1)])
    # a symbol is a dimension, never negative (the simplifier relies on it)
    assert length[0].evaluate({"x[0]": 4}) == 4 and length[0].evaluate({"x[0]": 0}) == 0
    assert rng.output_values([[], [], []], [c(2), c(8), c(3)]) == [c(2, 5)]
    backwards = rng.output_shapes([[], [], []], [c(10), c(3), c(-3)])
    assert backwards == [c(3)]
    expand = create_operator("expand", {}, {})
    (shape,) = expand.output_shapes([[constant(1), constant(3)], c(3)], [None, [N, constant(1), constant(1)]])
    assert shape == [N, constant(1), constant(3)]


BROADCAST_A = np.arange(8, dtype=np.int32).reshape(2, 1, 4) + 1
BROADCAST_B = np.arange(3, dtype=np.int32).reshape(3, 1) + 1


@pytest.mark.parametrize(
    ("kind", "params", "inputs", "expected", "mismatched"),
    [
        ("mod", {}, [BROADCAST_A, BROADCAST_B], np.mod(BROADCAST_A, BROADCAST_B), [c(2, 3, 4), c(2, 1)]),
        ("bitwise", {"op": "AND"}, [BROADCAST_A, BROADCAST_B], BROADCAST_A & BROADCAST_B, [c(2, 3, 4), c(2, 1)]),
        (
            "where",
            {},
            [BROADCAST_B > 1, BROADCAST_A, np.zeros(4, np.int32)],
            np.where(BROADCAST_B > 1, BROADCAST_A, 0),
            [c(3, 1), c(2, 1, 4), c(2, 4)],
        ),
    ],
)
def test_operators_broadcast_as_onnx_does(
    kind: str, params: dict, inputs: list, expected: np.ndarray, mismatched: list
) -> None:
    """ONNX multidirectional broadcasting: shapes right-aligned, size-1 dimensions stretch, any ranks."""
    op = create_operator(kind, params, {})
    shapes = [c(*a.shape) for a in inputs]
    assert op.output_shapes(shapes, [None] * len(shapes)) == [c(2, 3, 4)]
    out = np.empty((2, 3, 4), np.int32)
    op.run(inputs, [out])
    np.testing.assert_array_equal(out, expected)
    with pytest.raises(ShapeError, match=r"dimension 1 is 3 and 2; they must be equal or one of them 1"):
        op.output_shapes(mismatched, [None] * len(mismatched))


def test_unknown_values_give_a_clear_error() -> None:
    expand = create_operator("expand", {}, {})
    with pytest.raises(NetworkError, match=r"the shape \(input 1\) must be known when the network is built"):
        expand.output_shapes([c(2), c(2)], [None, None])


@pytest.mark.parametrize(
    ("kind", "params", "shapes", "values", "error", "message"),
    [
        ("split", {"num_outputs": 2, "split": [1, 1]}, [c(3)], [None], ShapeError, "add up to the axis length 3"),
        ("squeeze", {"axes": [0]}, [c(2, 1)], [None], ShapeError, "cannot squeeze axis 0 of size 2"),
        ("squeeze", {}, [[N, constant(1)]], [None], ShapeError, "needs every dimension known"),
        ("unsqueeze", {"axes": [0, 0]}, [c(2)], [None], ShapeError, "repeat an axis"),
        ("topk", {"k": 5}, [c(2, 3)], [None], ShapeError, "k = 5 must be in"),
        ("gather", {"axis": 2}, [c(2, 3), c(1)], [None, None], ShapeError, "axis 2 is out of range for rank 2"),
        ("slice", {"starts": [0], "ends": [1], "steps": [0]}, [c(4)], [None], ShapeError, "steps must not be 0"),
        ("tile", {}, [c(2, 3), c(1)], [None, c(2)], ShapeError, "1 repeats for an input of rank 2"),
        ("depth_to_space", {"blocksize": 2}, [c(1, 6, 2, 2)], [None], ShapeError, "not divisible by 4"),
        ("einsum", {"equation": "ij,jk->ik"}, [c(2, 3), c(4, 5)], [None, None], ShapeError, "must match"),
        ("gather_nd", {}, [c(2, 3), [constant(2), N]], [None, None], ShapeError, "must be a build-time constant"),
    ],
)
def test_shape_rule_misuse(kind: str, params: dict, shapes: list, values: list, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        create_operator(kind, params, {}).output_shapes(shapes, values)


def test_type_rules_reject_bad_index_and_condition_types() -> None:
    with pytest.raises(TypeMismatchError, match="the indices must be INT32 or INT64, got FLOAT"):
        create_operator("gather", {}, {}).output_types([DataType.FLOAT, DataType.FLOAT])
    with pytest.raises(TypeMismatchError, match="the condition must be BOOL"):
        create_operator("where", {}, {}).output_types([DataType.FLOAT] * 3)
    with pytest.raises(TypeMismatchError, match="updates are HALF but data is FLOAT"):
        create_operator("scatter_nd", {}, {}).output_types([DataType.FLOAT, DataType.INT64, DataType.HALF])
    with pytest.raises(NetworkError, match="unknown reduction 'avg'"):
        create_operator("scatter_elements", {"reduction": "avg"}, {})


def test_einsum_implicit_output_and_bad_terms() -> None:
    assert parse_equation("ij,jk") == (["ij", "jk"], "ik")
    assert parse_equation("...ij,...jk") == (["...ij", "...jk"], "...ik")
    with pytest.raises(NetworkError, match="invalid term"):
        parse_equation("i1,j->ij")


def _gather_network(indices: np.ndarray) -> Compiled:
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=1)
    model = make_model([node], {"x": (TP.FLOAT, [2, 3]), "i": (TP.INT64, list(indices.shape))}, ["y"])
    return Compiled(model)


def test_out_of_range_gather_index_fails_the_run_naming_the_layer() -> None:
    compiled = _gather_network(np.zeros(2, np.int64))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(compiled({"x": x, "i": np.array([-1, 2])})[0], x[:, [2, 2]])
    with pytest.raises(trt.ExecutionError, match=r"Gather.*gather indices must be in \[-3, 2\]"):
        compiled({"x": x, "i": np.array([0, 3])})
    np.testing.assert_array_equal(compiled({"x": x, "i": np.array([1, 0])})[0], x[:, [1, 0]])


def test_parser_reports_shape_inputs_computed_from_runtime_data() -> None:
    node = helper.make_node("Expand", ["x", "shape"], ["y"])
    model = make_model([node], {"x": (TP.FLOAT, [1, 3]), "shape": (TP.INT64, [2])}, ["y"])
    logger = trt.Logger(trt.Logger.INTERNAL_ERROR)
    parser = parser_class()(trt.Builder(logger).create_network(0), logger)
    assert not parser.parse(model.SerializeToString())
    message = str(parser.get_error(0))
    assert "the shape ('shape') must be known when the network is built" in message and "Expand" in message


def test_static_subgraphs_fold_into_constants() -> None:
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "one"], ["w"]),
        helper.make_node("Range", ["zero", "w", "step"], ["r"]),
        helper.make_node("Slice", ["table", "zero1", "w1"], ["part"]),
    ]
    inits = {
        "one": np.array(1, np.int64),
        "zero": np.array(0, np.int64),
        "step": np.array(2, np.int64),
        "table": np.arange(10, dtype=np.float32),
        "zero1": np.array([0], np.int64),
        "w1": np.array([4], np.int64),
    }
    model = make_model(nodes, {"x": (TP.FLOAT, [2, 7])}, ["r", "part"], inits)
    logger = trt.Logger(trt.Logger.INTERNAL_ERROR)
    network = trt.Builder(logger).create_network(0)
    assert parser_class()(network, logger).parse(model.SerializeToString())
    kinds = {getattr(layer, "kind", type(layer).__name__) for layer in network}
    assert not kinds & {"shape", "gather", "range", "slice"}
    r, part = Compiled(model)({"x": np.zeros((2, 7), np.float32)})
    np.testing.assert_array_equal(r, np.arange(0, 7, 2))
    np.testing.assert_array_equal(part, np.arange(4, dtype=np.float32))
