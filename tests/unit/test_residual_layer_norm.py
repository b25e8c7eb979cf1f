"""The ``residual_layer_norm`` rule (``SUM(x, r)`` then layer normalization, fused for GPU builds) and the
normalization operator's residual: what fuses, what must not, and the operator's results and misuse on the CPU."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt
from plugrt.builder import fusion
from plugrt.builder.fusion import DISABLE_ENV, RULES, fuse_layers
from plugrt.core.errors import NetworkError, ShapeError
from plugrt.ops.normalization import NormalizationOperator
from plugrt.shape import constant

n = helper.make_node
WIDTH = 32


def _model(nodes: list, outputs: tuple[str, ...], dtype: type = np.float32, batch: object = 3) -> object:
    elem = TensorProto.FLOAT if dtype == np.float32 else TensorProto.FLOAT16
    rng = np.random.default_rng(5)
    constants = {"gamma": rng.normal(1, 0.2, WIDTH), "beta": rng.normal(0, 0.2, WIDTH), "two": [2.0]}
    graph = helper.make_graph(
        nodes,
        "residual_ln",
        [helper.make_tensor_value_info(name, elem, [batch, 7, WIDTH]) for name in ("x", "r")],
        [helper.make_tensor_value_info(o, elem, None) for o in outputs],
        [numpy_helper.from_array(np.asarray(v, dtype), k) for k, v in constants.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 10
    return model


def _post_ln() -> list:
    """BERT's ``LayerNorm(x + r)``: the sum read by the normalization alone."""
    return [n("Add", ["x", "r"], ["s"]), n("LayerNormalization", ["s", "gamma", "beta"], ["y"], axis=-1)]


def _pre_ln() -> list:
    """A pre-LN block's ``s = x + r; y = LN(s); z = s * 2``: the sum read again, after the norm."""
    add, norm = n("Add", ["x", "r"], ["s"]), n("LayerNormalization", ["s", "gamma", "beta"], ["y"], axis=-1)
    return [add, norm, n("Mul", ["s", "two"], ["z"])]


def _fused(model: object, monkeypatch: pytest.MonkeyPatch, gpu: bool = True) -> list:
    """The layers the passes make of the unfused plan of ``model`` for a GPU (or CPU) build."""
    monkeypatch.setenv(DISABLE_ENV, "all")
    compiled = plugrt.compile(model)
    feeds = {k: np.ones((3, 7, WIDTH), np.float32) for k in ("x", "r")}
    compiled(feeds)
    plan = compiled.engine.plan
    layers = [copy.deepcopy(layer) for layer in plan.layers]
    out, *_ = fuse_layers(layers, list(plan.tensors), list(plan.io), dict(plan.weights), disabled=(), gpu=gpu)
    return [layer for layer in out if layer.kind != "constant"]


def test_the_rule_is_for_gpu_builds_only(monkeypatch: pytest.MonkeyPatch) -> None:
    assert [rule.name for rule in RULES if rule.gpu_only] == ["residual_layer_norm"]
    layers = _fused(_model(_post_ln(), ("y",)), monkeypatch, gpu=False)
    assert [layer.kind for layer in layers] == ["elementwise", "normalization"]


def test_post_ln_sum_is_read_by_the_fused_layer_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    (layer,) = _fused(_model(_post_ln(), ("y",)), monkeypatch)
    assert layer.kind == "normalization"
    assert layer.params["residual"] is True and layer.params["keep_sum"] is False
    assert len(layer.inputs) == 2 and len(layer.outputs) == 1


def test_pre_ln_sum_read_later_is_kept_as_a_second_output(monkeypatch: pytest.MonkeyPatch) -> None:
    layers = _fused(_model(_pre_ln(), ("y", "z")), monkeypatch)
    assert [layer.kind for layer in layers] == ["normalization", "elementwise"]
    norm, mul = layers
    assert norm.params["keep_sum"] is True and len(norm.outputs) == 2
    assert norm.outputs[1] in mul.inputs  # the later reader reads the sum the fused layer writes


def test_a_reader_of_the_sum_before_the_norm_keeps_the_layers_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """The norm's scale computed from the sum: that reader runs between the add and the norm, so the fused layer
    (which writes the sum at the norm's place) would come too late for it."""
    axes = numpy_helper.from_array(np.array([0, 1], np.int64))
    nodes = [
        n("Add", ["x", "r"], ["s"]),
        n("Constant", [], ["axes"], value=axes),
        n("ReduceMean", ["s", "axes"], ["g"], keepdims=0),
        n("LayerNormalization", ["s", "g", "beta"], ["y"], axis=-1),
    ]
    layers = _fused(_model(nodes, ("y",)), monkeypatch)
    assert [layer.kind for layer in layers] == ["elementwise", "reduce", "normalization"]
    assert not layers[-1].params.get("residual")


def test_inputs_whose_dims_may_differ_keep_the_layers_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """x and r with batch dims of their own: equal at run time or the add broadcasts; the rule cannot know."""
    layers = _fused(_model(_post_ln(), ("y",), batch="b"), monkeypatch)
    assert [layer.kind for layer in layers] == ["elementwise", "normalization"]


def test_a_broadcast_add_is_not_a_residual(monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = [n("Add", ["x", "gamma"], ["s"]), n("LayerNormalization", ["s", "gamma", "beta"], ["y"], axis=-1)]
    layers = _fused(_model(nodes, ("y",)), monkeypatch)
    assert not any(layer.params.get("residual") for layer in layers)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("pre_ln", [False, True])
def test_the_fused_layer_computes_what_the_layers_did(
    dtype: type, pre_ln: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the rule applied to a CPU build (as a plan built for a GPU runs on the CPU), the results are the
    unfused engine's, bit for bit: the sum is rounded to the input's type, then normalized by the same kernel."""
    monkeypatch.setenv("PLUGRT_TORCH", "0")  # both engines on the NumPy kernel
    rules = tuple(dataclasses.replace(rule, gpu_only=False) for rule in RULES)
    monkeypatch.setattr(fusion, "RULES", rules)
    model = _model(_pre_ln() if pre_ln else _post_ln(), ("y", "z") if pre_ln else ("y",), dtype)
    rng = np.random.default_rng(9)
    feeds = {k: rng.normal(0, 3, (3, 7, WIDTH)).astype(dtype) for k in ("x", "r")}
    monkeypatch.setenv(DISABLE_ENV, "")
    fused = plugrt.compile(model)
    assert any(layer.params.get("residual") for layer in fused.engine.plan.layers)
    got = fused(feeds)
    monkeypatch.setenv(DISABLE_ENV, "all")
    want = plugrt.compile(model)(feeds)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])


def _operator(**params: object) -> NormalizationOperator:
    weights = {"scale": np.ones(4, np.float32), "bias": np.zeros(4, np.float32)}
    return NormalizationOperator({"mode": "layer", "axis": 1, **params}, weights)


def test_the_operator_normalizes_the_sum_and_keeps_it() -> None:
    op = _operator(residual=True, keep_sum=True)
    rng = np.random.default_rng(1)
    x, r = rng.normal(0, 1, (5, 4)).astype(np.float32), rng.normal(0, 1, (5, 4)).astype(np.float32)
    y, s = np.empty_like(x), np.empty_like(x)
    op.prepare([x.shape, r.shape], [y.shape, s.shape])
    op.run([x, r], [y, s])
    np.testing.assert_array_equal(s, x + r)
    d = s - s.mean(1, keepdims=True)
    np.testing.assert_allclose(y, d / np.sqrt((d * d).mean(1, keepdims=True) + 1e-5), rtol=1e-5, atol=1e-6)
    assert op.num_outputs == 2


def test_a_residual_needs_layer_normalization_without_statistics() -> None:
    with pytest.raises(NetworkError, match="residual is read by layer normalization"):
        NormalizationOperator({"mode": "instance", "residual": True})
    with pytest.raises(NetworkError, match="residual is read by layer normalization"):
        _operator(residual=True, stash_outputs=1)


def test_keep_sum_needs_a_residual() -> None:
    with pytest.raises(NetworkError, match="keep_sum gives the sum of x and a residual"):
        _operator(keep_sum=True)


def test_the_residual_must_have_the_input_type() -> None:
    with pytest.raises(NetworkError, match="the residual is HALF, the input FLOAT"):
        _operator(residual=True).output_types([plugrt.float32, plugrt.float16])


def test_the_residual_must_have_the_input_shape() -> None:
    op = _operator(residual=True)
    x = [constant(5), constant(4)]
    with pytest.raises(ShapeError, match=r"the residual's dims \[5, 3\] are not the input's \[5, 4\]"):
        op.output_shapes([x, [constant(5), constant(3)]], [None, None])
    with pytest.raises(ShapeError, match=r"the residual's shape \(6, 4\) is not the input's \(5, 4\)"):
        op.prepare([(5, 4), (6, 4)], [(5, 4)])


def test_the_kernel_launch_refuses_a_sum_output_without_a_residual() -> None:
    """Checked before any GPU is needed."""
    from plugrt.ops.layer_norm_cuda import layer_norm_launch

    with pytest.raises(ValueError, match=r"the sum's output \(total\) needs a residual"):
        layer_norm_launch(16, 16, 16, 16, 1, 768, 1e-5, np.float32, residual=0, total=32)
