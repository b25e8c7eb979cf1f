"""The generated depthwise kernel of channels-last runs on a GPU (``ops/depthwise_cuda.py``): against cuDNN's path
and a NumPy reference, HALF and FLOAT, windows, strides, dilations, padding of one end only, activations, with and
without a bias; the input read from its hand-over slot; what it declines."""

from __future__ import annotations

import numpy as np
import pytest

from plugrt.core.types import TensorFormat
from plugrt.ops.base import create_operator

pytestmark = pytest.mark.gpu
HWC = [TensorFormat.HWC, TensorFormat.HWC]


def _reference(x: np.ndarray, kernel: np.ndarray, bias, stride: int, pads, dilation: int) -> np.ndarray:
    """x [N, C, H, W] float64, kernel [C, 1, k, k]: the depthwise convolution, pads (top, left, bottom, right)."""
    n, c = x.shape[:2]
    k = kernel.shape[-1]
    padded = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    extent = dilation * (k - 1) + 1
    oh, ow = (padded.shape[2] - extent) // stride + 1, (padded.shape[3] - extent) // stride + 1
    out = np.zeros((n, c, oh, ow))
    for i in range(k):
        for j in range(k):
            top, left = i * dilation, j * dilation
            window = padded[:, :, top : top + stride * (oh - 1) + 1 : stride, left : left + stride * (ow - 1) + 1 : stride]
            out += window * kernel[None, :, 0, i, j, None, None]
    return out if bias is None else out + bias[None, :, None, None]


ACTS = {
    "": lambda v: v,
    "RELU": lambda v: np.maximum(v, 0),
    "HARD_SWISH": lambda v: v * np.clip(v + 3, 0, 6) / 6,
    "CLIP": lambda v: np.clip(v, 0.0, 6.0),
}


@pytest.mark.parametrize("half", [False, True])
@pytest.mark.parametrize(
    "k,stride,pads,dilation,activation,bias",
    [
        (3, 1, (1, 1, 1, 1), 1, "RELU", True),
        (3, 2, (1, 1, 1, 1), 1, "CLIP", True),
        (5, 2, (2, 2, 2, 2), 1, "HARD_SWISH", True),
        (5, 1, (2, 2, 2, 2), 1, "", False),
        (3, 2, (0, 0, 1, 1), 1, "RELU", True),
        (3, 1, (2, 2, 2, 2), 2, "", True),
        (7, 1, (3, 3, 3, 3), 1, "HARD_SWISH", True),
        (3, 1, (0, 2, 1, 0), 1, "RELU", True),
        (5, 1, (1, 0, 3, 4), 1, "CLIP", False),
    ],
)
def test_the_depthwise_kernel_matches_cudnn_and_numpy(monkeypatch, half, k, stride, pads, dilation, activation, bias):
    import cupy as cp

    from plugrt.ops import depthwise_cuda
    from plugrt.ops.hand_over import hand_over
    from plugrt.ops.torch_cpu_kernels import convolution

    rng = np.random.default_rng(k * 10 + stride)
    channels, size, batch = 24, 13, 3  # (24: whole 16-byte words of channels in HALF and FLOAT)
    params = {
        "kernel_shape": [k, k],
        "strides": [stride, stride],
        "pads": list(pads),
        "dilations": [dilation, dilation],
        "group": channels,
        "num_output_maps": channels,
        "activation": activation,
        "activation_alpha": 0.0,
        "activation_beta": 6.0,
    }
    weights = {"kernel": (rng.standard_normal((channels, 1, k, k)) * 0.3).astype(np.float32)}
    if bias:
        weights["bias"] = rng.standard_normal(channels).astype(np.float32)
    dtype = np.float16 if half else np.float32
    host = rng.standard_normal((batch, channels, size, size)).astype(dtype)
    want = ACTS[activation](
        _reference(host.astype(np.float64), weights["kernel"], weights.get("bias"), stride, pads, dilation)
    )
    x = cp.asarray(np.ascontiguousarray(host.transpose(0, 2, 3, 1)))  # stored channels-last
    results = []
    for switch in ("1", "0"):
        monkeypatch.setenv(depthwise_cuda.SWITCH, switch)
        op = create_operator("convolution", params, weights)
        op.xp = cp  # (as the engine binds it: its weights on the device)
        out = cp.full((batch, *want.shape[2:], channels), 7, dtype)
        run = convolution(op, x, None, None, out, None, HWC)
        assert run is not None
        run()
        handed = hand_over(out).tensor  # (cuDNN's fused ReLU hands its result over instead of writing the buffer)
        stored = cp.asnumpy(out).transpose(0, 3, 1, 2) if handed is None else handed.float().cpu().numpy()
        results.append(stored.astype(np.float64))
    scale = float(np.abs(want).max())
    tolerance = 2e-3 if half else 1e-5
    assert np.abs(results[0] - want).max() <= tolerance * scale  # the generated kernel
    assert np.abs(results[1] - want).max() <= (2e-2 if half else 1e-3) * scale  # cuDNN (TF32 in FLOAT)


def test_the_depthwise_kernel_reads_the_handed_over_input_and_empties_its_output_slot(monkeypatch) -> None:
    import cupy as cp
    import torch

    from plugrt.ops.depthwise_cuda import SWITCH, depthwise_cuda
    from plugrt.ops.hand_over import hand_over
    from plugrt.ops.torch_cpu_kernels import logical_view

    monkeypatch.setenv(SWITCH, "1")
    params = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "group": 8, "num_output_maps": 8}
    kernel = np.zeros((8, 1, 3, 3), np.float32)
    kernel[:, 0, 1, 1] = 2.0  # the centre tap: y = 2 x
    op = create_operator("convolution", params, {"kernel": kernel})
    x, out = cp.zeros((2, 5, 5, 8), np.float32), cp.full((2, 5, 5, 8), 7, np.float32)
    slots = (hand_over(x), None, hand_over(out))
    run = depthwise_cuda(op, logical_view(x, TensorFormat.HWC), logical_view(out, TensorFormat.HWC), [1, 1], slots)
    assert run is not None
    given = torch.arange(2 * 8 * 25, dtype=torch.float32, device="cuda").reshape(2, 8, 5, 5)
    slots[0].tensor = given.contiguous(memory_format=torch.channels_last)
    slots[2].tensor = torch.zeros(1, device="cuda")  # a stale tensor: the run must empty the slot
    run()
    np.testing.assert_array_equal(cp.asnumpy(out).transpose(0, 3, 1, 2), 2 * given.cpu().numpy())
    assert slots[2].tensor is None
    slots[0].tensor = given  # not channels-last: made so first
    out.fill(7)
    run()
    np.testing.assert_array_equal(cp.asnumpy(out).transpose(0, 3, 1, 2), 2 * given.cpu().numpy())


def test_the_depthwise_kernel_declines_what_it_does_not_compute(monkeypatch) -> None:
    import cupy as cp

    from plugrt.ops.depthwise_cuda import SWITCH, depthwise_cuda
    from plugrt.ops.torch_cpu_kernels import logical_view

    def declines(params: dict, weights: dict, channels: int = 8, out_channels: int = 8, layout=TensorFormat.HWC) -> bool:
        op = create_operator("convolution", {"kernel_shape": [3, 3], "pads": [1] * 4, **params}, weights)
        x, out = cp.zeros((1, 5, 5, channels), np.float32), cp.zeros((1, 5, 5, out_channels), np.float32)
        xt, ot = logical_view(x, layout), logical_view(out, layout)
        return depthwise_cuda(op, xt, ot, [1, 1], (None, None, None)) is None

    kernel = {"kernel": np.ones((8, 1, 3, 3), np.float32)}
    monkeypatch.setenv(SWITCH, "1")
    assert not declines({"group": 8, "num_output_maps": 8}, kernel)
    assert declines({"group": 8, "num_output_maps": 8}, kernel, layout=TensorFormat.LINEAR)  # not channels-last
    assert declines({"group": 1, "num_output_maps": 8}, {"kernel": np.ones((8, 8, 3, 3), np.float32)})  # dense
    assert declines({"group": 4, "num_output_maps": 8}, {"kernel": np.ones((8, 2, 3, 3), np.float32)})  # grouped
    assert declines({"group": 8, "num_output_maps": 8, "residual": True}, kernel)  # a residual
    large = cp.zeros((1, 120, 120, 8), np.float32)  # 115200 outputs an image at stride 1: the row kernel
    large_view = logical_view(large, TensorFormat.HWC)
    op = create_operator("convolution", {"kernel_shape": [3, 3], "pads": [1] * 4, "group": 8, "num_output_maps": 8}, kernel)
    assert depthwise_cuda(op, large_view, large_view, [1, 1], (None, None, None)) is not None
    large_half = logical_view(cp.zeros((1, 120, 120, 8), np.float16), TensorFormat.HWC)  # HALF: the row kernel
    assert depthwise_cuda(op, large_half, large_half, [1, 1], (None, None, None)) is not None
    strided = create_operator(
        "convolution",
        {"kernel_shape": [3, 3], "pads": [1] * 4, "strides": [2, 2], "group": 8, "num_output_maps": 8},
        kernel,
    )
    half_size = logical_view(cp.zeros((1, 60, 60, 8), np.float32), TensorFormat.HWC)
    assert depthwise_cuda(strided, large_view, half_size, [1, 1], (None, None, None)) is not None
    monkeypatch.setenv(SWITCH, "0")
    assert declines({"group": 8, "num_output_maps": 8}, kernel)  # turned off: cuDNN's


def test_channels_no_multiple_of_a_word_take_one_channel_a_thread(monkeypatch) -> None:
    import cupy as cp

    from plugrt.ops.depthwise_cuda import SWITCH
    from plugrt.ops.torch_cpu_kernels import convolution

    monkeypatch.setenv(SWITCH, "1")
    rng = np.random.default_rng(7)
    channels = 5
    kernel = (rng.standard_normal((channels, 1, 3, 3)) * 0.3).astype(np.float32)
    params = {"kernel_shape": [3, 3], "pads": [1] * 4, "group": channels, "num_output_maps": channels}
    op = create_operator("convolution", params, {"kernel": kernel})
    op.xp = cp
    host = rng.standard_normal((2, channels, 9, 9)).astype(np.float16)
    x, out = cp.asarray(np.ascontiguousarray(host.transpose(0, 2, 3, 1))), cp.zeros((2, 9, 9, channels), np.float16)
    run = convolution(op, x, None, None, out, None, HWC)
    assert run is not None
    run()
    want = _reference(host.astype(np.float64), kernel, None, 1, (1, 1, 1, 1), 1)
    got = cp.asnumpy(out).transpose(0, 3, 1, 2).astype(np.float64)
    assert np.abs(got - want).max() <= 2e-3 * float(np.abs(want).max())
