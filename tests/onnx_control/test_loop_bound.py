"""The loop on one bound body (inputs written in place, scan results into their output slots) against
the generic path (the body run on fresh arrays each iteration), and the If of build-time constants.

The generic path is forced by making :meth:`SubgraphEngine.bound` find no bound body.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper

import plugrt
from plugrt.core.errors import ExecutionError
from plugrt.ops import control_flow
from plugrt.ops.subgraph import SubgraphEngine

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def loop_model(trip: int | None, stop_above: float | None):
    """s <- s * 0.5 + x * i; scans collect s and i; stops once sum(s) > stop_above (if given)."""
    nodes = [
        helper.make_node("Cast", ["i"], ["i_f"], to=F),
        helper.make_node("Mul", ["x", "i_f"], ["xi"]),
        helper.make_node("Constant", [], ["half"], value=helper.make_tensor("half", F, [], [0.5])),
        helper.make_node("Mul", ["s_in", "half"], ["s_half"]),
        helper.make_node("Add", ["s_half", "xi"], ["s_out"]),
        helper.make_node("Identity", ["s_out"], ["scan_s"]),
        helper.make_node("Identity", ["i"], ["scan_i"]),
    ]
    if stop_above is None:
        nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    else:
        nodes += [
            helper.make_node("ReduceSum", ["s_out"], ["total"], keepdims=0),
            helper.make_node("Constant", [], ["limit"], value=helper.make_tensor("limit", F, [], [stop_above])),
            helper.make_node("Less", ["total", "limit"], ["cond_out"]),
        ]
    body = helper.make_graph(
        nodes,
        "body",
        [vi("i", I64, []), vi("cond_in", B, []), vi("s_in", F, [2, 3])],
        [vi("cond_out", B, []), vi("s_out", F, [2, 3]), vi("scan_s", F, [2, 3]), vi("scan_i", I64, [])],
    )
    inits = [helper.make_tensor("cond0", B, [], [True])]
    if trip is not None:
        inits.append(helper.make_tensor("M", I64, [], [trip]))
    loop = helper.make_node(
        "Loop", ["M" if trip is not None else "", "cond0", "s0"], ["s", "all_s", "all_i"], body=body
    )
    graph = helper.make_graph(
        [loop],
        "g",
        [vi("s0", F, [2, 3]), vi("x", F, [2, 3])],
        [vi("s", F, [2, 3]), vi("all_s", F, None), vi("all_i", I64, None)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def run_both(model, feeds, monkeypatch):
    fast = plugrt.compile(model)(feeds)
    with monkeypatch.context() as patch:
        patch.setattr(SubgraphEngine, "bound", lambda self, arrays, xp: None)
        generic = plugrt.compile(model)(feeds)
    return fast, generic


@pytest.mark.parametrize(("trip", "stop_above"), [(5, None), (0, None), (9, 12.0), (None, 12.0), (6, 0.5)])
def test_bound_body_matches_the_generic_path(trip, stop_above, monkeypatch):
    rng = np.random.default_rng(0)
    feeds = {"s0": rng.random((2, 3), dtype=np.float32), "x": rng.random((2, 3), dtype=np.float32)}
    used = []
    original = control_flow.LoopOperator._run_bound
    monkeypatch.setattr(control_flow.LoopOperator, "_run_bound", lambda self, *a: used.append(1) or original(self, *a))
    fast, generic = run_both(loop_model(trip, stop_above), feeds, monkeypatch)
    assert used, "the loop did not run on a bound body"
    for name in ("s", "all_s", "all_i"):
        assert fast[name].shape == generic[name].shape, name
        np.testing.assert_array_equal(fast[name], generic[name])
    # and both against NumPy: the loop written out
    s, rows, steps = feeds["s0"].copy(), [], []
    for i in range(trip if trip is not None else 10**6):
        s = s * np.float32(0.5) + feeds["x"] * np.float32(i)
        rows.append(s)
        steps.append(i)
        if stop_above is not None and not s.sum() < stop_above:
            break
    np.testing.assert_allclose(fast["s"], s, rtol=1e-6)
    np.testing.assert_allclose(fast["all_s"], np.array(rows, np.float32).reshape(-1, 2, 3), rtol=1e-6)
    np.testing.assert_array_equal(fast["all_i"], np.array(steps, np.int64))


def test_bound_body_past_its_planned_iterations_fails_clearly(monkeypatch):
    monkeypatch.setattr("plugrt.onnx.importers.control_flow.UNBOUNDED_LOOP_LIMIT", 3)
    compiled = plugrt.compile(loop_model(None, 1e9))
    feeds = {"s0": np.ones((2, 3), np.float32), "x": np.ones((2, 3), np.float32)}
    with pytest.raises(ExecutionError, match=r"loop .*runs past 3 iterations"):
        compiled(feeds)


def test_if_of_constants_becomes_a_where():
    then_graph = helper.make_graph(
        [helper.make_node("Constant", [], ["a"], value=helper.make_tensor("a", F, [2], [1.0, 2.0]))],
        "then",
        [],
        [vi("a", F, [2])],
    )
    else_graph = helper.make_graph([helper.make_node("Identity", ["b"], ["b_out"])], "else", [], [vi("b_out", F, [2])])
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
        helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("zero", F, [], [0.0])),
        helper.make_node("Greater", ["total", "zero"], ["c"]),
        helper.make_node("If", ["c"], ["y"], then_branch=then_graph, else_branch=else_graph),
    ]
    inits = [helper.make_tensor("b", F, [2], [-3.0, -4.0])]
    graph = helper.make_graph(nodes, "g", [vi("x", F, [3])], [vi("y", F, [2])], inits)
    compiled = plugrt.compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    kinds = {compiled.engine.plan.layers[i].kind for i in range(len(compiled.engine.plan.layers))}
    assert "if" not in kinds and "where" in kinds
    np.testing.assert_array_equal(compiled({"x": np.ones(3, np.float32)})["y"], [1.0, 2.0])
    np.testing.assert_array_equal(compiled({"x": -np.ones(3, np.float32)})["y"], [-3.0, -4.0])


def test_context_rerun_follows_new_addresses_and_shapes():
    """Runs with nothing set since the last skip the context's checks; a new address or shape is seen."""
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    graph = helper.make_graph(nodes, "g", [vi("x", F, ["n"])], [vi("y", F, ["n"])])
    compiled = plugrt.compile(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), shapes={"x": ((1,), (4,), (8,))}
    )
    context = compiled.engine.create_execution_context()
    x, y = np.array([-1.0, 2.0, -3.0, 4.0], np.float32), np.zeros(4, np.float32)
    context.set_input_shape("x", (4,))
    context.set_tensor_address("x", x.ctypes.data)
    context.set_tensor_address("y", y.ctypes.data)
    context.execute_async_v3(0)
    np.testing.assert_array_equal(y, [0, 2, 0, 4])
    x[...] = [5.0, -6.0, 7.0, -8.0]  # same addresses, new data
    context.execute_async_v3(0)
    np.testing.assert_array_equal(y, [5, 0, 7, 0])
    other = np.zeros(4, np.float32)  # a new output address
    context.set_tensor_address("y", other.ctypes.data)
    context.execute_async_v3(0)
    np.testing.assert_array_equal(other, [5, 0, 7, 0])
    short, out = np.array([-2.0, 3.0], np.float32), np.zeros(2, np.float32)  # a new shape
    context.set_input_shape("x", (2,))
    context.set_tensor_address("x", short.ctypes.data)
    context.set_tensor_address("y", out.ctypes.data)
    context.execute_async_v3(0)
    np.testing.assert_array_equal(out, [0, 3])


def test_bound_body_runs_with_floating_point_warnings_silenced():
    """inf and nan are answers, as on a GPU: a loop whose body divides by zero raises no warning."""
    body = helper.make_graph(
        [
            helper.make_node("Div", ["s_in", "zero"], ["s_out"]),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        "body",
        [vi("i", I64, []), vi("cond_in", B, []), vi("s_in", F, [2])],
        [vi("cond_out", B, []), vi("s_out", F, [2])],
    )
    inits = [
        helper.make_tensor("M", I64, [], [3]),
        helper.make_tensor("cond0", B, [], [True]),
        helper.make_tensor("zero", F, [], [0.0]),
    ]
    loop = helper.make_node("Loop", ["M", "cond0", "s0"], ["s"], body=body)
    graph = helper.make_graph([loop], "g", [vi("s0", F, [2])], [vi("s", F, [2])], inits)
    compiled = plugrt.compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = compiled({"s0": np.array([1.0, 0.0], np.float32)})["s"]
    assert np.isinf(got[0]) and np.isnan(got[1])


def test_runtime_if_on_its_bound_branches_matches_the_generic_path(monkeypatch):
    """A condition read from data: each branch bound once, taken in turn over runs of one context."""
    then_graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "x"], ["sq"]), helper.make_node("Add", ["sq", "y"], ["t_out"])],
        "then",
        [],
        [vi("t_out", F, [2, 3])],
    )
    else_graph = helper.make_graph(
        [helper.make_node("Sub", ["y", "x"], ["e_out"])], "else", [], [vi("e_out", F, [2, 3])]
    )
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
        helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("zero", F, [], [0.0])),
        helper.make_node("Greater", ["total", "zero"], ["c"]),
        helper.make_node("If", ["c"], ["z"], then_branch=then_graph, else_branch=else_graph),
    ]
    graph = helper.make_graph(nodes, "g", [vi("x", F, [2, 3]), vi("y", F, [2, 3])], [vi("z", F, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    rng = np.random.default_rng(4)
    feeds = [
        {
            "x": np.abs(rng.standard_normal((2, 3)).astype(np.float32)) * sign,
            "y": rng.standard_normal((2, 3)).astype(np.float32),
        }
        for sign in (1, -1, -1, 1)
    ]
    with monkeypatch.context() as patch:
        patch.setattr(SubgraphEngine, "bound", lambda self, arrays, xp: None)
        generic = plugrt.compile(model)
        wanted = [generic(feed)["z"] for feed in feeds]
    compiled = plugrt.compile(model)
    context = compiled.engine.create_execution_context()  # one binding over all runs: the branches stay bound
    x, y, z = (np.zeros((2, 3), np.float32) for _ in range(3))
    for name, array in (("x", x), ("y", y), ("z", z)):
        context.set_tensor_address(name, array.ctypes.data)
    for feed, want in zip(feeds, wanted):
        x[...], y[...] = feed["x"], feed["y"]
        context.execute_async_v3(0)
        np.testing.assert_array_equal(z, want)
        np.testing.assert_allclose(z, x * x + y if x.sum() > 0 else y - x, rtol=1e-6)
    step = next(s for s in context._executor.steps if s.layer.kind == "if")
    assert set(step.node._branches) == {"then", "else"} and all(step.node._branches.values())
    assert step.node.prepared_launch(0)[0] != step.node.run  # the run list calls its direct launch


def test_moving_one_output_of_a_loop_that_stops_on_data():
    """Scan outputs sized by the data (a loop that may stop early) make the run bind in full: an output that
    did not move is bound where it is, beside the one that did."""
    from plugrt.engine.host_run import _Allocator

    compiled = plugrt.compile(loop_model(None, 12.0))
    engine = compiled.engine
    context = engine.create_execution_context()
    rng = np.random.default_rng(6)
    s0, x = rng.random((2, 3), dtype=np.float32), rng.random((2, 3), dtype=np.float32)
    s = np.zeros((2, 3), np.float32)
    for name, array in (("s0", s0), ("x", x), ("s", s)):
        context.set_tensor_address(name, array.ctypes.data)
    allocators = {name: _Allocator(engine.backend) for name in ("all_s", "all_i")}
    for name, allocator in allocators.items():
        context.set_output_allocator(name, allocator)
    context.execute_async_v3(0)
    want = compiled({"s0": s0, "x": x})
    np.testing.assert_array_equal(s, want["s"])
    x2 = x * 2  # the input moves, the output stays
    context.set_tensor_address("x", x2.ctypes.data)
    context.execute_async_v3(0)
    want = compiled({"s0": s0, "x": x2})
    np.testing.assert_array_equal(s, want["s"])
    np.testing.assert_array_equal(allocators["all_s"].array(np.dtype(np.float32)), want["all_s"])
