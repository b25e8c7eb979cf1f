"""The attention rule: ``MatMul → [Div/Mul c] → [Add mask] → Softmax → MatMul`` as exported becomes one ``attention``
layer whose own kernel gives the unfused engine's results bit for bit (``PLUGRT_DISABLE_PASSES=attention``); the
PyTorch tactic (scaled_dot_product_attention) within 2e-5 of the output's scale; what must not fuse, does not;
the operator's misuse errors."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt
from plugrt.builder.fusion import DISABLE_ENV
from plugrt.core.errors import NetworkError, ShapeError, TypeMismatchError
from plugrt.core.types import DataType
from plugrt.ops.attention import AttentionOperator
from plugrt.shape import constant

from export_graphs import masked_attention

RNG = np.random.default_rng(23)
n = helper.make_node


def _model(nodes, inits, inputs, outputs=("y",)):  # type: ignore[no-untyped-def]
    graph = helper.make_graph(
        nodes,
        "attention",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)) for name, shape in inputs.items()],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in inits.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _heads(  # type: ignore[no-untyped-def]
    scale: str, mask: bool, transpose_k: bool, guard: bool = False, sdpa: bool = False
):
    """x [B, S, 32] → q, k, v of 4 heads of 8 → softmax(q k^T (op) c + mask) v, as the torchscript exporter writes it;
    ``sdpa``: as it writes ``scaled_dot_product_attention``, the query and the key each times the square root of
    the scale after their transposes, the result reshaped to its own dims before its transpose."""
    nodes = []
    for name in "qkv":
        nodes += [
            n("MatMul", ["x", f"w{name}"], [f"{name}2"]),
            n("Reshape", [f"{name}2", "split"], [f"{name}3"]),
            n(
                "Transpose",
                [f"{name}3"],
                [f"{name}4" if sdpa and name != "v" else name],
                perm=[0, 2, 3, 1] if name == "k" and transpose_k else [0, 2, 1, 3],
            ),
        ]
        if sdpa and name != "v":
            nodes.append(n("Mul", [f"{name}4", "root"], [name]))
    if transpose_k:
        nodes.append(n("MatMul", ["q", "k"], ["raw"]))
    else:
        nodes += [n("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]), n("MatMul", ["q", "kt"], ["raw"])]
    last = "raw"
    if scale:
        nodes.append(n(scale, ["raw", "c"], ["scaled"]))
        last = "scaled"
    if mask:
        nodes.append(n("Add", [last, "m"], ["masked"]))
        last = "masked"
    nodes.append(n("Softmax", [last], ["p"], axis=-1))
    if guard:  # the dynamo exporter's: rows the mask removes entirely give NaN; they become 0
        nodes += [n("IsNaN", ["p"], ["nan"]), n("Where", ["nan", "zero", "p"], ["p0"])]
    nodes.append(n("MatMul", ["p0" if guard else "p", "v"], ["ctx0" if sdpa else "ctx"]))
    if sdpa:
        nodes.append(n("Reshape", ["ctx0", "heads"], ["ctx"]))
    nodes += [n("Transpose", ["ctx"], ["ctx2"], perm=[0, 2, 1, 3]), n("Reshape", ["ctx2", "merge"], ["y"])]
    inits = {f"w{c}": RNG.standard_normal((32, 32)) * 0.3 for c in "qkv"}
    inits.update(split=np.array([0, 0, 4, 8]), merge=np.array([0, 0, 32]), heads=np.array([0, 4, 10, 8]))
    inits["root"] = np.array(0.8 ** 0.5)
    inits["c"] = np.array(np.sqrt(8.0) if scale == "Div" else 1 / np.sqrt(8.0))
    if guard:
        inits["zero"] = np.array(0.0)
    model = _model(
        nodes,
        {k: v for k, v in inits.items() if k not in ("split", "merge", "heads")},
        {"x": ("B", 10, 32), "m": ("B", 1, 1, 10)},
    )
    for name in ("split", "merge", "heads"):
        model.graph.initializer.append(numpy_helper.from_array(inits[name].astype(np.int64), name))
    if not mask:
        del model.graph.input[1]
    return model


def _feeds(mask: bool, removed: bool = False) -> dict[str, np.ndarray]:
    feeds = {"x": RNG.standard_normal((3, 10, 32)).astype(np.float32)}
    if mask:
        m = np.zeros((3, 1, 1, 10), np.float32)
        m[1, ..., 7:] = -10000.0
        m[2, ..., 3:] = np.finfo(np.float32).min
        if removed:  # every key of the first sequence masked out: its probabilities are NaN
            m[0] = -np.inf
        feeds["m"] = m
    return feeds


def _kinds(compiled) -> list[str]:  # type: ignore[no-untyped-def]
    return [layer.kind for layer in compiled.engine.plan.layers]


@pytest.mark.parametrize("scale", ["Div", "Mul", ""])
@pytest.mark.parametrize("mask", [True, False])
@pytest.mark.parametrize("transpose_k", [True, False])
def test_exported_attention_fuses_and_is_bit_identical(monkeypatch, scale: str, mask: bool, transpose_k: bool) -> None:
    model, feeds = _heads(scale, mask, transpose_k), _feeds(mask)
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    monkeypatch.setenv(DISABLE_ENV, "")
    fused = plugrt.compile(model)
    got = fused(feeds)["y"]
    monkeypatch.setenv(DISABLE_ENV, "attention")
    plain = plugrt.compile(model)
    want = plain(feeds)["y"]
    assert _kinds(fused).count("attention") == 1 and "attention" not in _kinds(plain)
    assert "softmax" not in _kinds(fused)
    np.testing.assert_array_equal(got, want)


def test_the_exported_masked_attention_fuses(monkeypatch) -> None:
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    mask = np.ones((2, 16), np.int64)
    mask[1, 9:] = 0
    feeds = {"x": RNG.standard_normal((2, 16, 64)).astype(np.float32), "mask": mask}
    fused = plugrt.compile(masked_attention())
    got = fused(feeds)["y"]
    monkeypatch.setenv(DISABLE_ENV, "attention")
    want = plugrt.compile(masked_attention())(feeds)["y"]
    layer = next(layer for layer in fused.engine.plan.layers if layer.kind == "attention")
    assert layer.params == {
        "op0": "NONE", "op1": "NONE", "value_op": "NONE", "pre": "DIV", "mask": True, "scaled": False, "nan_to_zero": False,
        "perm_a": [], "perm_b": [], "perm_v": [], "perm_out": [], "scale_a": False, "scale_b": False,
    }  # fmt: skip
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mask", [True, False])
def test_torch_scaled_dot_product_attention_tactic(monkeypatch, mask: bool) -> None:
    pytest.importorskip("torch")
    model, feeds = _heads("Div", mask, False), _feeds(mask)
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    want = plugrt.compile(model)(feeds)["y"]
    monkeypatch.setenv("PLUGRT_TORCH", "always")
    engine = plugrt.compile(model)
    got = engine(feeds)["y"]
    assert [(layer.kind, layer.tactic) for layer in engine.engine.plan.layers if layer.kind == "attention"] == [
        ("attention", 1)
    ]
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * float(np.abs(want).max()))


def test_scores_read_elsewhere_do_not_fuse(monkeypatch) -> None:
    model = _heads("Div", True, True)
    model.graph.output.append(helper.make_tensor_value_info("p", TensorProto.FLOAT, None))
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    engine = plugrt.compile(model)
    out = engine(_feeds(True))
    assert "attention" not in _kinds(engine) and "softmax" in _kinds(engine)
    np.testing.assert_allclose(out["p"].sum(-1), 1.0, rtol=1e-5)


def test_softmax_over_another_axis_does_not_fuse(monkeypatch) -> None:
    model = _heads("", False, True)
    next(node for node in model.graph.node if node.op_type == "Softmax").attribute[0].i = 2
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    engine = plugrt.compile(model)
    engine(_feeds(False))
    assert "attention" not in _kinds(engine)


def test_attention_operator_misuse() -> None:
    with pytest.raises(NetworkError, match="op1"):
        AttentionOperator({"op1": "VECTOR"})
    with pytest.raises(NetworkError, match="pre"):
        AttentionOperator({"pre": "SUM"})
    op = AttentionOperator({"pre": "DIV", "mask": True})
    with pytest.raises(NetworkError, match="expected 5 inputs, got 3"):
        op.output_types([DataType.FLOAT] * 3)
    with pytest.raises(TypeMismatchError, match="one FLOAT or HALF type"):
        op.output_types([DataType.FLOAT] * 4 + [DataType.HALF])
    dims = [constant(d) for d in (2, 4, 10, 8)]
    kt = [constant(d) for d in (2, 4, 8, 10)]
    mask = [constant(d) for d in (2, 1, 1, 10)]
    with pytest.raises(ShapeError, match="one-element"):
        op.output_shapes([dims, kt, dims, [constant(2)], mask], [None] * 5)
    out, scores = op.output_shapes([dims, kt, dims, [constant(1)], mask], [None] * 5)
    assert [d.get_constant_value() for d in out] == [2, 4, 10, 8]
    assert [d.get_constant_value() for d in scores] == [2, 4, 10, 10]


@pytest.mark.parametrize("torch_tactic", ["0", "always"])
def test_the_nan_guard_of_the_dynamo_exporter_fuses_and_zeroes_removed_rows(monkeypatch, torch_tactic: str) -> None:
    if torch_tactic != "0":
        pytest.importorskip("torch")
    model, feeds = _heads("Div", True, False, guard=True), _feeds(True, removed=True)
    fused, want = _fused_against_unfused(monkeypatch, model, feeds, torch_tactic)
    kinds = _kinds(fused)
    assert kinds.count("attention") == 1 and "where" not in kinds and "unary" not in kinds
    assert fused.engine.plan.layers[kinds.index("attention")].params["nan_to_zero"] is True
    assert np.isfinite(want).all() and np.all(want[0] == 0)


def _fused_against_unfused(monkeypatch, model, feeds, torch_tactic: str):  # type: ignore[no-untyped-def]
    """(the fused engine, the unfused result): the fused result is checked against it, bit for bit with the own
    kernel, within 2e-5 of the output's scale with PyTorch's."""
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    monkeypatch.setenv(DISABLE_ENV, "attention")
    want = plugrt.compile(model)(feeds)["y"]
    monkeypatch.setenv(DISABLE_ENV, "")
    monkeypatch.setenv("PLUGRT_TORCH", torch_tactic)
    fused = plugrt.compile(model)
    got = fused(feeds)["y"]
    if torch_tactic == "0":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * float(np.abs(want).max()))
    return fused, want


@pytest.mark.parametrize("transpose_k", [True, False])
@pytest.mark.parametrize("torch_tactic", ["0", "always"])
def test_the_transposes_and_scales_around_attention_are_taken_in(monkeypatch, transpose_k: bool, torch_tactic: str) -> None:
    """The exported scaled_dot_product_attention: the heads' transposes, the query's and key's own scales and the
    result's transpose (behind a reshape to its own dims) become part of the attention layer; bit-identical with
    its own kernel, within 2e-5 with PyTorch's."""
    if torch_tactic != "0":
        pytest.importorskip("torch")
    fused, _ = _fused_against_unfused(monkeypatch, _heads("Div", True, transpose_k, sdpa=True), _feeds(True), torch_tactic)
    kinds = _kinds(fused)
    layer = fused.engine.plan.layers[kinds.index("attention")]
    assert layer.params["perm_a"] == [0, 2, 1, 3] and layer.params["perm_v"] == [0, 2, 1, 3]
    assert layer.params["perm_b"] == [0, 2, 3, 1]  # with transpose_k False: two transposes composed
    assert layer.params["perm_out"] == [0, 2, 1, 3] and layer.params["scale_a"] and layer.params["scale_b"]
    assert "elementwise" not in kinds  # the scales
    # the reshapes splitting the heads off are read as views ([B, S, 32] split into [B, S, 4, 8]); the merge remains
    assert kinds.count("shuffle") == 1
    assert layer.params["split_a"] == layer.params["split_v"] == [[-1], [10], [4, 8]] and not layer.params["select_a"]


def test_attention_permutations_are_checked() -> None:
    with pytest.raises(NetworkError, match=r"perm_a \[0, 0, 1, 2\] is not a permutation"):
        AttentionOperator({"perm_a": [0, 0, 1, 2]})
    op = AttentionOperator({"perm_a": [0, 2, 1, 3, 4]})
    dims = [constant(d) for d in (2, 4, 10, 8)]
    with pytest.raises(ShapeError, match="transpose"):
        op.output_shapes([dims, dims, dims], [None] * 3)
