"""Small kernels launched directly (``Operator.direct_launch``: one NumPy call on views made at bind) against
the operator's own ``run`` on the same inputs: the same values, bit for bit, NaNs and types included."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from plugrt.core.types import TensorFormat, from_nptype
from plugrt.nodes.base import Binding
from plugrt.ops.base import create_operator

RNG = np.random.default_rng(7)


def _binding(array: np.ndarray) -> Binding:
    return Binding(tuple(array.shape), from_nptype(array.dtype), TensorFormat.LINEAR, 1.0, 0, array, lambda: None)


def both(
    kind: str, params: dict[str, Any], inputs: list[np.ndarray], out: tuple[tuple[int, ...], Any], direct: bool = True
) -> np.ndarray:
    """Run ``kind`` on ``inputs`` through its direct launch and through ``run``; check they agree; the result.
    ``direct`` False: check that the operator keeps ``run`` for these inputs."""
    op = create_operator(kind, params, {})
    if not direct:
        op.bind([_binding(a) for a in inputs], [_binding(np.zeros(*out))], 0)
        assert op.prepared_launch(0)[0] == op.run
        return np.zeros(0)
    shape, dtype = out
    direct_out = np.full(shape, 7, dtype=dtype)
    run_out = np.full(shape, 7, dtype=dtype)
    op.bind([_binding(a) for a in inputs], [_binding(direct_out)], 0)
    launch, args = op.prepared_launch(0)
    assert launch != op.run, f"{kind} {params}: no direct launch"
    launch(*args)
    launch(*args)  # a second run of the same views
    op.run(inputs, [run_out], np)
    assert direct_out.dtype == run_out.dtype
    np.testing.assert_array_equal(direct_out, run_out, err_msg=f"{kind} {params}")
    return direct_out


def floats(*shape: int) -> np.ndarray:
    values = RNG.standard_normal(shape).astype(np.float32)
    flat = values.reshape(-1)
    if flat.size >= 4:
        flat[:3] = [np.nan, np.inf, -0.0]
    return values


@pytest.mark.parametrize("op", ["SUM", "PROD", "MAX", "MIN", "SUB", "DIV", "POW", "FLOOR_DIV"])
def test_elementwise_arithmetic(op: str) -> None:
    a, b = floats(2, 3, 4), floats(1, 3, 1)
    direct = op not in ("MAX", "MIN")  # NumPy 2.4 deprecates their output by position
    with np.errstate(all="ignore"):
        both("elementwise", {"op": op}, [a, b], ((2, 3, 4), np.float32), direct)
    ints = RNG.integers(1, 9, (3, 4)).astype(np.int64)
    with np.errstate(all="ignore"):  # integer DIV rounds toward zero through run
        both("elementwise", {"op": op}, [ints, ints[:1]], ((3, 4), np.int64), direct and op != "DIV")


@pytest.mark.parametrize("op", ["AND", "OR", "XOR"])
def test_elementwise_logical(op: str) -> None:
    a, b = RNG.random((4, 5)) < 0.5, RNG.random((1, 5)) < 0.5
    both("elementwise", {"op": op}, [a, b], ((4, 5), np.bool_))


@pytest.mark.parametrize("op", ["EQUAL", "GREATER", "LESS"])
def test_elementwise_comparisons(op: str) -> None:
    a = RNG.integers(0, 3, (4, 5)).astype(np.float32)
    both("elementwise", {"op": op}, [a, a[::-1].copy()], ((4, 5), np.bool_))


def test_integer_div_keeps_its_own_kernel() -> None:
    op = create_operator("elementwise", {"op": "DIV"}, {})
    a, b, out = np.array([-7, 7], np.int64), np.array([2, -2], np.int64), np.zeros(2, np.int64)
    op.bind([_binding(a), _binding(b)], [_binding(out)], 0)
    launch, args = op.prepared_launch(0)
    launch(*args)
    np.testing.assert_array_equal(out, [-3, -3])


@pytest.mark.parametrize("op", ["EXP", "LOG", "SQRT", "ABS", "NEG", "SIN", "CEIL", "SIGN", "ROUND", "RECIP"])
def test_unary(op: str) -> None:
    with np.errstate(all="ignore"):
        both("unary", {"op": op}, [floats(3, 5)], ((3, 5), np.float32))


def test_unary_not_and_integer_abs() -> None:
    both("unary", {"op": "NOT"}, [RNG.random((6,)) < 0.5], ((6,), np.bool_))
    both("unary", {"op": "ABS"}, [RNG.integers(-5, 5, (6,)).astype(np.int32)], ((6,), np.int32))


@pytest.mark.parametrize(
    ("source", "target"),
    [
        (np.float32, np.int32),
        (np.float32, np.bool_),
        (np.int64, np.float32),
        (np.bool_, np.int64),
        (np.float32, np.float16),
    ],
)
def test_identity_and_cast(source: Any, target: Any) -> None:
    x = (RNG.standard_normal((3, 4)) * 5).astype(source)
    both("cast", {"to_type": from_nptype(np.dtype(target)).name}, [x], ((3, 4), target))
    both("identity", {}, [x], ((3, 4), source))


def test_expand() -> None:
    both("expand", {}, [floats(1, 3, 1), np.array([2, 3, 4], np.int64)], ((2, 3, 4), np.float32))


def test_squeeze_unsqueeze_flatten() -> None:
    x = floats(2, 1, 3)
    both("squeeze", {"axes": [1]}, [x], ((2, 3), np.float32))
    both("unsqueeze", {"axes": [0]}, [x], ((1, 2, 1, 3), np.float32))
    both("flatten", {"axis": 1}, [floats(2, 3, 4)], ((2, 12), np.float32))
    transposed = floats(4, 3).T  # not contiguous: copied through the output's view
    both("unsqueeze", {"axes": [2]}, [transposed], ((3, 4, 1), np.float32))


@pytest.mark.parametrize("op", ["SUM", "PROD", "MAX", "MIN"])
@pytest.mark.parametrize("mask", [0b1, 0b10, 0b11, 0b101])
@pytest.mark.parametrize("keep", [False, True])
def test_reduce(op: str, mask: int, keep: bool) -> None:
    x = floats(2, 3, 4)
    shape = tuple((1 if keep else None) if mask >> k & 1 else d for k, d in enumerate(x.shape))
    shape = tuple(d for d in shape if d is not None)
    both("reduce", {"op": op, "axes": mask, "keep_dims": keep}, [x], (shape, np.float32))
    ints = RNG.integers(-3, 4, (2, 3, 4)).astype(np.int32)
    both("reduce", {"op": op, "axes": mask, "keep_dims": keep}, [ints], (shape, np.int32))


def test_reduce_of_half_products() -> None:
    x = RNG.random((3, 4)).astype(np.float16) + np.float16(0.5)
    both("reduce", {"op": "PROD", "axes": 0b10, "keep_dims": False}, [x], ((3,), np.float16))


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("keep", [False, True])
def test_arg_reduce(op: str, axis: int, keep: bool) -> None:
    x = RNG.integers(0, 3, (3, 4, 5)).astype(np.float32)  # ties: the first index
    x[0, 0, 0] = np.nan
    shape = list(x.shape)
    if keep:
        shape[axis] = 1
    else:
        del shape[axis]
    both("arg_reduce", {"op": op, "axis": axis, "keepdims": keep}, [x], (tuple(shape), np.int64))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concatenation(axis: int) -> None:
    parts = [floats(2, 3, 4), floats(2, 3, 4)]
    shape = list(parts[0].shape)
    shape[axis] *= 2
    both("concatenation", {"axis": axis}, parts, (tuple(shape), np.float32))


def test_slice() -> None:
    x = floats(4, 6, 5)
    both("slice", {"starts": [1, -1], "ends": [4, -7], "axes": [0, 1], "steps": [2, -2]}, [x], ((2, 3, 5), np.float32))


def test_rebinding_makes_new_views() -> None:
    """A bind to other arrays (a shape change) launches on those, not the first binding's."""
    op = create_operator("slice", {"starts": [1], "ends": [3]}, {})
    first, out = floats(4), np.zeros(2, np.float32)
    op.bind([_binding(first)], [_binding(out)], 0)
    second, other = floats(5), np.zeros(2, np.float32)
    op.bind([_binding(second)], [_binding(other)], 0)
    launch, args = op.prepared_launch(0)
    launch(*args)
    np.testing.assert_array_equal(other, second[1:3])
    assert not out.any()


@pytest.mark.parametrize(
    "steps",
    [
        [{"binary": "SUM", "left": -1, "right": 1}, {"activation": "TANH"}],
        [
            {"binary": "SUM", "left": 1, "right": -1},
            {"activation": "SIGMOID"},
            {"binary": "PROD", "left": -1, "right": 2},
        ],
        [{"unary": "NEG"}, {"binary": "SUM", "left": -1, "right": 1}, {"binary": "MAX", "left": 2, "right": -1}],
        [{"unary": "ERF"}, {"binary": "MIN", "left": -1, "right": 1}, {"activation": "GELU_ERF"}, {"unary": "EXP"}],
        [{"activation": "LEAKY_RELU", "alpha": 0.1}, {"binary": "DIV", "left": 1, "right": -1}, {"activation": "RELU"}],
    ],
)
def test_fused_elementwise_chain(steps: list[dict[str, Any]]) -> None:
    count = 1 + max([0] + [max(s["left"], s["right"]) for s in steps if "binary" in s])
    inputs = [floats(2, 3, 4)] + [floats(2, 1, 4) if k % 2 else floats(1, 3, 4) for k in range(1, count)]
    with np.errstate(all="ignore"):
        both("fused_elementwise", {"steps": steps}, inputs, ((2, 3, 4), np.float32))


def test_fused_elementwise_chain_of_large_or_half_outputs_keeps_run() -> None:
    steps = [{"binary": "SUM", "left": -1, "right": 1}, {"activation": "TANH"}]
    big = [floats(300, 300), floats(1, 300)]  # more than one block: blocks on two threads through run
    both("fused_elementwise", {"steps": steps}, big, ((300, 300), np.float32), direct=False)
    half = [floats(2, 3).astype(np.float16), floats(1, 3).astype(np.float16)]
    both("fused_elementwise", {"steps": steps}, half, ((2, 3), np.float16), direct=False)


def _with_weights(kind: str, params: dict[str, Any], weights: dict[str, np.ndarray]) -> Any:
    return create_operator(kind, params, weights)


@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("c_shape", [None, (5,), (1, 5), (3, 5)])
def test_small_gemm(trans_a: bool, trans_b: bool, c_shape: tuple[int, ...] | None) -> None:
    a = floats(4, 3) if trans_a else floats(3, 4)
    weights = {"b": floats(5, 4) if trans_b else floats(4, 5)}
    if c_shape is not None:
        weights["c"] = floats(*c_shape)
    params = {"trans_a": trans_a, "trans_b": trans_b, "has_c": c_shape is not None}
    direct = _with_weights("gemm", params, weights)
    reference = _with_weights("gemm", params, weights)
    out, want = np.zeros((3, 5), np.float32), np.zeros((3, 5), np.float32)
    direct.bind([_binding(a)], [_binding(out)], 0)
    launch, args = direct.prepared_launch(0)
    assert launch != direct.run
    launch(*args)
    reference.run([a], [want], np)
    np.testing.assert_array_equal(out, want)


def test_gemm_with_b_as_an_input_or_uniform_keeps_run() -> None:
    a, b, out = floats(3, 4), floats(4, 5), np.zeros((3, 5), np.float32)
    op = _with_weights("gemm", {}, {})
    op.bind([_binding(a), _binding(b)], [_binding(out)], 0)
    assert op.prepared_launch(0)[0] == op.run
    op = _with_weights("gemm", {"uniform_b": True}, {"b": np.ones((4, 5), np.float32)})
    op.bind([_binding(a)], [_binding(out)], 0)
    assert op.prepared_launch(0)[0] == op.run


def test_large_gemm_keeps_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where setting the BLAS's thread count could matter, run decides (one thread, or parts on two)."""
    from plugrt.ops import blas_threads

    monkeypatch.setattr(blas_threads, "_BLAS", (lambda count: None,))
    monkeypatch.setattr(blas_threads, "_CONFIGURED", 2)
    op = _with_weights("gemm", {}, {"b": floats(64, 64)})
    out = np.zeros((64, 64), np.float32)
    op.bind([_binding(floats(64, 64))], [_binding(out)], 0)
    assert op.prepared_launch(0)[0] == op.run
    small = _with_weights("gemm", {}, {"b": floats(8, 8)})
    small.bind([_binding(floats(2, 8))], [_binding(np.zeros((2, 8), np.float32))], 0)
    assert small.prepared_launch(0)[0] != small.run


@pytest.mark.parametrize(
    ("op0", "op1", "a_shape", "b_shape", "out_shape"),
    [
        ("NONE", "NONE", (2, 3, 4), (2, 4, 5), (2, 3, 5)),
        ("NONE", "NONE", (2, 3, 4), (1, 4, 5), (2, 3, 5)),
        ("TRANSPOSE", "NONE", (2, 4, 3), (2, 4, 5), (2, 3, 5)),
        ("NONE", "TRANSPOSE", (1, 3, 4), (2, 5, 4), (2, 3, 5)),
        ("VECTOR", "NONE", (2, 4), (2, 4, 5), (2, 5)),
        ("NONE", "VECTOR", (2, 3, 4), (2, 4), (2, 3)),
        ("VECTOR", "VECTOR", (2, 4), (2, 4), (2,)),
    ],
)
def test_small_matrix_multiply(op0: str, op1: str, a_shape: Any, b_shape: Any, out_shape: Any) -> None:
    both("matrix_multiply", {"op0": op0, "op1": op1}, [floats(*a_shape), floats(*b_shape)], (out_shape, np.float32))


def test_small_matrix_multiply_with_its_bias() -> None:
    both(
        "matrix_multiply",
        {"op0": "NONE", "op1": "NONE", "bias": True},
        [floats(2, 3, 4), floats(4, 5), floats(5)],
        ((2, 3, 5), np.float32),
    )


@pytest.mark.parametrize(("data_shape", "indices"), [((3, 12), [[0, 4], [2, -1], [1, 0]]), ((4, 5, 2), [[1], [-2]])])
def test_scatter_nd(data_shape: tuple[int, ...], indices: list[list[int]]) -> None:
    data = floats(*data_shape)
    index = np.array(indices, np.int64)
    updates = floats(*(index.shape[:-1] + data_shape[index.shape[-1] :]))
    got = both("scatter_nd", {}, [data, index, updates], (data_shape, np.float32))
    want = data.copy()
    want[tuple(index.T)] = updates
    np.testing.assert_array_equal(got, want)


def test_scatter_nd_out_of_range_fails() -> None:
    op = create_operator("scatter_nd", {}, {})
    data, index, updates = floats(3, 4), np.array([[0, 4]], np.int64), floats(1)
    op.bind([_binding(data), _binding(index), _binding(updates)], [_binding(np.zeros((3, 4), np.float32))], 0)
    launch, args = op.prepared_launch(0)
    with pytest.raises(IndexError):
        launch(*args)
    with pytest.raises(IndexError):
        op.run([data, np.array([[0, -5]], np.int64), updates], [np.zeros((3, 4), np.float32)], np)


def test_gather_out_of_range_names_the_range() -> None:
    op = create_operator("gather", {"axis": 0}, {})
    with pytest.raises(IndexError, match=r"gather indices must be in \[-3, 2\]"):
        op.run([floats(3, 2), np.array([1, 3], np.int64)], [np.zeros((2, 2), np.float32)], np)
    out = np.zeros((2, 2), np.float32)
    data = floats(3, 2)
    op.run([data, np.array([-1, 0], np.int64)], [out], np)
    np.testing.assert_array_equal(out, data[[2, 0]])


@pytest.mark.parametrize("mask", [0b1, 0b10, 0b11, 0b101, 0b111])
@pytest.mark.parametrize("keep", [False, True])
def test_reduce_mean(mask: int, keep: bool) -> None:
    """The mean as NumPy computes it: the sum, then a division by the count as an intp (in float64)."""
    x = floats(2, 3, 5)
    shape = tuple((1 if keep else None) if mask >> k & 1 else d for k, d in enumerate(x.shape))
    shape = tuple(d for d in shape if d is not None)
    with np.errstate(all="ignore"):
        result = both("reduce", {"op": "AVG", "axes": mask, "keep_dims": keep}, [x], (shape, np.float32))
        axes = tuple(k for k in range(3) if mask >> k & 1)
        np.testing.assert_array_equal(result, np.mean(x, axis=axes, keepdims=keep))


def test_reduce_mean_of_half_keeps_run() -> None:
    x = RNG.random((3, 4)).astype(np.float16)
    both("reduce", {"op": "AVG", "axes": 0b10, "keep_dims": False}, [x], ((3,), np.float16), direct=False)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("pads", [[0, 0, 0, 64], [1, 2, 3, 1], [0, -1, 2, 0]])
def test_pad(mode: str, pads: list[int]) -> None:
    x = floats(3, 70)
    shape = tuple(d + pads[k] + pads[2 + k] for k, d in enumerate(x.shape))
    result = both("pad", {"mode": mode, "pads": pads}, [x], (shape, np.float32))
    if mode != "wrap" and min(pads) >= 0:
        width = [(pads[0], pads[2]), (pads[1], pads[3])]
        np.testing.assert_array_equal(result, np.pad(x, width, mode=mode))  # type: ignore[call-overload]


def test_pad_with_its_value_as_an_input_keeps_run() -> None:
    x, value = floats(2, 3), np.array([5.0], np.float32)
    both("pad", {"pads": [0, 1, 0, 1], "value_input": True}, [x, value], ((2, 5), np.float32), direct=False)
