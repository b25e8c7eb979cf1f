"""ONNX Loop, If and Scan: hand-built graphs against NumPy (and onnxruntime where it is installed)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import plugrt
from plugrt.onnx.importers.base import OnnxImportError

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def counting_loop(limit_in_body: bool, trip: int | None):
    """Loop: state s += x (x read from the outer scope); scan output collects s; stops when s > limit."""
    body_nodes = [
        helper.make_node("Add", ["s_in", "x"], ["s_out"]),
        helper.make_node("Identity", ["s_out"], ["scan"]),
    ]
    if limit_in_body:
        body_nodes += [
            helper.make_node("ReduceSum", ["s_out"], ["total"], keepdims=0),
            helper.make_node("Less", ["total", "limit"], ["cond_out"]),
        ]
    else:
        body_nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    body = helper.make_graph(
        body_nodes,
        "body",
        [vi("i", I64, []), vi("cond_in", B, []), vi("s_in", F, [2])],
        [vi("cond_out", B, []), vi("s_out", F, [2]), vi("scan", F, [2])],
    )
    inits = [helper.make_tensor("limit", F, [], [10.0]), helper.make_tensor("cond0", B, [], [True])]
    if trip is not None:
        inits.append(helper.make_tensor("M", I64, [], [trip]))
    loop = helper.make_node("Loop", ["M" if trip is not None else "", "cond0", "s0"], ["s_final", "scans"], body=body)
    return model([loop], [vi("s0", F, [2]), vi("x", F, [2])], [vi("s_final", F, [2]), vi("scans", F, None)], inits)


def reference_loop(s0, x, trip, limit_in_body):
    s, scans, i = s0.copy(), [], 0
    while trip is None or i < trip:
        s = s + x
        scans.append(s.copy())
        i += 1
        if limit_in_body and not s.sum() < 10.0:
            break
    return s, np.stack(scans)


@pytest.mark.parametrize(("trip", "limit_in_body"), [(4, False), (20, True), (None, True)])
def test_loop_matches_numpy(trip, limit_in_body):
    compiled = plugrt.compile(counting_loop(limit_in_body, trip))
    s0 = np.array([0.5, 1.0], np.float32)
    x = np.array([1.0, 0.25], np.float32)
    got = compiled({"s0": s0, "x": x})
    want_s, want_scans = reference_loop(s0, x, trip, limit_in_body)
    np.testing.assert_allclose(got["s_final"], want_s, rtol=1e-6)
    np.testing.assert_allclose(got["scans"], want_scans, rtol=1e-6)
    # a second call with other data stops at another step: the data-dependent size is read again
    got = compiled({"s0": s0 * 4, "x": x})
    want_s, want_scans = reference_loop(s0 * 4, x, trip, limit_in_body)
    np.testing.assert_allclose(got["scans"], want_scans, rtol=1e-6)


def branchy_if():
    then_graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "x"], ["y_then"])], "then", [], [vi("y_then", F, None)]
    )
    else_graph = helper.make_graph(
        [helper.make_node("Concat", ["x", "x"], ["y_else"], axis=0)], "else", [], [vi("y_else", F, None)]
    )
    node = helper.make_node("If", ["c"], ["y"], then_branch=then_graph, else_branch=else_graph)
    return model([node], [vi("c", B, []), vi("x", F, [3])], [vi("y", F, None)])


def test_if_runtime_condition_with_branch_dependent_shape():
    compiled = plugrt.compile(branchy_if())
    x = np.array([1.0, 2.0, 3.0], np.float32)
    np.testing.assert_array_equal(compiled({"c": np.array(True), "x": x})["y"], x * x)
    np.testing.assert_array_equal(compiled({"c": np.array(False), "x": x})["y"], np.concatenate([x, x]))


def test_if_with_constant_condition_is_inlined():
    m = branchy_if()
    m.graph.input.pop(0)
    m.graph.initializer.append(helper.make_tensor("c", B, [], [False]))
    compiled = plugrt.compile(m)
    kinds = [compiled.network.get_layer(i).type for i in range(compiled.network.num_layers)]
    assert "if" not in {getattr(k, "name", str(k)).lower() for k in kinds}
    x = np.array([1.0, 2.0, 3.0], np.float32)
    np.testing.assert_array_equal(compiled({"x": x})["y"], np.concatenate([x, x]))


def test_scan_reverse_with_outer_value():
    body = helper.make_graph(
        [
            helper.make_node("Add", ["acc_in", "row"], ["sum"]),
            helper.make_node("Mul", ["sum", "w"], ["acc_out"]),
            helper.make_node("Identity", ["acc_out"], ["step"]),
        ],
        "body",
        [vi("acc_in", F, [2]), vi("row", F, [2])],
        [vi("acc_out", F, [2]), vi("step", F, [2])],
    )
    node = helper.make_node(
        "Scan", ["acc0", "xs"], ["acc", "steps"], body=body, num_scan_inputs=1,
        scan_input_directions=[1], scan_output_axes=[1],
    )
    m = model([node], [vi("acc0", F, [2]), vi("xs", F, ["n", 2]), vi("w", F, [2])],
              [vi("acc", F, [2]), vi("steps", F, None)])
    compiled = plugrt.compile(m, shapes={"xs": ((1, 2), (4, 2), (8, 2))})
    xs = np.arange(10, dtype=np.float32).reshape(5, 2)
    w = np.array([0.5, 2.0], np.float32)
    acc, steps = np.zeros(2, np.float32), []
    for row in xs[::-1]:
        acc = (acc + row) * w
        steps.append(acc)
    got = compiled({"acc0": np.zeros(2, np.float32), "xs": xs, "w": w})
    np.testing.assert_allclose(got["acc"], acc, rtol=1e-6)
    np.testing.assert_allclose(got["steps"], np.stack(steps, axis=1), rtol=1e-6)


def test_loop_body_with_wrong_arity_is_rejected():
    m = counting_loop(False, 3)
    body = m.graph.node[0].attribute[0].g
    del body.output[1:]
    with pytest.raises(OnnxImportError, match=r"returns 1 results.*must take 3 and return at least 2"):
        plugrt.compile(m)


def test_body_reading_an_unknown_outer_name_is_rejected():
    m = counting_loop(False, 3)
    m.graph.node[0].attribute[0].g.input.pop()  # s_in is now an outer-scope name nobody produces
    with pytest.raises(OnnxImportError, match="input 's_in' is not produced"):
        plugrt.compile(m)


def test_loop_carried_value_that_changes_shape_is_rejected():
    m = counting_loop(False, 3)
    body = m.graph.node[0].attribute[0].g
    body.node[0].op_type = "Concat"
    body.node[0].attribute.append(helper.make_attribute("axis", 0))
    with pytest.raises(OnnxImportError, match="loop-carried value 0 changes shape"):
        plugrt.compile(m)


def test_body_that_does_not_import_names_the_node():
    m = counting_loop(False, 3)
    m.graph.node[0].attribute[0].g.node[0].op_type = "NoSuchOp"
    with pytest.raises(OnnxImportError, match=r"Loop.*its body cannot be imported.*NoSuchOp"):
        plugrt.compile(m)


def test_unbounded_loop_past_its_planned_iterations_fails_clearly(monkeypatch):
    from plugrt.onnx.importers import control_flow

    monkeypatch.setattr(control_flow, "UNBOUNDED_LOOP_LIMIT", 3)
    compiled = plugrt.compile(counting_loop(True, None))
    small = np.array([0.01, 0.01], np.float32)
    with pytest.raises(plugrt.ExecutionError, match="runs past 3 iterations"):
        compiled({"s0": small, "x": small})


def test_data_dependent_output_is_sized_again_on_every_run():
    nonzero = helper.make_node("NonZero", ["x"], ["y"])
    compiled = plugrt.compile(model([nonzero], [vi("x", F, [4])], [vi("y", I64, None)]))
    assert compiled({"x": np.array([1, 0, 1, 1], np.float32)})["y"].tolist() == [[0, 2, 3]]
    assert compiled({"x": np.array([1, 0, 0, 0], np.float32)})["y"].tolist() == [[0]]
