"""Scan on its bound body (slices written into the body's buffers, states carried as one copy, results written
into the stacked outputs) against the per-step path (the body run on fresh arrays each step), on ONNX's own
Scan node cases and on hand-built ones: directions, axes, several states of other types, outer values, the
opset-8 batch, an empty sequence.

The per-step path is forced by making :meth:`SubgraphEngine.bound` find no bound body.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper

import plugrt
from plugrt.ops import control_flow
from plugrt.ops.subgraph import SubgraphEngine

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def run_both(model, feeds, monkeypatch, shapes=None):
    """The outputs of the bound path and of the per-step path; checks that the bound path ran."""
    used = []
    original = control_flow.ScanOperator._run_bound
    with monkeypatch.context() as patch:
        patch.setattr(
            control_flow.ScanOperator, "_run_bound", lambda self, scan: used.append(1) or original(self, scan)
        )
        fast = plugrt.compile(model, shapes=shapes)(feeds)
    assert used, "the scan did not run on a bound body"
    with monkeypatch.context() as patch:
        patch.setattr(SubgraphEngine, "bound", lambda self, arrays, xp: None)
        generic = plugrt.compile(model, shapes=shapes)(feeds)
    assert fast.keys() == generic.keys()
    for name in fast:
        assert fast[name].shape == generic[name].shape, name
        assert fast[name].dtype == generic[name].dtype, name
        np.testing.assert_array_equal(fast[name], generic[name], err_msg=name)
    return fast


def onnx_cases():
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases("Scan")  # (every op's, once another caller has collected them all)
    return [case for case in cases if case.name.startswith("test_scan")]


@pytest.mark.parametrize("case", onnx_cases(), ids=lambda case: case.name)
def test_onnx_scan_cases(case, monkeypatch):
    model = case.model
    for inputs, outputs in case.data_sets:
        feeds = {value.name: array for value, array in zip(model.graph.input, inputs)}
        got = run_both(model, feeds, monkeypatch)
        for value, want in zip(model.graph.output, outputs):
            np.testing.assert_allclose(got[value.name], want, rtol=1e-6)


def two_input_scan(input_directions, output_axes, output_directions, input_axes=(0, 1)):
    """acc <- (acc + a_t) * w + b_t; count <- count + 1 (INT64); results: acc, a_t * count, acc."""
    body = helper.make_graph(
        [
            helper.make_node("Add", ["acc_in", "a_t"], ["sum"]),
            helper.make_node("Mul", ["sum", "w"], ["scaled"]),
            helper.make_node("Add", ["scaled", "b_t"], ["acc_out"]),
            helper.make_node("Constant", [], ["one"], value=helper.make_tensor("one", I64, [], [1])),
            helper.make_node("Add", ["count_in", "one"], ["count_out"]),
            helper.make_node("Cast", ["count_out"], ["count_f"], to=F),
            helper.make_node("Mul", ["a_t", "count_f"], ["weighted"]),
            helper.make_node("Identity", ["acc_out"], ["acc_step"]),
        ],
        "body",
        [vi("acc_in", F, [3]), vi("count_in", I64, []), vi("a_t", F, [3]), vi("b_t", F, [3])],
        [vi("acc_out", F, [3]), vi("count_out", I64, []), vi("weighted", F, [3]), vi("acc_step", F, [3])],
    )
    node = helper.make_node(
        "Scan",
        ["acc0", "count0", "a", "b"],
        ["acc", "count", "ys", "accs"],
        body=body,
        num_scan_inputs=2,
        scan_input_directions=list(input_directions),
        scan_input_axes=list(input_axes),
        scan_output_axes=list(output_axes),
        scan_output_directions=list(output_directions),
    )
    a_shape = ["n", 3] if input_axes[0] == 0 else [3, "n"]
    b_shape = ["n", 3] if input_axes[1] == 0 else [3, "n"]
    graph = helper.make_graph(
        [node],
        "g",
        [vi("acc0", F, [3]), vi("count0", I64, []), vi("a", F, a_shape), vi("b", F, b_shape), vi("w", F, [3])],
        [vi("acc", F, [3]), vi("count", I64, []), vi("ys", F, None), vi("accs", F, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])


def reference(feeds, input_directions, output_axes, output_directions, input_axes):
    a = feeds["a"] if input_axes[0] == 0 else feeds["a"].T
    b = feeds["b"] if input_axes[1] == 0 else feeds["b"].T
    n = len(a)
    acc, count = feeds["acc0"].copy(), int(feeds["count0"])
    ys, accs = [], []
    for step in range(n):
        a_t = a[n - 1 - step] if input_directions[0] else a[step]
        b_t = b[n - 1 - step] if input_directions[1] else b[step]
        acc = (acc + a_t) * feeds["w"] + b_t
        count += 1
        ys.append(a_t * np.float32(count))
        accs.append(acc)
    stacked = []
    for values, axis, reverse in zip((ys, accs), output_axes, output_directions):
        values = values[::-1] if reverse else values
        stacked.append(np.stack(values, axis=axis) if values else np.zeros((0, 3) if axis == 0 else (3, 0), np.float32))
    return acc, count, *stacked


@pytest.mark.parametrize(
    ("input_directions", "output_axes", "output_directions", "input_axes"),
    [((0, 0), (0, 0), (0, 0), (0, 0)), ((1, 0), (1, 0), (0, 1), (0, 1)), ((0, 1), (0, 1), (1, 1), (1, 0))],
)
@pytest.mark.parametrize("n", [1, 5])
def test_directions_axes_and_mixed_states(input_directions, output_axes, output_directions, input_axes, n, monkeypatch):
    model = two_input_scan(input_directions, output_axes, output_directions, input_axes)
    rng = np.random.default_rng(n)
    a = rng.standard_normal((n, 3) if input_axes[0] == 0 else (3, n)).astype(np.float32)
    b = rng.standard_normal((n, 3) if input_axes[1] == 0 else (3, n)).astype(np.float32)
    feeds = {
        "acc0": rng.standard_normal(3).astype(np.float32),
        "count0": np.array(4, np.int64),
        "a": a,
        "b": b,
        "w": np.array([0.5, -1.0, 2.0], np.float32),
    }
    shapes = {name: (feeds[name].shape,) * 3 for name in ("a", "b")}
    got = run_both(model, feeds, monkeypatch, shapes)
    acc, count, ys, accs = reference(feeds, input_directions, output_axes, output_directions, input_axes)
    np.testing.assert_allclose(got["acc"], acc, rtol=1e-6)
    assert int(got["count"]) == count
    np.testing.assert_allclose(got["ys"], ys, rtol=1e-6)
    np.testing.assert_allclose(got["accs"], accs, rtol=1e-6)


def test_a_context_runs_the_bound_scan_again_with_new_data(monkeypatch):
    model = two_input_scan((0, 1), (0, 0), (0, 1))
    compiled = plugrt.compile(model)
    rng = np.random.default_rng(3)
    for _ in range(3):
        feeds = {
            "acc0": rng.standard_normal(3).astype(np.float32),
            "count0": np.array(0, np.int64),
            "a": rng.standard_normal((4, 3)).astype(np.float32),
            "b": rng.standard_normal((3, 4)).astype(np.float32),
            "w": rng.standard_normal(3).astype(np.float32),
        }
        got = compiled(feeds)
        acc, count, ys, accs = reference(feeds, (0, 1), (0, 0), (0, 1), (0, 1))
        assert int(got["count"]) == count
        np.testing.assert_allclose(got["ys"], ys, rtol=1e-5)
        np.testing.assert_allclose(got["acc"], acc, rtol=1e-5)
        np.testing.assert_allclose(got["accs"], accs, rtol=1e-5)


def test_opset8_batch_runs_each_sequence(monkeypatch):
    """Opset 8: axis 0 is a batch; each element scans its own sequence with its own state."""
    body = helper.make_graph(
        [
            helper.make_node("Mul", ["s_in", "x_t"], ["s_out"]),
            helper.make_node("Add", ["s_out", "x_t"], ["y_t"]),
        ],
        "body",
        [vi("s_in", F, [2]), vi("x_t", F, [2])],
        [vi("s_out", F, [2]), vi("y_t", F, [2])],
    )
    node = helper.make_node("Scan", ["", "s0", "xs"], ["s", "ys"], body=body, num_scan_inputs=1, directions=[1])
    graph = helper.make_graph(
        [node], "g", [vi("s0", F, [3, 2]), vi("xs", F, [3, 4, 2])], [vi("s", F, [3, 2]), vi("ys", F, [3, 4, 2])]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)])
    rng = np.random.default_rng(8)
    feeds = {
        "s0": rng.standard_normal((3, 2)).astype(np.float32),
        "xs": rng.standard_normal((3, 4, 2)).astype(np.float32),
    }
    got = run_both(model, feeds, monkeypatch)
    for b in range(3):
        s, ys = feeds["s0"][b].copy(), []
        for x_t in feeds["xs"][b][::-1]:
            s = s * x_t
            ys.append(s + x_t)
        np.testing.assert_allclose(got["s"][b], s, rtol=1e-6)
        np.testing.assert_allclose(got["ys"][b], np.stack(ys), rtol=1e-6)


def test_empty_sequence_keeps_the_initial_states(monkeypatch):
    model = two_input_scan((0, 0), (0, 0), (0, 0))
    feeds = {
        "acc0": np.array([1.0, 2.0, 3.0], np.float32),
        "count0": np.array(7, np.int64),
        "a": np.zeros((0, 3), np.float32),
        "b": np.zeros((3, 0), np.float32),
        "w": np.ones(3, np.float32),
    }
    shapes = {"a": ((0, 3), (0, 3), (2, 3)), "b": ((3, 0), (3, 0), (3, 2))}
    got = plugrt.compile(model, shapes=shapes)(feeds)
    np.testing.assert_array_equal(got["acc"], feeds["acc0"])
    assert int(got["count"]) == 7
    assert got["ys"].shape == (0, 3) and got["accs"].shape == (0, 3)
