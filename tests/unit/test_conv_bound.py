"""One-group convolutions on NumPy bound to their arrays at bind (``ConvolutionOperator._bound_run``: column
copies, product, bias and epilogue on views made then) against the operator's own ``run``, bit for bit; and
convolutions whose windows all lie inside the input (no padding) filling their column buffer with one copy of
a strided view of the input instead of one copy per kernel tap (the STFT convolution of silero-vad has 256
taps): the same columns, so the same results bit for bit, and the view follows a new input array."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from plugrt.core.types import TensorFormat, from_nptype
from plugrt.nodes.base import Binding
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
    x = rng.standard_normal(x_shape).astype(np.float32)
    for windows in (True, False):
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


def _binding(array: np.ndarray) -> Binding:
    return Binding(tuple(array.shape), from_nptype(array.dtype), TensorFormat.LINEAR, 1.0, 0, array, lambda: None)


BOUND: dict[str, tuple[tuple[int, ...], tuple[int, ...], dict[str, Any]]] = {
    "1d_padded": ((1, 129, 3), (128, 129, 3), {"pads": [1, 1], "activation": "RELU"}),
    "1d_strided": ((2, 16, 9), (8, 16, 3), {"pads": [1, 1], "strides": [2], "activation": "SIGMOID"}),
    "stft": ((1, 1, 576), (258, 1, 256), {"strides": [128]}),
    "2d_residual": ((2, 4, 6, 5), (4, 4, 3, 3), {"pads": [1, 1, 1, 1], "residual": True}),
    "2d_clip_affine": (
        (1, 3, 7, 7),
        (5, 3, 2, 2),
        {"strides": [2, 2], "activation": "CLIP", "activation_beta": 0.5, "post_scale": 2.0, "post_shift": 1.0},
    ),
    "pointwise": ((2, 6, 4, 4), (3, 6, 1, 1), {"activation": "TANH"}),
}


@pytest.mark.parametrize("name", sorted(BOUND))
@pytest.mark.parametrize("bias", [False, True])
def test_bound_run_matches_run(name: str, bias: bool) -> None:
    x_shape, k_shape, params = BOUND[name]
    rng = np.random.default_rng(len(name) + bias)
    kernel = rng.standard_normal(k_shape).astype(np.float32)
    weights = {"kernel": pack_conv_kernel(kernel, 1)}
    if bias:
        weights["bias"] = rng.standard_normal(k_shape[0]).astype(np.float32)
    op = ConvolutionOperator(
        {"num_output_maps": k_shape[0], "kernel_shape": list(k_shape[2:]), "has_bias": bias, **params}, weights
    )
    outs, _, _ = op.window.resolve(x_shape[2:])
    out_shape = (x_shape[0], k_shape[0], *outs)
    inputs = [rng.standard_normal(x_shape).astype(np.float32)]
    if params.get("residual"):
        inputs.append(rng.standard_normal(out_shape).astype(np.float32))
    bound, expected = np.full(out_shape, 7, np.float32), np.full(out_shape, 7, np.float32)
    op.bind([_binding(a) for a in inputs], [_binding(bound)], 0)
    launch, args = op.prepared_launch(0)
    assert launch != op.run and not args, f"{name}: no bound run"
    launch()
    launch()
    op.run(inputs, [expected])
    np.testing.assert_array_equal(bound, expected)


def test_grouped_and_half_convolutions_keep_run() -> None:
    rng = np.random.default_rng(5)
    grouped = _operator(rng.standard_normal((4, 1, 3)).astype(np.float32), group=2)
    x, out = np.zeros((1, 2, 6), np.float32), np.zeros((1, 4, 4), np.float32)
    grouped.bind([_binding(x)], [_binding(out)], 0)
    assert grouped.prepared_launch(0) == (grouped.run, grouped._bound_args)
    half = _operator(rng.standard_normal((2, 2, 3)).astype(np.float32))
    x16, out16 = np.zeros((1, 2, 6), np.float16), np.zeros((1, 2, 4), np.float16)
    half.bind([_binding(x16)], [_binding(out16)], 0)
    assert half.prepared_launch(0) == (half.run, half._bound_args)


@pytest.mark.parametrize("batch", [1, 3])
def test_large_products_run_as_blocks_on_two_threads(monkeypatch: pytest.MonkeyPatch, batch: int) -> None:
    """A large one-group convolution's product is cut into blocks for this thread and the helper, each a one-thread
    BLAS call (``product_parts``), in the bound run and in ``run``: the BLAS's own threads, which spin after a
    product, would take a core from the PyTorch kernels of the same run (MobileNetV2 at two threads: 2x slower)."""
    from plugrt.ops import conv_columns, product_parts

    pulled: list[int] = []
    pull = product_parts.pulled_by_two
    monkeypatch.setattr(conv_columns, "product_guard", lambda *sizes: None)  # large, whatever this machine's BLAS
    monkeypatch.setattr(product_parts, "split_products", lambda flops: True)
    monkeypatch.setattr(product_parts, "pulled_by_two", lambda count, work: (pulled.append(count), pull(count, work)))
    rng = np.random.default_rng(batch)
    kernel = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(32).astype(np.float32)
    op = ConvolutionOperator(
        {"num_output_maps": 32, "kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "has_bias": True, "activation": "RELU"},
        {"kernel": pack_conv_kernel(kernel, 1), "bias": bias},
    )
    x = rng.standard_normal((batch, 16, 40, 40)).astype(np.float32)
    bound, ran = np.full((batch, 32, 40, 40), 7, np.float32), np.full((batch, 32, 40, 40), 7, np.float32)
    op.bind([_binding(x)], [_binding(bound)], 0)
    launch, _ = op.prepared_launch(0)
    launch()
    assert pulled and all(count >= 2 for count in pulled), "the bound run's product was not split"
    pulled.clear()
    op.run([x], [ran])
    assert pulled and all(count >= 2 for count in pulled), "run's product was not split"
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))  # [N, C, H, W, 3, 3]
    exact = np.maximum(np.einsum("nchwij,mcij->nmhw", windows, kernel) + bias[:, None, None], 0)
    for result in (bound, ran):
        assert np.abs(result - exact).max() <= 1e-5 * np.abs(exact).max()
