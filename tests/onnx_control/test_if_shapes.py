"""ONNX If whose branches differ in rank, or whose untaken branch cannot run at the model's shapes.

A condition computed from input dimensions (``Shape -> Gather -> Equal``, as TorchScript writes
``x.squeeze(-1)``) is decided when the network is built once the profile fixes those dimensions; a
condition read from data picks its branch at run time, and a branch that cannot be built at the
model's shapes is an error only when it is taken.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import plugrt
from plugrt.core.errors import ExecutionError, ShapeError
from plugrt.onnx.importers.base import OnnxImportError

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def squeeze_if_last_is_one():
    """y = x.squeeze(-1) if x.shape[-1] == 1 else x, then ReduceSum over axis 1 (rank 2 or 3 both work)."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Constant", [], ["last"], value=helper.make_tensor("last", I64, [], [-1])),
        helper.make_node("Gather", ["shape", "last"], ["n"], axis=0),
        helper.make_node("Constant", [], ["one"], value=helper.make_tensor("one", I64, [], [1])),
        helper.make_node("Equal", ["n", "one"], ["c"]),
        helper.make_node(
            "If",
            ["c"],
            ["y"],
            then_branch=helper.make_graph(
                [
                    helper.make_node("Constant", [], ["axes"], value=helper.make_tensor("axes", I64, [1], [-1])),
                    helper.make_node("Squeeze", ["x", "axes"], ["squeezed"]),
                ],
                "then",
                [],
                [vi("squeezed", F, None)],
            ),
            else_branch=helper.make_graph(
                [helper.make_node("Identity", ["x"], ["same"])], "else", [], [vi("same", F, None)]
            ),
        ),
        helper.make_node("Constant", [], ["axis1"], value=helper.make_tensor("axis1", I64, [1], [1])),
        helper.make_node("ReduceSum", ["y", "axis1"], ["out"], keepdims=0),
    ]
    graph = helper.make_graph(nodes, "g", [vi("x", F, ["b", 4, "t"])], [vi("out", F, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_shape_condition_decided_by_a_profile_that_fixes_the_dimension():
    x = np.random.default_rng(0).random((3, 4, 1), dtype=np.float32)
    compiled = plugrt.compile(squeeze_if_last_is_one(), shapes={"x": ((1, 4, 1), (2, 4, 1), (8, 4, 1))})
    got = compiled({"x": x})["out"]
    np.testing.assert_allclose(got, x[..., 0].sum(axis=1), rtol=1e-6)
    assert got.shape == (3,)
    kinds = {str(compiled.network.get_layer(i).type).lower() for i in range(compiled.network.num_layers)}
    assert not any("if" == k.split(".")[-1] for k in kinds)  # inlined: no if operator left
    x5 = np.random.default_rng(1).random((2, 4, 5), dtype=np.float32)
    other = plugrt.compile(squeeze_if_last_is_one(), shapes={"x": ((1, 4, 5), (2, 4, 5), (8, 4, 5))})
    np.testing.assert_allclose(other({"x": x5})["out"], x5.sum(axis=1), rtol=1e-6)


def test_shape_condition_without_shapes_is_decided_by_the_first_call():
    """Without shapes= the engine is built for the first call's shapes: the model is imported then, with
    those dimensions fixed, and the If is decided as with a profile that fixes them."""
    compiled = plugrt.compile(squeeze_if_last_is_one())
    assert compiled.engine is None and compiled.input_names == ["x"] and compiled.output_names == ["out"]
    x = np.random.default_rng(2).random((3, 4, 1), dtype=np.float32)
    got = compiled(x)["out"]
    assert got.shape == (3,)
    np.testing.assert_allclose(got, x[..., 0].sum(axis=1), rtol=1e-6)
    np.testing.assert_allclose(compiled({"x": x * 2})["out"], 2 * x[..., 0].sum(axis=1), rtol=1e-6)
    with pytest.raises(ShapeError, match=r"input 'x' must have shape \(3, 4, 1\)"):
        compiled({"x": np.zeros((3, 4, 5), np.float32)})
    other = plugrt.compile(squeeze_if_last_is_one())
    x5 = np.random.default_rng(3).random((2, 4, 5), dtype=np.float32)
    np.testing.assert_allclose(other.execute({"x": x5})["out"], x5.sum(axis=1), rtol=1e-6)


def test_shape_condition_over_a_dynamic_dimension_names_the_fix():
    with pytest.raises(OnnxImportError, match=r"If.*rank 2 in the then branch and 3.*fix them in the profile"):
        plugrt.compile(squeeze_if_last_is_one(), shapes={"x": ((1, 4, 1), (2, 4, 1), (8, 4, 6))})


def runtime_if_with_a_branch_for_other_shapes(both: bool = False):
    """if c: x * 2 else: Reshape(x, [2, 3]) -- the else branch only works when x has 6 elements (both: so does then)."""
    shape = helper.make_tensor("target", I64, [2], [2, 3])
    then_graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["twice"])], "then", [], [vi("twice", F, None)])
    else_graph = helper.make_graph(
        [
            helper.make_node("Constant", [], ["target"], value=shape),
            helper.make_node("Reshape", ["x", "target"], ["grid"]),
        ],
        "else",
        [],
        [vi("grid", F, None)],
    )
    if both:
        then_graph = else_graph
    node = helper.make_node("If", ["c"], ["y"], then_branch=then_graph, else_branch=else_graph)
    graph = helper.make_graph([node], "g", [vi("c", B, []), vi("x", F, [2, 4])], [vi("y", F, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_branch_that_cannot_run_at_these_shapes_fails_only_when_taken():
    compiled = plugrt.compile(runtime_if_with_a_branch_for_other_shapes())
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(compiled({"c": np.array(True), "x": x})["y"], x * 2)
    with pytest.raises(ExecutionError, match=r"\(if\).*Reshape.*cannot reshape \[2, 4\]"):
        compiled({"c": np.array(False), "x": x})


def test_both_branches_that_cannot_run_is_an_import_error():
    with pytest.raises(OnnxImportError, match=r"If.*then branch.*Reshape.*cannot reshape \[2, 4\]"):
        plugrt.compile(runtime_if_with_a_branch_for_other_shapes(both=True))
