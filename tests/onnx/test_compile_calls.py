"""plugrt.compile's calls: what the input shapes decide is kept from call to call, every misuse still raises,
and the arrays handed to the caller are never written again."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx_helpers import model, tensor_info

import plugrt as trt
from plugrt.engine.context import IExecutionContext
from plugrt.engine.host_call import STAGE_BYTES
from plugrt.onnx.compile import compile as compile_model

F = TensorProto.FLOAT


def _scaled(width: int = 4) -> onnx.ModelProto:
    """y = relu(x) * s, z = x + s: two inputs (one small), two outputs."""
    return model(
        [
            helper.make_node("Relu", ["x"], ["r"]),
            helper.make_node("Mul", ["r", "s"], ["y"]),
            helper.make_node("Add", ["x", "s"], ["z"]),
        ],
        [tensor_info("x", F, ["n", width]), tensor_info("s", F, [1, width])],
        [tensor_info("y", F, ["n", width]), tensor_info("z", F, ["n", width])],
    )


def _expected(x: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.maximum(x, 0) * s, x + s


def _count_shape_sets(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = IExecutionContext.set_input_shape

    def spy(self: IExecutionContext, name: str, shape: object) -> bool:
        calls.append(name)
        return bool(real(self, name, shape))  # type: ignore[arg-type]

    monkeypatch.setattr(IExecutionContext, "set_input_shape", spy)
    return calls


def test_same_shapes_skip_the_shape_setting_then_a_new_shape_then_every_misuse(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = compile_model(_scaled(), shapes={"x": ((1, 4), (2, 4), (8, 4))})
    shape_sets = _count_shape_sets(monkeypatch)
    rng = np.random.default_rng(0)
    s = rng.standard_normal((1, 4)).astype(np.float32)
    results = []
    for batch in (2, 2, 5):
        x = rng.standard_normal((batch, 4)).astype(np.float32)
        out = compiled(x=x, s=s)
        results.append((out, _expected(x, s)))
    assert shape_sets == ["x", "s", "x", "s"]  # the second call (same shapes) set none
    for out, (y, z) in results:
        np.testing.assert_allclose(out["y"], y, rtol=1e-6)
        np.testing.assert_allclose(out["z"], z, rtol=1e-6)
    x = np.ones((5, 4), np.float32)
    with pytest.raises(trt.TypeMismatchError, match="'x' must be a float32 array, got float64"):
        compiled(x=x.astype(np.float64), s=s)
    with pytest.raises(trt.ShapeError, match=r"input 'x' must have shape \('\?', 4\) \('\?' is dynamic\), got \(4,\)"):
        compiled(x=x[0], s=s)
    with pytest.raises(
        trt.ShapeError, match=r"input 'x' has shape \(9, 4\), outside the engine's profile .*pass shapes="
    ):
        compiled(x=np.ones((9, 4), np.float32), s=s)
    with pytest.raises(trt.TypeMismatchError, match=r"missing input\(s\) \['s'\]; the model's inputs are \['x', 's'\]"):
        compiled(x=x)
    with pytest.raises(trt.TypeMismatchError, match=r"unknown input name\(s\) \['t'\]"):
        compiled({"x": x, "t": s})
    with pytest.raises(trt.TypeMismatchError, match=r"takes 2 inputs"):
        compiled(x)
    out = compiled(x, s)  # after the errors: the same shapes as the last good call, set again
    np.testing.assert_allclose(out["y"], _expected(x, s)[0], rtol=1e-6)


def test_the_arrays_of_earlier_calls_are_never_written_again() -> None:
    rows = STAGE_BYTES // 16  # a batch of `rows` rows of 4 floats is the staging limit: below and above it
    compiled = compile_model(_scaled(), shapes={"x": ((1, 4), (2, 4), (4 * rows, 4))})
    s = np.full((1, 4), 2.0, np.float32)
    for batch in (2, 4 * rows):
        kept = []
        for k in range(3):
            x = np.full((batch, 4), float(k), np.float32)
            kept.append((k, compiled(x=x, s=s)))
        ids = {id(out[name]) for _, out in kept for name in ("y", "z")}
        assert len(ids) == 6
        for k, out in kept:
            np.testing.assert_array_equal(out["y"], np.full((batch, 4), 2.0 * k, np.float32))
            np.testing.assert_array_equal(out["z"], np.full((batch, 4), k + 2.0, np.float32))


def test_an_output_fed_back_and_an_input_changed_in_place() -> None:
    compiled = compile_model(_scaled(), shapes={"x": ((1, 4), (2, 4), (8, 4))})
    s = np.ones((1, 4), np.float32)
    x = np.zeros((2, 4), np.float32)
    state = x
    for step in range(1, 4):
        state = compiled(x=state, s=s)["z"]  # the last output is the next input
        np.testing.assert_array_equal(state, np.full((2, 4), float(step), np.float32))
    x[...] = -3.0  # the same array, new contents: the next call reads them
    np.testing.assert_array_equal(compiled(x=x, s=s)["z"], np.full((2, 4), -2.0, np.float32))
    wide = np.zeros((2, 8), np.float32)
    wide[:, ::2] = 5.0
    np.testing.assert_array_equal(compiled(x=wide[:, ::2], s=s)["z"], np.full((2, 4), 6.0, np.float32))  # strided


def test_large_inputs_bound_in_place_follow_their_arrays() -> None:
    rows = 2 * STAGE_BYTES // 16
    compiled = compile_model(_scaled(), shapes={"x": ((1, 4), (rows, 4), (rows, 4))})
    s = np.ones((1, 4), np.float32)
    base = np.arange(rows * 8, dtype=np.float32).reshape(rows, 8)
    for x in (np.ascontiguousarray(base[:, :4]), base[:, 4:], np.ascontiguousarray(base[:, 4:]) * 2):
        np.testing.assert_array_equal(compiled(x=x, s=s)["z"], x + 1)


def test_double_and_data_dependent_outputs_across_calls() -> None:
    double = model(
        [helper.make_node("Neg", ["x"], ["y"])],
        [tensor_info("x", TensorProto.DOUBLE, [3])],
        [tensor_info("y", TensorProto.DOUBLE, [3])],
    )
    compiled = compile_model(double)
    for value in (1.5, -2.0):
        y = compiled(x=np.full(3, value))["y"]
        assert y.dtype == np.float64
        np.testing.assert_array_equal(y, np.full(3, -value))
    nonzero = model(
        [helper.make_node("NonZero", ["x"], ["y"])],
        [tensor_info("x", F, [2, 3])],
        [tensor_info("y", TensorProto.INT64, [2, "k"])],
    )
    compiled = compile_model(nonzero)
    kept = []
    for x in (np.float32([[1, 0, 2], [0, 0, 3]]), np.float32([[0, 0, 0], [4, 0, 0]]), np.zeros((2, 3), np.float32)):
        kept.append((x, compiled(x=x)["y"]))
    for x, y in kept:
        np.testing.assert_array_equal(y, np.array(np.nonzero(x)))
