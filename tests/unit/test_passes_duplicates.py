"""The ``duplicate_layers`` pass: repeated computations merge into one layer, results bit-identical."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt
from plugrt.builder.fusion import DISABLE_ENV, PASS_NAMES
from plugrt.builder.passes.duplicates import CONTENT_BYTES, _frozen

RNG = np.random.default_rng(5)
n = helper.make_node


def _model(nodes, constants: dict[str, np.ndarray], outputs=("y",)):
    graph = helper.make_graph(
        nodes,
        "duplicates",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 4, 8])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in constants.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 10
    return model


def _compiled(model, monkeypatch, disabled: str):
    monkeypatch.setenv(DISABLE_ENV, disabled)
    monkeypatch.setenv("PLUGRT_TORCH", "0")  # one kernel per layer whatever the timing: the pass alone differs
    return plugrt.compile(model, shapes={"x": ((1, 4, 8), (2, 4, 8), (4, 4, 8))})


def _computing(compiled) -> list[str]:
    return [layer.kind for layer in compiled.engine.plan.layers if layer.kind != "constant"]


def _constants(compiled) -> int:
    return sum(layer.kind == "constant" for layer in compiled.engine.plan.layers)


def _blocks(count: int, scales: list[np.ndarray], weight: np.ndarray) -> tuple[list, dict[str, np.ndarray]]:
    """``count`` copies of ``Exp(x) * c_k @ w`` (each with its own initializer ``c_k``), summed."""
    nodes, constants = [], {"w": weight}
    for k in range(count):
        constants[f"c{k}"] = scales[k]
        nodes += [
            n("Exp", ["x"], [f"e{k}"]),
            n("Mul", [f"e{k}", f"c{k}"], [f"m{k}"]),
            n("MatMul", [f"m{k}", "w"], [f"p{k}"]),
        ]
    total = "p0"
    for k in range(1, count):
        out = "y" if k == count - 1 else f"s{k}"
        nodes.append(n("Add", [total, f"p{k}"], [out]))
        total = out
    return nodes, constants


def test_pass_is_named_before_dead_layers() -> None:
    assert PASS_NAMES[-2:] == ("duplicate_layers", "dead_layers")


def test_repeated_blocks_merge_and_results_are_bit_identical(monkeypatch) -> None:
    scale = RNG.standard_normal(8).astype(np.float32)
    nodes, constants = _blocks(3, [scale.copy() for _ in range(3)], RNG.standard_normal((8, 5)))
    model = _model(nodes, constants)
    merged, kept = _compiled(model, monkeypatch, ""), _compiled(model, monkeypatch, "duplicate_layers")
    # three Exp * c chains and three products become one of each; the two Adds stay (different inputs)
    assert _computing(kept).count("matrix_multiply") == 3
    assert _computing(merged).count("matrix_multiply") == 1
    assert len(_computing(merged)) == len(_computing(kept)) - 4
    assert _constants(merged) < _constants(kept)
    x = RNG.standard_normal((2, 4, 8)).astype(np.float32)
    plain = _compiled(model, monkeypatch, "all")
    got, want = merged({"x": x})["y"], plain({"x": x})["y"]
    assert np.array_equal(got, want)


def test_different_constants_do_not_merge(monkeypatch) -> None:
    scales = [RNG.standard_normal(8).astype(np.float32) for _ in range(2)]
    nodes, constants = _blocks(2, scales, RNG.standard_normal((8, 5)))
    model = _model(nodes, constants)
    merged, kept = _compiled(model, monkeypatch, ""), _compiled(model, monkeypatch, "duplicate_layers")
    assert _computing(merged).count("matrix_multiply") == 2
    # the Exp read by both chains merges; the rest differs by the constant
    assert len(_computing(merged)) >= len(_computing(kept)) - 1
    x = RNG.standard_normal((3, 4, 8)).astype(np.float32)
    want = (np.exp(x) * scales[0]) @ constants["w"] + (np.exp(x) * scales[1]) @ constants["w"]
    np.testing.assert_allclose(merged({"x": x})["y"], want, rtol=1e-5, atol=1e-5)


def test_negative_zero_is_not_zero(monkeypatch) -> None:
    nodes, constants = _blocks(2, [np.zeros(8, np.float32), np.full(8, -0.0, np.float32)], np.eye(8, 5))
    model = _model(nodes, constants)
    merged = _compiled(model, monkeypatch, "")
    assert _computing(merged).count("matrix_multiply") == 2
    x = RNG.standard_normal((1, 4, 8)).astype(np.float32)
    assert np.array_equal(merged({"x": x})["y"], _compiled(model, monkeypatch, "all")({"x": x})["y"])


def test_engine_outputs_are_never_merged(monkeypatch) -> None:
    model = _model([n("Exp", ["x"], ["y"]), n("Exp", ["x"], ["z"])], {}, outputs=("y", "z"))
    merged = _compiled(model, monkeypatch, "")
    assert _computing(merged) == ["unary", "unary"]
    x = RNG.standard_normal((2, 4, 8)).astype(np.float32)
    out = merged({"x": x})
    assert np.array_equal(out["y"], np.exp(x)) and np.array_equal(out["z"], np.exp(x))


def test_large_weights_compare_by_key_not_content(monkeypatch) -> None:
    columns = CONTENT_BYTES // (8 * 4) + 1  # an 8 x columns float32 weight, just over the content limit
    weight = RNG.standard_normal((8, columns)).astype(np.float32)
    nodes = [n("MatMul", ["x", "w0"], ["p0"]), n("MatMul", ["x", "w1"], ["p1"]), n("Add", ["p0", "p1"], ["y"])]
    model = _model(nodes, {"w0": weight, "w1": weight.copy()})
    merged = _compiled(model, monkeypatch, "")
    assert _computing(merged).count("matrix_multiply") == 2
    x = RNG.standard_normal((2, 4, 8)).astype(np.float32)
    np.testing.assert_allclose(merged({"x": x})["y"], 2 * (x @ weight), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        (float("nan"), float("nan"), True),
        (0.0, -0.0, False),
        ([1, 2], (1, 2), False),
        ({"axis": 1, "keep": True}, {"keep": True, "axis": 1}, True),
        (np.arange(3), np.arange(3), True),
        (np.arange(3), np.arange(3).astype(np.int32), False),
        (object(), object(), False),
    ],
)
def test_parameters_compare_exactly(a, b, equal) -> None:
    assert (_frozen(a) == _frozen(b)) is equal
