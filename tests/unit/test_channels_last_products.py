"""Small 1x1 convolutions between channels-last tensors: NumPy's product of the rows with torch's epilogue in place
(``ops/torch_channels_last.py`` ``SMALL_PRODUCT_FLOPS``), against the NumPy kernel on NCHW tensors."""

from __future__ import annotations

import numpy as np
import pytest

from plugrt.core.types import TensorFormat
from plugrt.ops import torch_channels_last
from plugrt.ops.conv import ConvolutionOperator, pack_conv_kernel
from plugrt.ops.hand_over import hand_over

try:
    import torch
except ImportError:  # the tests that need it skip
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch (pip install 'plugrt[torch]')")

HWC = TensorFormat.HWC


def _op(
    residual: bool, activation: str = "HARD_SWISH", maps: int = 12, channels: int = 8, affine: bool = True
) -> ConvolutionOperator:
    rng = np.random.default_rng(5)
    kernel = (rng.standard_normal((maps, channels, 1, 1)) * 0.3).astype(np.float32)
    params = {"num_output_maps": maps, "kernel_shape": [1, 1], "residual": residual, "activation": activation}
    if activation in ("CLIP", "HARD_SIGMOID", "LEAKY_RELU"):
        params.update(activation_alpha=0.2 if activation != "CLIP" else -0.5, activation_beta=0.5)
    if affine:
        params.update(post_scale=1.3, post_shift=-0.2)
    weights = {"kernel": pack_conv_kernel(kernel, 1), "bias": rng.standard_normal(maps).astype(np.float32)}
    return ConvolutionOperator(params, weights)


def _hwc(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1))


def _reference(
    op: ConvolutionOperator, x_shape: tuple[int, ...], out_shape: tuple[int, ...], seed: int
) -> tuple[list[np.ndarray], np.ndarray]:
    """Random NCHW inputs (x, and the residual where ``op`` has one) and the NumPy kernel's NCHW result."""
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal(x_shape).astype(np.float32)]
    if op.residual:
        inputs.append(rng.standard_normal(out_shape).astype(np.float32))
    want = np.empty(out_shape, np.float32)
    op.prepare([a.shape for a in inputs], [want.shape])
    op.run(inputs, [want])
    return inputs, want


def _case(residual: bool, activation: str = "HARD_SWISH") -> tuple[ConvolutionOperator, list[np.ndarray], np.ndarray]:
    """The operator, its NCHW inputs (x, and the residual) and the NumPy kernel's NCHW result."""
    op = _op(residual, activation)
    return op, *_reference(op, (2, 8, 5, 7), (2, 12, 5, 7), 6)


@needs_torch
@pytest.mark.parametrize("activation", ["HARD_SWISH", "RELU", "HARD_SIGMOID", ""])
@pytest.mark.parametrize("residual", [False, True])
def test_a_small_1x1_convolution_between_hwc_tensors_is_numpy_s_product(residual: bool, activation: str) -> None:
    """The kernel writes the output's buffer (emptying its hand-over slot) with the NumPy kernel's results: product,
    bias, residual, activation, then the scalar affine map."""
    op, inputs, want = _case(residual, activation)
    x, out = _hwc(inputs[0]), np.full((2, 5, 7, 12), np.nan, np.float32)
    extra = _hwc(inputs[1]) if residual else None
    stale = hand_over(out)
    stale.tensor = torch.zeros(2, 12, 5, 7)  # a stale result must not survive the run
    run = torch_channels_last.convolution_channels_last(op, x, out, extra, [HWC] * (3 if residual else 2))
    assert run is not None and run.__qualname__.startswith("_small_product")
    run()
    assert stale.tensor is None
    np.testing.assert_allclose(out.transpose(0, 3, 1, 2), want, rtol=1e-5, atol=1e-6)


@needs_torch
@pytest.mark.parametrize("layout", ["channels_last", "contiguous"])
def test_the_small_product_reads_handed_over_tensors(layout: str) -> None:
    """A handed-over input and residual (torch's results, the buffers left stale) are what the product and the
    epilogue read, also a handed-over tensor that is not channels-last in memory."""
    op, inputs, want = _case(True)
    x, extra = np.full((2, 5, 7, 8), np.nan, np.float32), np.full((2, 5, 7, 12), np.nan, np.float32)
    out = np.empty((2, 5, 7, 12), np.float32)
    memory = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    slots = hand_over(x), hand_over(extra)  # held: a slot lives while someone holds it
    for slot, value in zip(slots, inputs):
        slot.tensor = torch.from_numpy(value).contiguous(memory_format=memory)
    run = torch_channels_last.convolution_channels_last(op, x, out, extra, [HWC] * 3)
    assert run is not None and run.__qualname__.startswith("_small_product")
    run()
    np.testing.assert_allclose(out.transpose(0, 3, 1, 2), want, rtol=1e-5, atol=1e-6)


@needs_torch
def test_larger_or_other_1x1_convolutions_stay_onednn_s(monkeypatch: pytest.MonkeyPatch) -> None:
    """From :data:`SMALL_PRODUCT_FLOPS` on, with a LINEAR end, strides or padding, the kernel is oneDNN's
    convolution, with the same results."""
    op, inputs, want = _case(False)
    x = _hwc(inputs[0])
    monkeypatch.setattr(torch_channels_last, "SMALL_PRODUCT_FLOPS", 0.0)
    out = np.empty((2, 5, 7, 12), np.float32)
    run = torch_channels_last.convolution_channels_last(op, x, out, None, [HWC, HWC])
    assert run is not None and not run.__qualname__.startswith("_small_product")
    run()
    result = hand_over(out).tensor
    got = out.transpose(0, 3, 1, 2) if result is None else result.numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    monkeypatch.undo()
    linear_out = np.empty((2, 12, 5, 7), np.float32)
    run = torch_channels_last.convolution_channels_last(op, x, linear_out, None, [HWC, TensorFormat.LINEAR])
    assert run is not None and not run.__qualname__.startswith("_small_product")
    run()
    np.testing.assert_allclose(linear_out, want, rtol=1e-5, atol=1e-6)


@needs_torch
@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_a_uniform_kernel_runs_channels_last_with_bit_identical_maps(residual: bool, bias: bool) -> None:
    """A kernel of one value (the ONNX light models' weights): oneDNN's convolution alone, its maps of each group
    made bit-identical, then the bias, residual and activation, as the NumPy kernel computes them."""
    rng = np.random.default_rng(7)
    kernel = np.full((8, 2, 3, 3), 0.125, np.float32)
    params = {"num_output_maps": 8, "kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "group": 2, "uniform_kernel": True}
    params.update(residual=residual, activation="RELU")
    weights = {"kernel": pack_conv_kernel(kernel, 2)}
    if bias:
        weights["bias"] = rng.standard_normal(8).astype(np.float32)
    op = ConvolutionOperator(params, weights)
    inputs, want = _reference(op, (2, 4, 6, 5), (2, 8, 6, 5), 8)
    out = np.empty((2, 6, 5, 8), np.float32)
    slot = hand_over(out)
    run = torch_channels_last.convolution_channels_last(
        op, _hwc(inputs[0]), out, _hwc(inputs[1]) if residual else None, [HWC] * (3 if residual else 2)
    )
    assert run is not None
    run()
    got = out.transpose(0, 3, 1, 2) if slot.tensor is None else slot.tensor.numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    if not (bias or residual):  # the maps of a group are one map, bit for bit
        split = got.reshape(2, 2, 4, -1)
        assert (split == split[:, :, :1]).all()


@needs_torch
@pytest.mark.parametrize("activation", ["HARD_SWISH", "RELU", "CLIP", "HARD_SIGMOID", "LEAKY_RELU", ""])
@pytest.mark.parametrize("residual", ["none", "buffer", "handed"])
def test_the_small_product_s_epilogue_compiled_where_numba_is(
    residual: str, activation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a scalar map, where numba is installed, the bias, an HWC residual (its buffer or a handed-over
    tensor) and the activation are one compiled pass over the rows (``rows_epilogue``); with ``PLUGRT_NUMBA=0``
    torch's in-place kernels: both the NumPy kernel's results."""
    from plugrt.ops import depthwise_numba

    op = _op(residual != "none", activation, affine=False)
    inputs, want = _reference(op, (2, 8, 5, 7), (2, 12, 5, 7), 9)
    for switch in ("1", "0"):
        monkeypatch.setenv(depthwise_numba.ENV_SWITCH, switch)
        x, out = _hwc(inputs[0]), np.full((2, 5, 7, 12), np.nan, np.float32)
        extra = _hwc(inputs[1]) if residual != "none" else None
        held = None
        if residual == "handed":
            held = hand_over(extra)
            held.tensor = torch.from_numpy(inputs[1].copy()).contiguous(memory_format=torch.channels_last)
            extra[...] = np.nan  # the buffer is stale: the slot's tensor is the residual
        run = torch_channels_last.convolution_channels_last(op, x, out, extra, [HWC] * (2 if extra is None else 3))
        assert run is not None
        compiled = switch == "1" and depthwise_numba.available()
        assert run.__qualname__.endswith("run_compiled") is compiled
        run()
        np.testing.assert_allclose(out.transpose(0, 3, 1, 2), want, rtol=1e-5, atol=1e-6)


@needs_torch
@pytest.mark.parametrize("affine", [False, True], ids=["plain", "affine"])
@pytest.mark.parametrize("activation", ["CLIP", "HARD_SWISH", "HARD_SIGMOID", ""])
@pytest.mark.parametrize("residual", ["none", "buffer", "handed"])
def test_a_larger_1x1_convolution_is_onednn_s_product_of_the_rows(
    residual: str, activation: str, affine: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From :data:`SMALL_PRODUCT_FLOPS` on, a 1x1 convolution between HWC tensors is oneDNN's linear of the rows
    (bias and activation its post-ops, a residual its ``add``; HARD_SIGMOID and the affine map in place after),
    its result handed over: the NumPy kernel's results."""
    monkeypatch.setattr(torch_channels_last, "SMALL_PRODUCT_FLOPS", 0.0)
    op = _op(residual != "none", activation, affine=affine)
    inputs, want = _reference(op, (2, 8, 5, 7), (2, 12, 5, 7), 10)
    x, out = _hwc(inputs[0]), np.full((2, 5, 7, 12), np.nan, np.float32)
    extra = None if residual == "none" else _hwc(inputs[1])
    held = None
    if residual == "handed":
        assert extra is not None
        held = hand_over(extra)
        held.tensor = torch.from_numpy(inputs[1].copy())  # a handed-over tensor need not be channels-last
        extra[...] = np.nan
    run = torch_channels_last.convolution_channels_last(op, x, out, extra, [HWC] * (2 if extra is None else 3))
    assert run is not None and "_rows_linear" in run.__qualname__
    run()
    result = hand_over(out).tensor
    assert result is not None and tuple(result.shape) == (2, 12, 5, 7)
    np.testing.assert_allclose(result.numpy(), want, rtol=1e-5, atol=1e-5)


@needs_torch
def test_the_product_of_the_rows_reads_a_handed_over_input_and_writes_a_linear_output(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A handed-over input (the buffer stale) is what the product reads; a LINEAR output (a network output) is
    written in NCHW order; the kernel is reordered once across binds."""
    monkeypatch.setattr(torch_channels_last, "SMALL_PRODUCT_FLOPS", 0.0)
    op, inputs, want = _case(False, "RELU")
    x = np.full((2, 5, 7, 8), np.nan, np.float32)
    slot = hand_over(x)
    slot.tensor = torch.from_numpy(inputs[0]).contiguous(memory_format=torch.channels_last)
    out = np.full((2, 12, 5, 7), np.nan, np.float32)
    run = torch_channels_last.convolution_channels_last(op, x, out, None, [HWC, TensorFormat.LINEAR])
    assert run is not None and "_rows_linear" in run.__qualname__
    run()
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    packed = op.derived_weight("kernel", ("rows", torch.float32, 8, 12), lambda: None)
    again = torch_channels_last.convolution_channels_last(op, x, out, None, [HWC, TensorFormat.LINEAR])
    assert again is not None and op.derived_weight("kernel", ("rows", torch.float32, 8, 12), lambda: None) is packed


@needs_torch
@pytest.mark.parametrize("case", ["linear-input", "linear-residual", "stride-2", "grouped"])
def test_other_1x1_convolutions_are_not_the_product_of_the_rows(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A LINEAR input or residual, strides or groups keep oneDNN's convolution, with the NumPy kernel's results."""
    monkeypatch.setattr(torch_channels_last, "SMALL_PRODUCT_FLOPS", 0.0)
    residual = case == "linear-residual"
    rng = np.random.default_rng(12)
    group = 2 if case == "grouped" else 1
    kernel = (rng.standard_normal((12, 8 // group, 1, 1)) * 0.3).astype(np.float32)
    params = {"num_output_maps": 12, "kernel_shape": [1, 1], "residual": residual, "activation": "RELU", "group": group}
    if case == "stride-2":
        params["strides"] = [2, 2]
    op = ConvolutionOperator(params, {"kernel": pack_conv_kernel(kernel, group)})
    out_shape = (2, 12, 3, 4) if case == "stride-2" else (2, 12, 5, 7)
    inputs, want = _reference(op, (2, 8, 5, 7), out_shape, 13)
    linear_input = case == "linear-input"
    x = inputs[0] if linear_input else _hwc(inputs[0])
    extra = inputs[1] if residual else None
    formats = [TensorFormat.LINEAR if linear_input else HWC, *([TensorFormat.LINEAR] if residual else []), HWC]
    out = np.full((out_shape[0], *out_shape[2:], out_shape[1]), np.nan, np.float32)
    run = torch_channels_last.convolution_channels_last(op, x, out, extra, formats)
    assert run is not None and "_rows_linear" not in run.__qualname__
    run()
    result = hand_over(out).tensor
    got = out.transpose(0, 3, 1, 2) if result is None else result.numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@needs_torch
@pytest.mark.parametrize("handed", [False, True])
def test_an_hwc_average_gives_equal_channels_equal_means(handed: bool) -> None:
    """Global average pooling of an HWC tensor whose channels hold the same values (a uniform kernel's maps) gives
    bit-identical means, also past the last whole vector of channels (1000 = 62 x 16 + 8): summed in float64,
    rounded once, as NumPy's mean of the map in float64 is."""
    rng = np.random.default_rng(11)
    pixels = (9.4e9 + rng.standard_normal((2, 13, 13, 1)) * 3e7).astype(np.float32)
    x = np.ascontiguousarray(np.broadcast_to(pixels, (2, 13, 13, 1000)))
    out = np.full((2, 1000, 1, 1), np.nan, np.float32)
    source = x
    if handed:
        slot = hand_over(x)
        slot.tensor = torch.from_numpy(x.copy()).permute(0, 3, 1, 2)  # channels-last [N, C, H, W]
        source = x.copy()
        x[...] = np.nan  # the buffer is stale: the slot's tensor is the input
    run = torch_channels_last.global_pooling_channels_last(torch.mean, x, out, HWC)
    run()
    means = out.reshape(2, 1000)
    assert (means == means[:, :1]).all()
    want = source.astype(np.float64).mean(axis=(1, 2)).astype(np.float32)
    np.testing.assert_array_equal(means, want)
