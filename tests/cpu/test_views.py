"""Reshapes as views (``builder/views.py``): a reshaping layer between two activations shares its input's memory
and is not launched; results stay those of the copies; inputs, outputs and transposes keep their copies."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

import plugrt

from export_graphs import onnx_model

n = helper.make_node
RNG = np.random.default_rng(5)


def _compiled(nodes: list, inits: dict[str, np.ndarray], outputs: list[str] | None = None) -> object:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 6, 4])
    return plugrt.compile(onnx_model(nodes, [x], outputs or ["y"], inits), shapes={"x": ((1, 6, 4), (2, 6, 4), (5, 6, 4))})


def _run(compiled, x: np.ndarray) -> dict[str, np.ndarray]:  # type: ignore[no-untyped-def]
    return compiled({"x": x})  # type: ignore[no-any-return]


def _steps(compiled) -> dict[str, object]:  # type: ignore[no-untyped-def]
    executor = compiled.context._executor
    return {step.layer.kind + ":" + step.layer.name: step for step in executor.steps}


def _offsets(compiled, layer_kind: str) -> list[tuple[int, int]]:  # type: ignore[no-untyped-def]
    plan = compiled.engine.plan
    offsets = plan.profiles[0].offsets
    return [(offsets[layer.inputs[0]], offsets[layer.outputs[0]]) for layer in plan.layers if layer.kind == layer_kind]


def test_reshapes_between_activations_are_views_and_not_launched() -> None:
    nodes = [
        n("Relu", ["x"], ["a"]),
        n("Reshape", ["a", "flat"], ["b"]),
        n("Unsqueeze", ["b", "axis"], ["c"]),
        n("Flatten", ["c"], ["d"], axis=1),
        n("Identity", ["d"], ["e"]),
        n("Sigmoid", ["e"], ["y"]),
    ]
    inits = {"flat": np.array([0, 24], np.int64), "axis": np.array([1], np.int64)}
    compiled = _compiled(nodes, inits)
    x = RNG.standard_normal((3, 6, 4)).astype(np.float32)
    got = _run(compiled, x)["y"]
    np.testing.assert_allclose(got, 1 / (1 + np.exp(-np.maximum(x, 0).reshape(3, 24))), rtol=1e-6)
    views = [step for step in _steps(compiled).values() if step.view]  # type: ignore[attr-defined]
    # (the importer passes Identity's input through: no layer)
    assert sorted(step.layer.kind for step in views) == ["flatten", "shuffle", "unsqueeze"]  # type: ignore[attr-defined]
    for kind in ("shuffle", "unsqueeze", "flatten"):
        assert all(a == b for a, b in _offsets(compiled, kind)), kind


def test_a_view_keeps_its_input_alive_while_it_is_read() -> None:
    """``b`` views ``a``; ``a`` is read again after ``c`` is made: the memory plan must not hand ``a``'s memory
    (or ``b``'s) to a later result while either is still read."""
    nodes = [
        n("Relu", ["x"], ["a"]),
        n("Reshape", ["a", "flat"], ["b"]),
        n("Exp", ["b"], ["c"]),
        n("Neg", ["a"], ["d"]),
        n("Tanh", ["d"], ["e"]),
        n("Reshape", ["e", "flat"], ["f"]),
        n("Add", ["c", "f"], ["g"]),
        n("Add", ["g", "b"], ["y"]),
    ]
    compiled = _compiled(nodes, {"flat": np.array([0, 24], np.int64)})
    for batch in (1, 5):
        x = RNG.standard_normal((batch, 6, 4)).astype(np.float32)
        a = np.maximum(x, 0).reshape(batch, 24)
        np.testing.assert_allclose(_run(compiled, x)["y"], np.exp(a) + np.tanh(-a) + a, rtol=1e-6)
    assert sum(step.view for step in _steps(compiled).values()) == 2  # type: ignore[attr-defined]


def test_network_inputs_outputs_and_transposes_keep_their_copies() -> None:
    nodes = [
        n("Reshape", ["x", "flat"], ["a"]),  # reads the caller's input: copied
        n("Relu", ["a"], ["b"]),
        n("Reshape", ["b", "back"], ["t"]),
        n("Transpose", ["t"], ["c"], perm=[0, 2, 1]),  # a transpose moves elements: copied
        n("Relu", ["c"], ["d"]),
        n("Reshape", ["d", "flat"], ["y"]),  # writes the caller's output: copied
    ]
    inits = {"flat": np.array([0, 24], np.int64), "back": np.array([0, 6, 4], np.int64)}
    compiled = _compiled(nodes, inits)
    x = RNG.standard_normal((2, 6, 4)).astype(np.float32)
    want = np.maximum(x, 0).transpose(0, 2, 1).reshape(2, 24)
    np.testing.assert_array_equal(_run(compiled, x)["y"], want)
    views = [step.layer.name for step in _steps(compiled).values() if step.view]  # type: ignore[attr-defined]
    assert len(views) == 1 and "back" not in views[0]  # only b -> t, the reshape between two activations
