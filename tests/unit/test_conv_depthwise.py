"""Depthwise convolutions summed tap by tap (no im2col) against a float64 reference and onnxruntime.

Tolerance: the float32 tap sums stay within 2e-6 of float64 relative to the output's largest value
(onnxruntime's depthwise kernels: the same order).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from plugrt.ops import conv
from plugrt.ops.conv import ConvolutionOperator, pack_conv_kernel
from plugrt.ops.conv_taps import DepthwiseTaps


@pytest.fixture(autouse=True)
def _taps_at_every_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tap sums run on these small maps too (by default they take over only past a cache-sized im2col)."""
    monkeypatch.setattr(conv, "TAPS_MIN_COLUMN_BYTES", 0)


def _reference(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, strides, dilations, begins, outs) -> np.ndarray:
    """float64 grouped convolution, one output map per loop, with zero padding."""
    n, c = x.shape[:2]
    maps, rank = w.shape[0], x.ndim - 2
    per_group = maps // c
    padded_shape = [
        s + b + (o - 1) * st + (k - 1) * d + 1
        for s, b, o, st, k, d in zip(x.shape[2:], begins, outs, strides, w.shape[2:], dilations)
    ]
    padded = np.zeros((n, c, *padded_shape))
    padded[(slice(None), slice(None), *(slice(b, b + s) for b, s in zip(begins, x.shape[2:])))] = x
    out = np.zeros((n, maps, *outs))
    for m in range(maps):
        for taps in itertools.product(*(range(k) for k in w.shape[2:])):
            index = tuple(
                slice(t * d, t * d + (o - 1) * s + 1, s) for t, d, o, s in zip(taps, dilations, outs, strides)
            )
            out[:, m] += w[(m, 0, *taps)] * padded[(slice(None), m // per_group, *index)]
    if bias is not None:
        out += bias.reshape(1, -1, *(1,) * rank)
    return out


def _operator(kernel: np.ndarray, bias: np.ndarray | None, **params) -> ConvolutionOperator:
    weights = {"kernel": pack_conv_kernel(kernel, params["group"])}
    if bias is not None:
        weights["bias"] = bias
    return ConvolutionOperator(
        {"num_output_maps": kernel.shape[0], "kernel_shape": list(kernel.shape[2:]), **params}, weights
    )


CASES = {
    "3x3": ((1, 8, 9, 9), 1, {"pads": [1, 1, 1, 1]}),
    "3x3_stride2_batch": ((3, 5, 11, 10), 1, {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    "5x5_uneven_pads": ((2, 4, 12, 7), 1, {"pads": [2, 1, 0, 2]}),
    "dilated_strided": ((1, 3, 13, 14), 1, {"pads": [2, 2, 2, 2], "strides": [3, 2], "dilations": [2, 3]}),
    "no_padding": ((2, 6, 6, 8), 1, {}),
    "multiplier": ((2, 4, 7, 7), 3, {"pads": [1, 1, 1, 1]}),
    "same_upper": ((1, 4, 7, 6), 1, {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    "1d": ((2, 6, 17), 1, {"pads": [3, 1], "strides": [2]}),
    "3d": ((1, 3, 5, 6, 4), 2, {"pads": [1, 0, 1, 1, 1, 0], "strides": [1, 2, 1]}),
    "kernel_wider_than_input": ((1, 2, 3, 3), 1, {"pads": [2, 2, 2, 2]}),
}


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("name", sorted(CASES))
def test_depthwise_matches_float64(name: str, bias: bool) -> None:
    x_shape, multiplier, params = CASES[name]
    rng = np.random.default_rng(len(name))
    rank = len(x_shape) - 2
    kernel_shape = {"5x5_uneven_pads": (5, 5), "3d": (2, 3, 2), "1d": (5,)}.get(name, (3,) * rank)
    c = x_shape[1]
    kernel = rng.standard_normal((c * multiplier, 1, *kernel_shape)).astype(np.float32)
    b = rng.standard_normal(c * multiplier).astype(np.float32) if bias else None
    x = rng.standard_normal(x_shape).astype(np.float32)
    op = _operator(kernel, b, group=c, **params)
    outs, begins, _ = op.window.resolve(x_shape[2:])
    out = np.empty((x_shape[0], c * multiplier, *outs), np.float32)
    op.run([x], [out])
    assert op._depthwise is not None  # the tap-sum path ran
    expected = _reference(
        x.astype(np.float64), kernel.astype(np.float64), b, op.window.strides, op.window.dilations, begins, outs
    )
    assert np.abs(out - expected).max() <= 2e-6 * np.abs(expected).max()
    again = np.empty_like(out)
    op.run([x], [again])  # the planes are reused: the padding is still zero
    np.testing.assert_array_equal(again, out)


def test_depthwise_fuses_clip_and_follows_new_shapes() -> None:
    rng = np.random.default_rng(7)
    kernel = rng.standard_normal((6, 1, 3, 3)).astype(np.float32)
    op = _operator(
        kernel, None, group=6, pads=[1, 1, 1, 1], activation="CLIP", activation_alpha=0.0, activation_beta=1.0
    )
    for shape in [(1, 6, 8, 8), (4, 6, 5, 9), (1, 6, 8, 8)]:
        x = rng.standard_normal(shape).astype(np.float32)
        out = np.empty(shape, np.float32)
        op.run([x], [out])
        expected = _reference(x.astype(np.float64), kernel.astype(np.float64), None, (1, 1), (1, 1), (1, 1), shape[2:])
        np.testing.assert_allclose(out, np.clip(expected, 0.0, 1.0), atol=2e-6 * np.abs(expected).max())


def test_depthwise_with_run_time_kernel_and_half_input() -> None:
    rng = np.random.default_rng(8)
    kernel = rng.standard_normal((4, 1, 3, 3)).astype(np.float16)
    x = rng.standard_normal((2, 4, 6, 6)).astype(np.float16)
    op = ConvolutionOperator({"num_output_maps": 4, "kernel_shape": [3, 3], "group": 4, "pads": [1, 1, 1, 1]})
    out = np.empty((2, 4, 6, 6), np.float16)
    op.run([x, kernel], [out])
    expected = _reference(x.astype(np.float64), kernel.astype(np.float64), None, (1, 1), (1, 1), (1, 1), (6, 6))
    np.testing.assert_allclose(out.astype(np.float64), expected, atol=2e-3 * np.abs(expected).max())
    kernel2 = -kernel  # a new kernel input is used, not the rows made from the first
    op.run([x, kernel2], [out])
    np.testing.assert_allclose(out.astype(np.float64), -expected, atol=2e-3 * np.abs(expected).max())


def test_block_rows_cover_every_row_once() -> None:
    from plugrt.ops.spatial import Window

    window = Window.from_params({"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, "test")
    plan = DepthwiseTaps(window, (64, 32, 20, 20), (64, 32, 20, 20), (1, 1), 1)
    assert 1 <= plan.block < plan.rows  # several blocks, the last one partial or full
    assert plan.length == 20 * 22 and math.prod(plan.planes) == 22 * 22


def test_the_tap_sums_take_over_from_a_cache_sized_column_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()
    kernel = np.ones((32, 1, 3, 3), np.float32)
    op = _operator(kernel, None, group=32, pads=[1, 1, 1, 1])
    small, large = (1, 32, 16, 16), (1, 32, 64, 64)  # columns of 288 KiB and 4.5 MiB
    op.prepare([small], [small])
    assert op._depthwise is None
    op.prepare([large], [large])
    assert op._depthwise is not None
    dense = _operator(np.ones((32, 32, 3, 3), np.float32), None, group=1, pads=[1, 1, 1, 1])
    dense.prepare([large], [large])
    assert dense._depthwise is None  # not depthwise: im2col and one product
