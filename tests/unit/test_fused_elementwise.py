"""The fused elementwise operator: its steps, blocks, rules and the errors a malformed plan gets."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from plugrt.core.errors import NetworkError, ShapeError, TypeMismatchError
from plugrt.core.types import DataType
from plugrt.ops.base import create_operator
from plugrt.ops.fused_elementwise import BLOCK, block_indices
from plugrt.shape.builder import constant, symbol

STEPS = [
    {"binary": "SUM", "left": -1, "right": 1},
    {"activation": "LEAKY_RELU", "alpha": 0.1},
    {"binary": "DIV", "left": 2, "right": -1},
    {"unary": "ERF"},
    {"binary": "PROD", "left": -1, "right": 0},
]


def _reference(x: np.ndarray, bias: np.ndarray, scale: np.ndarray) -> np.ndarray:
    from plugrt.ops.unary import erf

    a = x + bias
    a = np.where(a >= 0, a, np.float32(0.1) * a).astype(np.float32)
    a = (scale / a).astype(np.float32)
    out = np.empty_like(a)
    erf(np, a, out)
    return out * x


@pytest.mark.parametrize("shape", [(3, 4, 5), (4, 64, 60, 40), (1, 3, 300000)])
def test_steps_over_blocks_equal_the_layers(shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(0, 2, shape).astype(np.float32)
    bias = rng.normal(0, 1, (1, shape[1]) + (1,) * (len(shape) - 2)).astype(np.float32)
    scale = np.full((1,) * len(shape), 0.7, np.float32)
    op = create_operator("fused_elementwise", {"steps": STEPS}, {})
    out = np.empty_like(x)
    op.prepare([x.shape, bias.shape, scale.shape], [out.shape])
    with np.errstate(all="ignore"):
        op.run([x, bias, scale], [out], np)
        np.testing.assert_array_equal(out, _reference(x, bias, scale))
    assert op.describe() == "fused_elementwise(PROD(ERF(DIV(in2, LEAKY_RELU(SUM(x, in1)))), in0))"


@pytest.mark.parametrize("shape", [(7,), (3, 5, 7), (2, 3, 40000), (5, 100000), (2, 2, 2, 40000)])
def test_blocks_cover_the_shape_once(shape: tuple[int, ...]) -> None:
    seen = np.zeros(shape, np.int32)
    blocks = block_indices(shape, BLOCK)
    for index in blocks:
        seen[index] += 1
        assert seen[index].size <= max(BLOCK, shape[-1])
    assert np.all(seen == 1)


def test_rules() -> None:
    op = create_operator("fused_elementwise", {"steps": STEPS}, {})
    assert op.output_types([DataType.HALF] * 3) == [DataType.HALF]
    b = symbol("x[0]")
    shapes = op.output_shapes(
        [[b, constant(4), constant(5)], [constant(1), constant(4), constant(1)], [constant(1)] * 3], [None] * 3
    )
    assert shapes == [[b, constant(4), constant(5)]]
    with pytest.raises(NetworkError, match="the steps read 3 input"):
        op.output_types([DataType.FLOAT] * 2)
    with pytest.raises(TypeMismatchError, match="input 1 is HALF, input 0 FLOAT"):
        op.output_types([DataType.FLOAT, DataType.HALF, DataType.FLOAT])
    with pytest.raises(TypeMismatchError, match="input 0 is INT32"):
        op.output_types([DataType.INT32] * 3)
    with pytest.raises(ShapeError, match="input 1 dimension 2 is 3; it must be input 0's"):
        op.output_shapes(
            [[constant(2), constant(4), constant(5)], [constant(1), constant(4), constant(3)], [constant(1)] * 3],
            [None] * 3,
        )
    with pytest.raises(ShapeError, match="input 2 has rank 1"):
        op.output_shapes([[constant(2), constant(4), constant(5)], [constant(1)] * 3, [constant(1)]], [None] * 3)


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ([], "steps must be a non-empty list"),
        ("SUM", "steps must be a non-empty list"),
        ([["SUM"]], "step 0 must be a dict"),
        ([{"binary": "XOR", "left": -1, "right": 1}], "step 0: unknown binary op 'XOR'"),
        ([{"unary": "NOT"}], "step 0: unknown unary op 'NOT'"),
        ([{"unary": "EXP"}, {"activation": "SWISH"}], "activation: unknown type 'SWISH'"),
        ([{"cast": "HALF"}], "step 0 has none of binary, unary, activation"),
    ],
)
def test_malformed_steps_raise(steps: object, message: str) -> None:
    with pytest.raises(NetworkError, match=message):
        create_operator("fused_elementwise", {"steps": steps}, {})


def test_half_steps_round_as_the_layers_do() -> None:
    x = np.linspace(-4, 4, 4096, dtype=np.float16).reshape(1, 64, 64)
    one = np.ones((1, 1, 1), np.float16)
    steps = [{"activation": "GELU_ERF"}, {"binary": "SUM", "left": -1, "right": 1}, {"activation": "TANH"}]
    op = create_operator("fused_elementwise", {"steps": steps}, {})
    out = np.empty_like(x)
    op.prepare([x.shape, one.shape], [out.shape])
    op.run([x, one], [out], np)
    gelu = create_operator("activation", {"type": "GELU_ERF"}, {})
    tanh = create_operator("activation", {"type": "TANH"}, {})
    a, c = np.empty_like(x), np.empty_like(x)
    gelu.run([x], [a], np)
    tanh.run([a + one], [c], np)
    np.testing.assert_array_equal(out, c)


def test_a_chain_of_the_running_value_alone_reads_one_input() -> None:
    steps = [
        {"activation": "RELU"},
        {"binary": "SUM", "left": -1, "right": -1},
        {"binary": "PROD", "left": -1, "right": 0},
    ]
    op = create_operator("fused_elementwise", {"steps": steps}, {})
    assert op.output_types([DataType.FLOAT]) == [DataType.FLOAT]
    x = np.linspace(-2, 2, 9, dtype=np.float32)
    out = np.empty_like(x)
    op.run([x], [out], np)
    np.testing.assert_array_equal(out, (np.maximum(x, 0) * 2) * x)


def test_every_step_a_chain_may_hold_has_a_cuda_form() -> None:
    """The GPU kernel generator (ops/fused_elementwise_cuda.py) covers every op the chain rule may put in a chain,
    so no chain falls back to one launch per step; constants are C float literals, infinities included."""
    from plugrt.ops import activation
    from plugrt.ops.fused_elementwise import BINARY_OPS, UNARY_OPS
    from plugrt.ops.fused_elementwise_cuda import chain_source

    for op in BINARY_OPS:
        body = chain_source([{"binary": op, "left": -1, "right": 1}], 2)
        assert body is not None and "in1" in body, op
    for op in UNARY_OPS:
        assert chain_source([{"unary": op}], 1) is not None, op
    for kind in activation._KERNELS:  # every ActivationType the activation layer has
        body = chain_source([{"activation": kind, "alpha": 0.5, "beta": float("inf")}], 1)
        assert body is not None, kind
    clip = chain_source([{"activation": "CLIP", "alpha": float("-inf"), "beta": 6.0}], 1)
    assert clip is not None and "clip_(v, __int_as_float(0xff800000), 6.0f)" in clip
    assert chain_source([{"unary": "NO_SUCH_OP"}], 1) is None


def test_constants_the_layer_holds_are_operands_after_the_inputs() -> None:
    """``-2 - k`` names weight ``c<k>``: a batch normalization's scale and shift, broadcast like an input."""
    rng = np.random.default_rng(4)
    x = rng.normal(0, 2, (2, 8, 150, 130)).astype(np.float32)  # several blocks
    scale = rng.uniform(0.5, 2, (1, 8, 1, 1)).astype(np.float32)
    shift = rng.normal(0, 1, (1, 8, 1, 1)).astype(np.float32)
    residual = rng.normal(0, 1, x.shape).astype(np.float32)
    steps = [
        {"binary": "PROD", "left": -1, "right": -2},
        {"binary": "SUM", "left": -1, "right": -3},
        {"binary": "SUM", "left": 1, "right": -1},
        {"activation": "RELU"},
    ]
    op = create_operator("fused_elementwise", {"steps": steps}, {"c0": scale, "c1": shift})
    assert op.output_types([DataType.FLOAT] * 2) == [DataType.FLOAT]
    assert op.output_shapes([[constant(d) for d in x.shape]] * 2, [None, None]) == [[constant(d) for d in x.shape]]
    out = np.empty_like(x)
    op.prepare([x.shape, residual.shape], [out.shape])
    op.run([x, residual], [out], np)
    np.testing.assert_array_equal(out, np.maximum(residual + (x * scale + shift), 0))
    assert op.describe() == "fused_elementwise(RELU(SUM(in1, SUM(PROD(x, c0), c1))))"
    small = x[:1, :, :2, :3].copy()  # one block: the calls resolved at bind
    small_out = np.empty_like(small)
    function, args = op.direct_launch([small, residual[:1, :, :2, :3].copy()], [small_out], np)
    function(*args)
    np.testing.assert_array_equal(small_out, np.maximum(residual[:1, :, :2, :3] + (small * scale + shift), 0))


def test_a_constant_the_steps_name_must_be_a_weight_and_broadcast() -> None:
    steps = [{"binary": "PROD", "left": -1, "right": -3}]  # c1, and c0 too (operands in order)
    with pytest.raises(NetworkError, match=r"constants \['c1'\] that are not weights"):
        create_operator("fused_elementwise", {"steps": steps}, {"c0": np.ones((1, 3, 1), np.float32)})
    op = create_operator(
        "fused_elementwise", {"steps": steps}, {"c0": np.ones((1, 3, 1), np.float32), "c1": np.ones((1, 4, 1))}
    )
    with pytest.raises(ShapeError, match=r"constant c1 of shape \[1, 4, 1\] does not broadcast into input 0's"):
        op.output_shapes([[constant(2), constant(3), symbol("n")]], [None])


def test_on_a_gpu_the_constants_follow_the_inputs_in_the_kernels_type(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU path without a GPU: a stand-in array module and kernel maker record what the generated kernel would
    get: the inputs, then the constants cast once to the output's type, and steps whose operands index that list."""
    import types

    from plugrt.ops import fused_elementwise
    from plugrt.ops.fused_elementwise_cuda import chain_source

    made: list[tuple[Any, int]] = []
    casts: list[Any] = []
    fake = types.SimpleNamespace(asarray=lambda a, dtype: casts.append(dtype) or np.asarray(a, dtype=dtype))

    def kernel_maker(xp: Any, steps: Any, operands: int, dtype: Any) -> Any:
        made.append((chain_source(steps, operands), operands))
        return lambda *arrays: calls.append(arrays)

    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(fused_elementwise, "chain_kernel", kernel_maker)
    scale, shift = np.full((1, 3, 1), 2.0, np.float32), np.full((1, 3, 1), 0.5, np.float32)
    steps = [{"binary": "PROD", "left": -1, "right": -2}, {"binary": "SUM", "left": 1, "right": -3}]
    op = create_operator("fused_elementwise", {"steps": steps}, {"c0": scale, "c1": shift})
    x, r = np.ones((2, 3, 4), np.float16), np.zeros((2, 3, 4), np.float16)
    out = np.empty_like(x)
    for _ in range(2):
        op.run([x, r], [out], fake)
    ((body, operands),) = made
    assert operands == 4 and body is not None
    assert all(f"(float)in{k}" in body for k in (1, 2, 3))  # the residual, then c0 and c1
    assert casts == [np.dtype(np.float16)] * 2  # each constant cast once, for both runs
    arrays = calls[0]
    assert arrays[0] is x and arrays[1] is r and arrays[4] is out
    assert arrays[2].dtype == np.float16 and np.array_equal(arrays[2], scale) and np.array_equal(arrays[3], shift)
