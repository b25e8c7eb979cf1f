"""Convolutions whose windows all lie inside the input (no padding) fill their column buffer with one copy of
a strided view of the input instead of one copy per kernel tap (the STFT convolution of silero-vad has 256
taps): the same columns, so the same results bit for bit, and the view follows a new input array."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from plugrt.ops.conv import ConvolutionOperator, pack_conv_kernel

CASES: dict[str, tuple[tuple[int, ...], tuple[int, ...], dict[str, Any]]] = {
    "stft": ((1, 1, 576), (10, 1, 256), {"strides": [128]}),
    "1d_dilated": ((2, 3, 40), (4, 3, 5), {"strides": [3], "dilations": [2]}),
    "2d_grouped": ((2, 4, 9, 11), (6, 2, 3, 2), {"strides": [2, 1], "group": 2}),
    "2d_leftover": ((1, 2, 10, 10), (3, 2, 3, 3), {"strides": [4, 4]}),  # the last rows and columns unread
    "3d": ((1, 2, 5, 6, 7), (2, 2, 2, 3, 2), {"dilations": [2, 1, 3]}),
}


def _operator(kernel: np.ndarray, **params: Any) -> ConvolutionOperator:
    group = params.setdefault("group", 1)
    weights = {"kernel": pack_conv_kernel(kernel, group)}
    return ConvolutionOperator({"num_output_maps": kernel.shape[0], "kernel_shape": list(kernel.shape[2:]), **params}, weights)


@pytest.mark.parametrize("name", sorted(CASES))
def test_window_copy_matches_the_taps(name: str) -> None:
    x_shape, k_shape, params = CASES[name]
    rng = np.random.default_rng(len(name))
    kernel = rng.standard_normal(k_shape).astype(np.float32)
    op = _operator(kernel, **params)
    outs, _, _ = op.window.resolve(x_shape[2:])
    results = []
    for windows in (True, False):
        x = rng.standard_normal(x_shape).astype(np.float32) if windows else x
        out = np.full((x_shape[0], k_shape[0], *outs), 7, np.float32)
        op.prepare([x_shape], [out.shape])
        if not windows:
            op._windows = None  # the plan of one copy per tap
        else:
            assert op._windows is not None
        op.run([x], [out])
        op.run([x], [out])
        results.append(out)
    np.testing.assert_array_equal(results[0], results[1])


def test_window_view_follows_a_new_input() -> None:
    rng = np.random.default_rng(3)
    kernel = rng.standard_normal((2, 1, 4)).astype(np.float32)
    op = _operator(kernel, strides=[2])
    outs = []
    for _ in range(2):
        x = rng.standard_normal((1, 1, 12)).astype(np.float32)
        out = np.empty((1, 2, 5), np.float32)
        op.run([x], [out])
        frames = np.lib.stride_tricks.sliding_window_view(x[0, 0], 4)[::2]
        np.testing.assert_allclose(out[0], kernel[:, 0] @ frames.T, rtol=1e-6, atol=1e-6)
        outs.append(out)
    assert not np.array_equal(outs[0], outs[1])


def test_padded_windows_keep_the_taps() -> None:
    op = _operator(np.ones((2, 1, 3), np.float32), pads=[1, 0])
    op.prepare([(1, 1, 8)], [(1, 2, 7)])
    assert op._windows is None
