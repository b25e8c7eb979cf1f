"""Attention inputs read as views of their source (``builder/passes/view_chains.py``): the chain
``nn.MultiheadAttention`` exports to split q, k and v off one packed projection (Reshape, Unsqueeze, Transpose,
Squeeze, one Gather each, then Reshape, Transpose, Reshape per input) is taken into the attention layer as a
split, a fixed index and a permutation of that projection; bit-identical with the unfused engine on its own
kernel, within 2e-5 with PyTorch's; a chain tensor someone else reads, or a reshape no view shows, stays a layer;
the operator's checks of a recipe."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt
from plugrt.builder.fusion import DISABLE_ENV
from plugrt.core.errors import NetworkError, ShapeError
from plugrt.ops.attention import AttentionOperator
from plugrt.shape import constant, symbol

RNG = np.random.default_rng(31)
S, D, H = 10, 24, 3
n = helper.make_node


def _packed(extra_output: bool = False, plain_reshape: bool = False, batch: object = "B"):  # type: ignore[no-untyped-def]
    """x [S, B, D] (sequence first) → one projection [S, B, 3D] → q, k, v as the exporter splits them → attention
    → [S, B, D]. ``extra_output``: the squeezed [3, S, B, D] is a network output too; ``plain_reshape``: q is the
    projection's slice reshaped straight to [B, H, S, d] (a reshape no view of the source shows)."""
    d = D // H
    nodes = [
        n("MatMul", ["x", "w"], ["p"]),
        n("Reshape", ["p", "split3"], ["p4"]),
        n("Unsqueeze", ["p4", "zero_axis"], ["p5"]),
        n("Transpose", ["p5"], ["t5"], perm=[3, 1, 2, 0, 4]),
        n("Squeeze", ["t5", "three_axis"], ["qkv"]),
    ]
    for k, name in enumerate("qkv"):
        nodes.append(n("Gather", ["qkv", f"i{k}"], [f"{name}0"], axis=0))
        if plain_reshape and name == "q":
            nodes.append(n("Reshape", ["q0", "heads_first"], ["q"]))
            continue
        nodes += [
            n("Reshape", [f"{name}0", "per_head"], [f"{name}1"]),
            n("Transpose", [f"{name}1"], [f"{name}2"], perm=[1, 0, 2]),
            n("Reshape", [f"{name}2", "heads_first"], [name]),
        ]
    nodes += [
        n("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
        n("MatMul", ["q", "kt"], ["raw"]),
        n("Div", ["raw", "c"], ["scaled"]),
        n("Softmax", ["scaled"], ["prob"], axis=-1),
        n("MatMul", ["prob", "v"], ["ctx"]),
        n("Transpose", ["ctx"], ["ctx2"], perm=[2, 0, 1, 3]),
        n("Reshape", ["ctx2", "merge"], ["y"]),
    ]
    ints = {
        "split3": [0, 0, 3, D],
        "zero_axis": [0],
        "three_axis": [3],
        "per_head": [S, -1, d],
        "heads_first": [-1, H, S, d],
        "merge": [S, -1, D],
    }
    inits = [numpy_helper.from_array((RNG.standard_normal((D, 3 * D)) * 0.3).astype(np.float32), "w")]
    inits.append(numpy_helper.from_array(np.array(np.sqrt(d), np.float32), "c"))
    inits += [numpy_helper.from_array(np.array(k, np.int64), f"i{k}") for k in range(3)]
    inits += [numpy_helper.from_array(np.array(v, np.int64), name) for name, v in ints.items()]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if extra_output:
        outputs.append(helper.make_tensor_value_info("qkv", TensorProto.FLOAT, None))
    graph = helper.make_graph(
        nodes, "packed", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [S, batch, D])], outputs, inits
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _x(batch: int = 2) -> np.ndarray:
    return RNG.standard_normal((S, batch, D)).astype(np.float32)


def _compare(monkeypatch, model, torch_tactic: str):  # type: ignore[no-untyped-def]
    """The fused engine, checked against the unfused one at two batch sizes (see the module's note)."""
    shapes = {"x": ((S, 1, D), (S, 2, D), (S, 4, D))}
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    monkeypatch.setenv(DISABLE_ENV, "attention")
    plain = plugrt.compile(model, shapes=shapes)
    monkeypatch.setenv(DISABLE_ENV, "")
    monkeypatch.setenv("PLUGRT_TORCH", torch_tactic)
    fused = plugrt.compile(model, shapes=shapes)
    for batch in (2, 3):
        x = _x(batch)
        want, got = plain(x=x), fused(x=x)
        for name in want:
            if torch_tactic == "0":
                np.testing.assert_array_equal(got[name], want[name])
            else:
                np.testing.assert_allclose(got[name], want[name], rtol=0, atol=2e-5 * float(np.abs(want[name]).max()))
    return fused


def _attention(fused):  # type: ignore[no-untyped-def]
    layers = fused.engine.plan.layers
    return next(layer for layer in layers if layer.kind == "attention"), [layer.kind for layer in layers]


@pytest.mark.parametrize("torch_tactic", ["0", "always"])
def test_q_k_and_v_split_off_one_projection_are_read_as_views_of_it(monkeypatch, torch_tactic: str) -> None:
    if torch_tactic != "0":
        pytest.importorskip("torch")
    layer, kinds = _attention(_compare(monkeypatch, _packed(), torch_tactic))
    # the projection [S, B, 3D] as atoms S, B, 3, H, d; q, k and v fix the "3" atom at 0, 1 and 2
    assert layer.params["split_a"] == [[S], [-1], [3, H, D // H]]
    assert [layer.params[f"select_{x}"] for x in "abv"] == [[2, 0], [2, 1], [2, 2]]
    assert layer.params["perm_a"] == layer.params["perm_v"] == [1, 2, 0, 3]  # [B, H, S, d]
    assert layer.params["perm_b"] == [1, 2, 3, 0]  # k transposed: [B, H, d, S]
    assert len(set(layer.inputs[:3])) == 1  # all three read the projection
    assert not {"gather", "squeeze", "unsqueeze"} & set(kinds)
    assert kinds.count("shuffle") == 1  # the result's merge reshape, a view


@pytest.mark.parametrize("torch_tactic", ["0", "always"])
def test_a_batch_of_one_fixed_by_the_export_is_a_unit_axis_of_the_views(monkeypatch, torch_tactic: str) -> None:
    """An export with the batch fixed at 1: that axis spans no atom; the views give it back as a unit axis (-1)."""
    if torch_tactic != "0":
        pytest.importorskip("torch")
    model, x = _packed(batch=1), _x(1)
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    monkeypatch.setenv(DISABLE_ENV, "attention")
    want = plugrt.compile(model)(x=x)["y"]
    monkeypatch.setenv(DISABLE_ENV, "")
    monkeypatch.setenv("PLUGRT_TORCH", torch_tactic)
    fused = plugrt.compile(model)
    got = fused(x=x)["y"]
    if torch_tactic == "0":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * float(np.abs(want).max()))
    layer, kinds = _attention(fused)
    assert layer.params["split_a"] == [[S], [], [3, H, D // H]] and layer.params["perm_a"] == [-1, 1, 0, 2]
    assert not {"gather", "squeeze", "unsqueeze"} & set(kinds)


def test_a_chain_tensor_the_caller_reads_is_where_the_views_start(monkeypatch) -> None:
    layer, kinds = _attention(_compare(monkeypatch, _packed(extra_output=True), "0"))
    # [3, S, B, D] is a network output: the layers making it run, the Gathers and what follows are views of it
    assert "squeeze" in kinds and "gather" not in kinds
    assert layer.params["split_v"] == [[3], [S], [-1], [H, D // H]] and layer.params["select_v"] == [0, 2]


def test_a_reshape_no_view_shows_is_left_to_run(monkeypatch) -> None:
    layer, kinds = _attention(_compare(monkeypatch, _packed(plain_reshape=True), "0"))
    # q's reshape [S, B, D] -> [B, H, S, d] regroups elements across S and B: q's chain is not taken in, so q's
    # Gather reads [3, S, B, D] too, and k and v are read as views of that tensor, not of the projection
    assert "split_a" not in layer.params and kinds.count("gather") == 1
    assert layer.params["split_b"] == [[3], [S], [-1], [H, D // H]] and layer.params["select_b"] == [0, 1]


def test_a_recipe_that_cannot_be_read_is_refused() -> None:
    with pytest.raises(NetworkError, match="split_a"):
        AttentionOperator({"split_a": [[-1, -1]]})
    with pytest.raises(NetworkError, match=r"select_b .* needs split_b"):
        AttentionOperator({"select_b": [0, 1]})
    with pytest.raises(NetworkError, match=r"select_v .* outside split_v"):
        AttentionOperator({"split_v": [[2, 3]], "select_v": [5, 0]})
    with pytest.raises(NetworkError, match=r"perm_a .* atoms left"):
        AttentionOperator({"split_a": [[2, 3], [4]], "select_a": [0, 1], "perm_a": [1, 0, 2]})
    with pytest.raises(NetworkError, match=r"perm_b .* atoms left"):
        AttentionOperator({"split_b": [[2, 3], [4]], "perm_b": [-1, 0, 0, 2]})
    with pytest.raises(NetworkError, match=r"perm_a \[1, 1\] is not a permutation"):
        AttentionOperator({"perm_a": [1, 1]})
    op = AttentionOperator({"split_a": [[-1], [3, 4]], "perm_a": [0, 1, 2]})
    b = symbol("b")
    shapes = [[b, constant(10)], [b, constant(12), constant(5)], [b, constant(5), constant(7)]]
    with pytest.raises(ShapeError, match="input 0's dim 10 does not split into \\[3, 4\\]"):
        op.output_shapes(shapes, [None, None, None])
