"""oneDNN's convolution called directly through its C API (``ops/onednn.py``, ``ops/onednn_conv.py``).

Oracles: a float64 NumPy convolution written here (explicit pads, strides, dilations, groups, then the epilogue:
bias, residual, activation, scalar map), within rtol 1e-5 and 1e-5 of the result's largest magnitude (at least
1); the operator's own NumPy kernel (``op.run`` on NCHW arrays) agrees with that reference within the same
tolerance; onnxruntime for a whole engine. Buffers are HWC (channels-last ``[N, H, W, C]``) or LINEAR (NCHW),
outputs filled with NaN first so a position the kernel does not write fails.

A LINEAR residual is staged channels-last as a LINEAR input is (of one map: described channels-last, the same bytes),
so oneDNN takes its fast kernels for it; oneDNN's primitive cache is process-wide, so tests that bind one-channel
buffers use shapes of their own.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt
from onednn_support import ONEDNN_TESTS
from plugrt.core.types import TensorFormat
from plugrt.ops import onednn, onednn_buffers, onednn_conv
from plugrt.ops.conv import ConvolutionOperator, pack_conv_kernel
from plugrt.ops.hand_over import hand_over
from plugrt.ops.torch_cpu import MIN_OPENMP_FLOPS

pytestmark = ONEDNN_TESTS

HWC, LINEAR = TensorFormat.HWC, TensorFormat.LINEAR
RTOL = 1e-5
ATOL = 1e-5  # times the reference's largest magnitude (at least 1)



# --- helpers ------------------------------------------------------------------------------------------------------


def _operator(
    c: int,
    maps: int,
    kernel: tuple[int, ...],
    group: int = 1,
    bias: bool = True,
    seed: int = 0,
    **params,
) -> ConvolutionOperator:
    """A convolution of ``c`` input channels with a random kernel (packed as the builder packs it) and bias."""
    rng = np.random.default_rng(seed)
    raw = (rng.standard_normal((maps, c // group, *kernel)) * 0.5).astype(np.float32)
    weights = {"kernel": pack_conv_kernel(raw, group)}
    if bias:
        weights["bias"] = rng.standard_normal(maps).astype(np.float32)
    return ConvolutionOperator(
        {"num_output_maps": maps, "kernel_shape": list(kernel), "group": group, **params}, weights
    )


def _out_shape(op: ConvolutionOperator, x_shape: tuple[int, ...]) -> tuple[int, ...]:
    sizes, _, _ = op.window.resolve(x_shape[2:])
    return (x_shape[0], op.maps, *sizes)


_ACTIVATIONS = {
    "": lambda y, a, b: y,
    "RELU": lambda y, a, b: np.maximum(y, 0.0),
    "LEAKY_RELU": lambda y, a, b: np.where(y >= 0.0, y, a * y),
    "CLIP": lambda y, a, b: np.clip(y, a, b),
    "HARD_SWISH": lambda y, a, b: y * np.clip(y / 6.0 + 0.5, 0.0, 1.0),
    "HARD_SIGMOID": lambda y, a, b: np.clip(a * y + b, 0.0, 1.0),
    "SIGMOID": lambda y, a, b: 1.0 / (1.0 + np.exp(-y)),
    "TANH": lambda y, a, b: np.tanh(y),
}


def _reference(op: ConvolutionOperator, x: np.ndarray, residual: np.ndarray | None = None) -> np.ndarray:
    """The layer in float64 from its params (explicit pads only), NCHW in and out."""
    p = op.params
    kh, kw = p["kernel_shape"]
    sh, sw = p.get("strides", [1, 1])
    dh, dw = p.get("dilations", [1, 1])
    top, left, bottom, right = p.get("pads", [0, 0, 0, 0])
    n, c, h, w = x.shape
    group, maps = op.group, op.maps
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
    oh = (h + top + bottom - dh * (kh - 1) - 1) // sh + 1
    ow = (w + left + right - dw * (kw - 1) - 1) // sw + 1
    kernel = np.asarray(op.weights["kernel"], np.float64).reshape(maps, c // group, kh, kw)
    out = np.zeros((n, maps, oh, ow))
    mg, cg = maps // group, c // group
    for i in range(kh):
        for j in range(kw):
            tap = padded[:, :, i * dh : i * dh + (oh - 1) * sh + 1 : sh, j * dw : j * dw + (ow - 1) * sw + 1 : sw]
            for g in range(group):
                maps_g, channels_g = slice(g * mg, (g + 1) * mg), slice(g * cg, (g + 1) * cg)
                out[:, maps_g] += np.einsum("mc,nchw->nmhw", kernel[maps_g, :, i, j], tap[:, channels_g])
    if "bias" in op.weights:
        out += np.asarray(op.weights["bias"], np.float64).reshape(1, -1, 1, 1)
    if residual is not None:
        out += residual.astype(np.float64)
    out = _ACTIVATIONS[op.activation](out, *op.activation_range)
    scale, shift = op.post_affine
    return out * scale + shift


def _assert_close(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL * max(1.0, float(np.abs(want).max())))


def _stored(a: np.ndarray, fmt: TensorFormat) -> np.ndarray:
    """An NCHW array as a new dense buffer of ``fmt`` (every axis its C-order stride, a size-1 one included:
    ``np.ascontiguousarray`` of a transposed one-channel array returns the view)."""
    view = a.transpose(0, 2, 3, 1) if fmt == HWC else a
    buffer = np.empty(view.shape, np.float32)
    np.copyto(buffer, view)
    return buffer


def _logical(buffer: np.ndarray, fmt: TensorFormat) -> np.ndarray:
    """A buffer of ``fmt`` seen as NCHW."""
    return buffer.transpose(0, 3, 1, 2) if fmt == HWC else buffer


def _empty(shape: tuple[int, ...], fmt: TensorFormat) -> np.ndarray:
    """A NaN-filled buffer of ``fmt`` for the NCHW ``shape``."""
    n, c, h, w = shape
    return np.full((n, h, w, c) if fmt == HWC else shape, np.nan, np.float32)


def _random(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# --- results over a grid ------------------------------------------------------------------------------------------

#: name -> (x shape NCHW, maps, kernel, group, bias, conv params, (activation, alpha, beta), post (scale, shift)
#: or None, residual format or None, (input format, output format))
CASES = {
    "1x1": ((1, 8, 5, 6), 16, (1, 1), 1, True, {}, ("", 0, 0), None, None, (HWC, HWC)),
    "3x3_relu": ((1, 8, 9, 10), 16, (3, 3), 1, True, {"pads": [1, 1, 1, 1]}, ("RELU", 0, 0), None, None, (HWC, HWC)),
    "5x5_stride2_leaky_no_bias": (
        (1, 6, 11, 12),
        8,
        (5, 5),
        1,
        False,
        {"pads": [2, 2, 2, 2], "strides": [2, 2]},
        ("LEAKY_RELU", 0.1, 0),
        None,
        None,
        (HWC, HWC),
    ),
    "3x3_dilated_clip": (
        (1, 8, 12, 11),
        8,
        (3, 3),
        1,
        True,
        {"pads": [2, 2, 2, 2], "dilations": [2, 2]},
        ("CLIP", 0.0, 6.0),
        None,
        None,
        (HWC, HWC),
    ),
    "3x3_asymmetric_pads_hard_swish_linear_in": (
        (1, 8, 9, 10),
        12,
        (3, 3),
        1,
        True,
        {"pads": [0, 1, 1, 2]},
        ("HARD_SWISH", 0, 0),
        None,
        None,
        (LINEAR, HWC),
    ),
    "depthwise_3x3_hard_sigmoid": (
        (1, 16, 9, 10),
        16,
        (3, 3),
        16,
        True,
        {"pads": [1, 1, 1, 1]},
        ("HARD_SIGMOID", 0.2, 0.5),
        None,
        None,
        (HWC, HWC),
    ),
    "depthwise_5x5_stride2_sigmoid_linear_out": (
        (1, 24, 11, 12),
        24,
        (5, 5),
        24,
        False,
        {"pads": [2, 2, 2, 2], "strides": [2, 2]},
        ("SIGMOID", 0, 0),
        None,
        None,
        (HWC, LINEAR),
    ),
    "depthwise_multiplier2_tanh_linear": (
        (1, 8, 7, 9),
        16,
        (3, 3),
        8,
        True,
        {"pads": [0, 1, 1, 2]},
        ("TANH", 0, 0),
        None,
        None,
        (LINEAR, LINEAR),
    ),
    "depthwise_dilated_stride2_affine": (
        (1, 16, 13, 13),
        16,
        (3, 3),
        16,
        True,
        {"pads": [2, 2, 2, 2], "dilations": [2, 2], "strides": [2, 2]},
        ("RELU", 0, 0),
        (0.5, 1.0),
        None,
        (HWC, HWC),
    ),
    "grouped_3x3_linear": (
        (1, 12, 8, 9),
        8,
        (3, 3),
        2,
        True,
        {"pads": [1, 1, 1, 1]},
        ("", 0, 0),
        None,
        None,
        (LINEAR, LINEAR),
    ),
    "grouped_1x1_stride2_clip": (
        (1, 8, 9, 10),
        12,
        (1, 1),
        2,
        False,
        {"strides": [2, 2]},
        ("CLIP", 0.0, 6.0),
        None,
        None,
        (HWC, HWC),
    ),
    "grouped_5x5_hard_swish_affine": (
        (1, 12, 9, 9),
        12,
        (5, 5),
        2,
        True,
        {"pads": [0, 1, 1, 2]},
        ("HARD_SWISH", 0, 0),
        (0.5, 1.0),
        None,
        (HWC, LINEAR),
    ),
    "post_affine_only": (
        (1, 8, 6, 7),
        8,
        (3, 3),
        1,
        True,
        {"pads": [1, 1, 1, 1]},
        ("", 0, 0),
        (0.5, 1.0),
        None,
        (HWC, HWC),
    ),
    "residual_hwc_relu": (
        (1, 8, 8, 9),
        16,
        (3, 3),
        1,
        True,
        {"pads": [1, 1, 1, 1]},
        ("RELU", 0, 0),
        None,
        HWC,
        (HWC, HWC),
    ),
    "residual_hwc_hard_swish_affine_linear_in_out": (
        (1, 8, 8, 9),
        16,
        (3, 3),
        1,
        True,
        {"pads": [1, 1, 1, 1]},
        ("HARD_SWISH", 0, 0),
        (0.5, 1.0),
        HWC,
        (LINEAR, LINEAR),
    ),
    "residual_hwc_1x1_leaky": (
        (1, 8, 6, 7),
        8,
        (1, 1),
        1,
        False,
        {},
        ("LEAKY_RELU", 0.1, 0),
        None,
        HWC,
        (HWC, HWC),
    ),
    "residual_hwc_depthwise_clip": (
        (1, 16, 7, 8),
        16,
        (3, 3),
        16,
        True,
        {"pads": [1, 1, 1, 1]},
        ("CLIP", 0.0, 6.0),
        None,
        HWC,
        (LINEAR, HWC),
    ),
    "batch3_3x3_leaky": (
        (3, 8, 7, 8),
        8,
        (3, 3),
        1,
        True,
        {"pads": [1, 1, 1, 1]},
        ("LEAKY_RELU", 0.1, 0),
        None,
        None,
        (HWC, HWC),
    ),
    "batch3_stride2_asymmetric_sigmoid_linear": (
        (3, 6, 7, 8),
        4,
        (3, 3),
        1,
        True,
        {"pads": [0, 1, 1, 2], "strides": [2, 2]},
        ("SIGMOID", 0, 0),
        None,
        None,
        (LINEAR, LINEAR),
    ),
    "batch3_grouped_residual_hwc_linear_out": (
        (3, 8, 6, 7),
        8,
        (3, 3),
        2,
        True,
        {"pads": [1, 1, 1, 1]},
        ("TANH", 0, 0),
        None,
        HWC,
        (HWC, LINEAR),
    ),
    "one_channel_hwc": (
        (1, 1, 10, 11),
        8,
        (3, 3),
        1,
        True,
        {"pads": [1, 1, 1, 1]},
        ("RELU", 0, 0),
        None,
        None,
        (HWC, HWC),
    ),
    "one_channel_linear_batch2_5x5_stride2": (
        (2, 1, 10, 11),
        8,
        (5, 5),
        1,
        True,
        {"strides": [2, 2]},
        ("TANH", 0, 0),
        None,
        None,
        (LINEAR, HWC),
    ),
    # maps one pixel wide with a k x 1 kernel: oneDNN is told them one pixel high (onednn_conv._Geometry)
    "width_one_5x1_relu": (
        (1, 8, 16, 1),
        8,
        (5, 1),
        1,
        True,
        {"pads": [2, 0, 2, 0]},
        ("RELU", 0, 0),
        None,
        None,
        (HWC, HWC),
    ),
    "width_one_5x1_stride2_batch2_linear": (
        (2, 8, 16, 1),
        12,
        (5, 1),
        1,
        True,
        {"pads": [2, 0, 2, 0], "strides": [2, 1]},
        ("HARD_SWISH", 0, 0),
        (0.5, 1.0),
        None,
        (LINEAR, LINEAR),
    ),
    "width_one_depthwise_residual_hwc": (
        (1, 8, 15, 1),
        8,
        (3, 1),
        8,
        True,
        {"pads": [1, 0, 1, 0]},
        ("CLIP", 0.0, 6.0),
        None,
        HWC,
        (LINEAR, HWC),
    ),
    "width_one_dilated_one_channel": (
        (1, 1, 17, 1),
        8,
        (3, 1),
        1,
        False,
        {"pads": [2, 0, 2, 0], "dilations": [2, 1]},
        ("TANH", 0, 0),
        None,
        None,
        (LINEAR, HWC),
    ),
    "width_one_3x3_padded_not_swapped": (
        (1, 8, 9, 1),
        8,
        (3, 3),
        1,
        True,
        {"pads": [1, 1, 1, 1]},
        ("", 0, 0),
        None,
        None,
        (HWC, LINEAR),
    ),
    "one_map_linear_out": (
        (1, 8, 7, 7),
        1,
        (3, 3),
        1,
        True,
        {"pads": [1, 1, 1, 1]},
        ("", 0, 0),
        None,
        None,
        (HWC, LINEAR),
    ),
}


def _case(name: str) -> tuple[ConvolutionOperator, np.ndarray, np.ndarray | None, list[TensorFormat]]:
    """The operator, its NCHW input and residual, and the formats (input, residual where there is one, output)."""
    shape, maps, kernel, group, bias, conv_params, (act, alpha, beta), post, residual_fmt, (fin, fout) = CASES[name]
    params = dict(conv_params, activation=act, activation_alpha=alpha, activation_beta=beta)
    if post is not None:
        params.update(post_scale=post[0], post_shift=post[1])
    if residual_fmt is not None:
        params["residual"] = True
    op = _operator(shape[1], maps, kernel, group, bias, seed=len(name), **params)
    x = _random(shape, 1)
    residual = None if residual_fmt is None else _random(_out_shape(op, shape), 2)
    formats = [fin, *([] if residual_fmt is None else [residual_fmt]), fout]
    return op, x, residual, formats


def _onednn(
    op: ConvolutionOperator, x: np.ndarray, residual: np.ndarray | None, formats: list[TensorFormat]
) -> np.ndarray:
    """oneDNN's kernel on buffers of ``formats``; its NCHW result."""
    x_buffer = _stored(x, formats[0])
    residual_buffer = None if residual is None else _stored(residual, formats[1])
    out = _empty(_out_shape(op, x.shape), formats[-1])
    run = onednn_conv.convolution_onednn(op, x_buffer, out, residual_buffer, formats)
    assert run is not None
    run()
    return _logical(out, formats[-1])


@pytest.mark.parametrize("name", list(CASES))
def test_results_match_the_float64_reference(name: str) -> None:
    """Every kernel shape, group kind, epilogue and format pair of the grid is the float64 convolution."""
    op, x, residual, formats = _case(name)
    _assert_close(_onednn(op, x, residual, formats), _reference(op, x, residual))


@pytest.mark.parametrize("name", list(CASES))
def test_the_reference_is_the_operators_numpy_kernel(name: str) -> None:
    """The float64 reference computes what the operator's own NumPy kernel does (so the oracle is the layer's)."""
    op, x, residual, _ = _case(name)
    inputs = [x] if residual is None else [x, residual]
    want = np.full(_out_shape(op, x.shape), np.nan, np.float32)
    op.prepare([a.shape for a in inputs], [want.shape])
    op.run(inputs, [want])
    _assert_close(want, _reference(op, x, residual))


@pytest.mark.parametrize(
    ("activation", "alpha", "beta", "expected"),
    [
        ("RELU", 0.0, 0.0, ("relu", 0.0, 0.0)),
        ("LEAKY_RELU", 0.1, 0.0, ("relu", 0.1, 0.0)),
        ("CLIP", 0.0, 6.0, ("clip", 0.0, 6.0)),
        ("HARD_SWISH", 0.0, 0.0, ("hardswish", 1.0 / 6.0, 0.5)),
        ("HARD_SIGMOID", 0.2, 0.5, ("hardsigmoid", 0.2, 0.5)),
        ("SIGMOID", 0.0, 0.0, ("logistic", 0.0, 0.0)),
        ("TANH", 0.0, 0.0, ("tanh", 0.0, 0.0)),
    ],
)
def test_post_ops_of_maps_each_fused_activation_then_the_affine(activation, alpha, beta, expected) -> None:
    """Each fused activation is one eltwise post-op with oneDNN's parameters, the scalar map a ``linear`` after it."""
    op = _operator(4, 4, (1, 1), activation=activation, activation_alpha=alpha, activation_beta=beta)
    assert onednn_conv.post_ops_of(op) == [expected]
    mapped = _operator(
        4, 4, (1, 1), activation=activation, activation_alpha=alpha, activation_beta=beta, post_scale=0.5
    )
    assert onednn_conv.post_ops_of(mapped) == [expected, ("linear", 0.5, 0.0)]
    assert onednn_conv.post_ops_of(_operator(4, 4, (1, 1), post_shift=1.0)) == [("linear", 1.0, 1.0)]
    assert onednn_conv.post_ops_of(_operator(4, 4, (1, 1))) == []


# --- hand-over and buffers reused ---------------------------------------------------------------------------------


@pytest.mark.parametrize("memory_format", ["channels_last", "contiguous"])
@pytest.mark.parametrize(
    ("height", "width", "kernel", "pads"),
    [(6, 7, (3, 3), [1, 1, 1, 1]), (9, 1, (3, 1), [1, 0, 1, 0])],
    ids=["3x3", "width_one"],
)
def test_reads_the_handed_over_tensors_and_empties_the_output_slot(memory_format, height, width, kernel, pads) -> None:
    """Hand-over tensors of the HWC input and residual are read, not the buffers; the output's slot is emptied."""
    torch = pytest.importorskip("torch")
    layout = torch.channels_last if memory_format == "channels_last" else torch.contiguous_format
    op = _operator(8, 16, kernel, pads=pads, activation="RELU", residual=True)
    x_shape, out_shape = (1, 8, height, width), (1, 16, height, width)
    x, residual = _random(x_shape, 3), _random(out_shape, 4)
    x_buffer, residual_buffer = (
        np.zeros((1, height, width, 8), np.float32),
        np.zeros((1, height, width, 16), np.float32),
    )
    out = _empty(out_shape, HWC)
    run = onednn_conv.convolution_onednn(op, x_buffer, out, residual_buffer, [HWC, HWC, HWC])
    assert run is not None
    slots = hand_over(x_buffer), hand_over(residual_buffer), hand_over(out)
    try:
        slots[0].tensor = torch.from_numpy(x.copy()).contiguous(memory_format=layout)  # not in the buffer
        slots[1].tensor = torch.from_numpy(residual.copy()).contiguous(memory_format=layout)
        slots[2].tensor = torch.zeros(out_shape)  # stale: the kernel writes the buffer
        run()
        assert slots[2].tensor is None
        _assert_close(_logical(out, HWC), _reference(op, x, residual))
        # the slots emptied: the buffers are read again
        slots[0].tensor = slots[1].tensor = None
        x2, residual2 = _random(x_shape, 5), _random(out_shape, 6)
        np.copyto(x_buffer, _stored(x2, HWC))
        np.copyto(residual_buffer, _stored(residual2, HWC))
        out.fill(np.nan)
        run()
        _assert_close(_logical(out, HWC), _reference(op, x2, residual2))
    finally:
        for slot in slots:
            slot.tensor = None


@pytest.mark.parametrize(
    ("formats", "channels", "maps"),
    [
        ([HWC, HWC, HWC], 6, 12),
        ([LINEAR, HWC, LINEAR], 6, 12),
        ([LINEAR, HWC, HWC], 6, 12),
        ([HWC, HWC, LINEAR], 6, 12),
        ([LINEAR, HWC, LINEAR], 1, 1),
    ],
    ids=["hwc", "linear_in_out", "linear_in", "linear_out", "one_channel"],
)
def test_buffers_reused_across_runs_give_new_results(formats: list[TensorFormat], channels: int, maps: int) -> None:
    """New values written into the same input and residual buffers give the new results at the next run."""
    op = _operator(channels, maps, (3, 3), pads=[1, 1, 1, 1], strides=[2, 1], activation="HARD_SWISH", residual=True)
    shape = (2, channels, 7, 9)
    out_shape = _out_shape(op, shape)
    x_buffer, residual_buffer = _stored(_random(shape, 7), formats[0]), _stored(_random(out_shape, 8), formats[1])
    out = _empty(out_shape, formats[-1])
    run = onednn_conv.convolution_onednn(op, x_buffer, out, residual_buffer, formats)
    assert run is not None
    for seed in (9, 11):
        x, residual = _random(shape, seed), _random(out_shape, seed + 1)
        np.copyto(x_buffer, _stored(x, formats[0]))
        np.copyto(residual_buffer, _stored(residual, formats[1]))
        out.fill(np.nan)
        run()
        _assert_close(_logical(out, formats[-1]), _reference(op, x, residual))


# --- one-channel buffers and LINEAR residuals ---------------------------------------------------------------------


def test_a_one_channel_hwc_view_is_taken_as_a_dense_buffer_is() -> None:
    """A one-channel HWC view with channel stride H*W (NumPy: C-contiguous) runs oneDNN exactly, then a dense one."""
    # np.ascontiguousarray of the transposed NCHW array returns the view; oneDNN's primitive cache takes the two
    # descriptors for one, so the dense buffer after it must not inherit a worse choice
    op = _operator(1, 8, (3, 3), pads=[1, 1, 1, 1], activation="RELU")
    x = _random((1, 1, 12, 15), 18)  # a shape no other test binds (oneDNN's cache is process-wide)
    view = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    assert view.flags.c_contiguous and view.strides[3] != view.itemsize
    want = _reference(op, x)
    for buffer in (view, _stored(x, HWC)):
        out = _empty(_out_shape(op, x.shape), HWC)
        run = onednn_conv.convolution_onednn(op, buffer, out, None, [HWC, HWC])
        assert run is not None
        run()
        _assert_close(_logical(out, HWC), want)


@pytest.mark.parametrize(
    ("x_shape", "formats"),
    [((1, 8, 13, 11), [HWC, LINEAR, HWC]), ((3, 1, 11, 7), [LINEAR, LINEAR, LINEAR])],
    ids=["hwc_io", "one_channel_all_linear_batch3"],
)
def test_a_linear_residual_of_one_map_is_taken(x_shape: tuple[int, ...], formats: list[TensorFormat]) -> None:
    """A LINEAR residual of one map (the same bytes as channels-last) runs oneDNN, exactly."""
    op = _operator(x_shape[1], 1, (3, 3), pads=[1, 1, 1, 1], residual=True)  # shapes no other test binds
    x, residual = _random(x_shape, 16), _random(_out_shape(op, x_shape), 17)
    out = _empty(_out_shape(op, x_shape), formats[-1])
    run = onednn_conv.convolution_onednn(op, _stored(x, formats[0]), out, _stored(residual, formats[1]), formats)
    assert run is not None, "declined"
    run()
    _assert_close(_logical(out, formats[-1]), _reference(op, x, residual))


def test_an_hwc_residual_layer_is_taken_after_a_linear_one_map_residual_of_the_same_shapes() -> None:
    """Whether a layer with an HWC residual runs oneDNN does not depend on a layer bound before it."""
    op = _operator(8, 1, (3, 3), pads=[1, 1, 1, 1], residual=True)
    x_shape = (1, 8, 10, 13)  # shapes no other test binds (oneDNN's cache is process-wide)
    x, residual = _random(x_shape, 21), _random((1, 1, 10, 13), 22)
    out = _empty((1, 1, 10, 13), HWC)
    x_buffer = _stored(x, HWC)
    onednn_conv.convolution_onednn(op, x_buffer, out, _stored(residual, LINEAR), [HWC, LINEAR, HWC])
    run = onednn_conv.convolution_onednn(op, x_buffer, out, _stored(residual, HWC), [HWC, HWC, HWC])
    assert run is not None, "declined"
    run()
    _assert_close(_logical(out, HWC), _reference(op, x, residual))


@pytest.mark.parametrize("formats", [[HWC, LINEAR, HWC], [LINEAR, LINEAR, LINEAR]], ids=["hwc_io", "linear_io"])
def test_a_linear_residual_of_several_channels_is_taken(formats: list[TensorFormat]) -> None:
    """A LINEAR residual of several maps (as the all-LINEAR layers of conv.py's linear path pass it) runs oneDNN."""
    op = _operator(8, 16, (3, 3), pads=[1, 1, 1, 1], activation="RELU", residual=True)
    x, residual = _random((1, 8, 8, 9), 19), _random((1, 16, 8, 9), 20)
    out = _empty((1, 16, 8, 9), formats[-1])
    run = onednn_conv.convolution_onednn(op, _stored(x, formats[0]), out, _stored(residual, formats[1]), formats)
    assert run is not None, "declined"
    run()
    _assert_close(_logical(out, formats[-1]), _reference(op, x, residual))


# --- declines -----------------------------------------------------------------------------------------------------


def _small() -> tuple[ConvolutionOperator, np.ndarray, np.ndarray]:
    op = _operator(8, 8, (3, 3), pads=[1, 1, 1, 1])
    return op, np.zeros((1, 5, 5, 8), np.float32), np.zeros((1, 5, 5, 8), np.float32)


@pytest.mark.parametrize("probe", ["equal", "unequal"])
@pytest.mark.parametrize(("group", "fmt"), [(1, HWC), (2, LINEAR)])
def test_a_uniform_kernel_runs_with_its_maps_bit_identical(
    monkeypatch: pytest.MonkeyPatch, group: int, fmt: TensorFormat, probe: str
) -> None:
    """A uniform kernel: where the primitive's probe gives equal maps it runs with its bias and activation inside
    (no pass after it); where not, the convolution alone, then every map of a group made bit-identical and the
    epilogue after it. Either way the maps are bit-identical and the results the reference's."""
    pytest.importorskip("torch")  # (the maps are made equal with PyTorch's kernels; declined without it)
    made_equal: list[object] = []
    real = onednn_conv._uniform_maps
    monkeypatch.setattr(onednn_conv, "_uniform_maps", lambda *a: made_equal.append(a) or real(*a))
    if probe == "unequal":
        monkeypatch.setattr(onednn_conv, "_equal_maps", lambda *a: False)
    kernel = pack_conv_kernel(np.full((8, 8 // group, 3, 3), 0.25, np.float32), group)
    params = {"num_output_maps": 8, "kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "group": group}
    params |= {"uniform_kernel": True, "activation": "CLIP", "activation_alpha": 0.0, "activation_beta": 1.5}
    op = ConvolutionOperator(params, {"kernel": kernel})
    x = _random((2, 8, 7, 9), 31)
    out = _empty((2, 8, 7, 9), fmt)
    run = onednn_conv.convolution_onednn(op, _stored(x, fmt), out, None, [fmt, fmt])
    assert run is not None
    run()
    got = _logical(out, fmt)
    _assert_close(got, _reference(op, x))
    maps = got.reshape(2, group, 8 // group, 7, 9)
    assert np.array_equal(maps, np.broadcast_to(maps[:, :, :1], maps.shape))
    assert bool(made_equal) == (probe == "unequal")


def test_the_uniform_probe_sees_unequal_maps_and_leaves_the_buffers() -> None:
    """The probe runs the primitive on its own arrays (the layer's buffers untouched, its memories pointed back) and
    says whether a group's maps came out bit-identical: a kernel whose maps differ is seen as such."""
    op = _operator(8, 8, (3, 3), pads=[1, 1, 1, 1])  # random weights: maps differ
    x = _random((1, 8, 6, 7), 41)
    buffer, out = _stored(x, HWC), _empty((1, 8, 6, 7), HWC)
    seen: list[bool] = []
    real = onednn_conv._equal_maps

    def probing(*args: object) -> bool:
        seen.append(real(*args))  # type: ignore[arg-type]
        return seen[-1]

    uniform = ConvolutionOperator({**op.params, "uniform_kernel": True}, dict(op.weights))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(onednn_conv, "_equal_maps", probing)
        run = onednn_conv.convolution_onednn(uniform, buffer, out, None, [HWC, HWC])
    assert seen and not any(seen)  # the probe saw the maps differ
    assert np.isnan(out).all()  # the layer's output buffer was not written by the probe
    np.testing.assert_array_equal(buffer, _stored(x, HWC))
    assert run is not None


def test_a_uniform_kernel_with_a_residual_runs_where_its_maps_are_equal(monkeypatch: pytest.MonkeyPatch) -> None:
    """A uniform kernel with a residual runs with the residual added inside where the probe (residual zeroed) gives
    equal maps, and is left to the other kernels where it does not (the maps cannot be made equal after the add)."""
    kernel = pack_conv_kernel(np.full((8, 8, 3, 3), 0.25, np.float32), 1)
    params = {"num_output_maps": 8, "kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "uniform_kernel": True}
    uniform = ConvolutionOperator({**params, "residual": True}, {"kernel": kernel})
    x, residual = _random((1, 8, 5, 5), 43), _random((1, 8, 5, 5), 44)
    out = _empty((1, 8, 5, 5), HWC)
    run = onednn_conv.convolution_onednn(uniform, _stored(x, HWC), out, _stored(residual, HWC), [HWC, HWC, HWC])
    assert run is not None
    run()
    _assert_close(_logical(out, HWC), _reference(uniform, x, residual))
    monkeypatch.setattr(onednn_conv, "_equal_maps", lambda *a: False)
    fresh = ConvolutionOperator({**params, "residual": True}, {"kernel": kernel})  # (the verdict is kept per layer)
    assert onednn_conv.convolution_onednn(fresh, _stored(x, HWC), out, _stored(residual, HWC), [HWC, HWC, HWC]) is None


def test_the_uniform_probe_runs_once_per_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    """Binding the same uniform layer again at the same shapes (a context whose outputs move does, at every call)
    reuses the probe's verdict; new shapes probe again."""
    calls: list[object] = []
    real = onednn_conv._equal_maps
    monkeypatch.setattr(onednn_conv, "_equal_maps", lambda *a: calls.append(a) or real(*a))
    kernel = pack_conv_kernel(np.full((8, 8, 3, 3), 0.25, np.float32), 1)
    params = {"num_output_maps": 8, "kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "uniform_kernel": True}
    op = ConvolutionOperator(params, {"kernel": kernel})
    for shape in [(1, 8, 6, 6), (1, 8, 6, 6), (2, 8, 6, 6)]:
        x = _random(shape, 45)
        out = _empty(shape, HWC)
        run = onednn_conv.convolution_onednn(op, _stored(x, HWC), out, None, [HWC, HWC])
        assert run is not None
        run()
        _assert_close(_logical(out, HWC), _reference(op, x))
    assert len(calls) == 2


def test_declines_3d_convolutions() -> None:
    """3-D convolutions do not run here."""
    op = _operator(8, 8, (3, 3, 3))
    x, out = np.zeros((1, 8, 5, 5, 5), np.float32), np.zeros((1, 8, 3, 3, 3), np.float32)
    assert onednn_conv.convolution_onednn(op, x, out, None, [LINEAR, LINEAR]) is None


@pytest.mark.parametrize(
    ("channels", "maps", "kernel", "group", "stride", "pad", "dilation", "length"),
    [(8, 16, 3, 1, 1, 1, 1, 40), (1, 16, 10, 1, 5, 0, 1, 160), (16, 16, 8, 4, 1, 4, 1, 21), (8, 8, 5, 1, 2, 4, 2, 33)],
)
def test_1d_convolutions_run_as_one_row(
    channels: int, maps: int, kernel: int, group: int, stride: int, pad: int, dilation: int, length: int
) -> None:
    """A 1-D convolution over LINEAR ``[N, C, L]`` is the 2-D one over ``[N, C, 1, L]`` (Whisper's and wav2vec2's
    layers, the latter's grouped positional one); channels-last formats are 2-D only."""
    flat = _operator(channels, maps, (kernel,), group, seed=3, pads=[pad, pad], strides=[stride], dilations=[dilation])
    rows = _operator(
        channels, maps, (1, kernel), group, seed=3, pads=[0, pad, 0, pad], strides=[1, stride], dilations=[1, dilation]
    )
    x = _random((2, channels, length), 1)
    want = _reference(rows, x[:, :, None, :])[:, :, 0, :]
    out = np.full(want.shape, np.nan, np.float32)
    run = onednn_conv.convolution_onednn(flat, x, out, None, [LINEAR, LINEAR])
    assert run is not None
    run()
    _assert_close(out, want)
    assert onednn_conv.convolution_onednn(flat, x, out, None, [HWC, HWC]) is None


def test_declines_an_activation_without_a_post_op() -> None:
    """An activation oneDNN has no post-op for leaves the layer to the other kernels."""
    op, x, out = _small()
    op.activation = "SELU"  # (the builder fuses none such today: set past the constructor's check)
    assert onednn_conv.post_ops_of(op) is None
    assert onednn_conv.convolution_onednn(op, x, out, None, [HWC, HWC]) is None


@pytest.mark.parametrize("switch", ["0", "off", "false", "no"])
def test_declines_when_switched_off(switch: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``PLUGRT_ONEDNN`` off is read at each call: no library, no kernel; back on, the kernel again."""
    op, x, out = _small()
    monkeypatch.setenv(onednn.ENV_SWITCH, switch)
    assert onednn.library() is None
    assert not onednn.available()
    assert onednn_conv.convolution_onednn(op, x, out, None, [HWC, HWC]) is None
    monkeypatch.delenv(onednn.ENV_SWITCH)
    assert onednn_conv.convolution_onednn(op, x, out, None, [HWC, HWC]) is not None


def test_declines_without_the_library(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the library did not load the layer runs its other kernels."""
    op, x, out = _small()
    monkeypatch.setattr(onednn, "_STATE", {"library": None, "tried": True})
    assert not onednn.available()
    assert onednn_conv.convolution_onednn(op, x, out, None, [HWC, HWC]) is None


def test_declines_other_types_strided_buffers_and_weights_as_inputs() -> None:
    """float64 or non-contiguous buffers, a kernel or bias given as an input are not for oneDNN here."""
    op, x, out = _small()
    assert onednn_conv.convolution_onednn(op, x.astype(np.float64), out, None, [HWC, HWC]) is None
    assert onednn_conv.convolution_onednn(op, x, out.astype(np.float64), None, [HWC, HWC]) is None
    with_residual = _operator(8, 8, (3, 3), pads=[1, 1, 1, 1], residual=True)
    residual = np.zeros((1, 5, 5, 8), np.float64)
    assert onednn_conv.convolution_onednn(with_residual, x, out, residual, [HWC, HWC, HWC]) is None
    strided = np.zeros((1, 5, 10, 8), np.float32)[:, :, ::2]  # [N, H, W, C] with every other column
    assert onednn_conv.convolution_onednn(op, strided, out, None, [HWC, HWC]) is None
    assert (
        onednn_conv.convolution_onednn(op, x, np.zeros((1, 5, 5, 16), np.float32)[..., ::2], None, [HWC, HWC]) is None
    )
    kernel_input = ConvolutionOperator({"num_output_maps": 8, "kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, {})
    assert onednn_conv.convolution_onednn(kernel_input, x, out, None, [HWC, HWC]) is None
    bias_input = ConvolutionOperator(
        {"num_output_maps": 8, "kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "has_bias": True},
        {"kernel": op.weights["kernel"]},
    )
    assert onednn_conv.convolution_onednn(bias_input, x, out, None, [HWC, HWC]) is None


# --- the binding misused ------------------------------------------------------------------------------------------


def _libc_path() -> str | None:
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1]
                if os.path.basename(path).startswith("libc.so") and os.path.exists(path):
                    return path
    except OSError:
        pass
    return None


@pytest.mark.parametrize("kind", ["missing", "libc", "text", "python_extension"])
def test_a_library_variable_naming_no_onednn_leaves_it_unavailable(kind, tmp_path, monkeypatch) -> None:
    """``PLUGRT_ONEDNN_LIBRARY`` naming a missing file, another library or a text file: unavailable, no error."""
    if kind == "missing":
        path = str(tmp_path / "libdnnl.so.3")
    elif kind == "libc":
        path = _libc_path()
        if path is None:
            pytest.skip("no libc.so path in /proc/self/maps")
    elif kind == "text":
        path = str(tmp_path / "libdnnl.so.3")
        with open(path, "w") as f:
            f.write("not a shared library\n")
    else:
        import _ctypes  # a compiled extension of CPython's: a shared library, not oneDNN

        path = _ctypes.__file__
    monkeypatch.setattr(onednn, "_STATE", {"library": None, "tried": False})  # loaded again (restored after)
    monkeypatch.setenv(onednn.LIBRARY_VARIABLE, path)
    assert not onednn.available()
    assert onednn._STATE == {"library": None, "tried": True}
    op, x, out = _small()
    assert onednn_conv.convolution_onednn(op, x, out, None, [HWC, HWC]) is None


def test_the_library_variable_naming_the_wheels_file_loads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """``PLUGRT_ONEDNN_LIBRARY`` naming the real library loads it (the loader's positive case)."""
    path = onednn.library().dll._name
    monkeypatch.setattr(onednn, "_STATE", {"library": None, "tried": False})
    monkeypatch.setenv(onednn.LIBRARY_VARIABLE, path)
    assert onednn.available()
    assert onednn.library().dll._name == path


def test_check_names_the_call_and_the_status() -> None:
    """A failed status raises OneDnnError naming the call and oneDNN's status; success passes."""
    onednn.check(0, "primitive descriptor")
    with pytest.raises(onednn.OneDnnError, match=r"^oneDNN primitive descriptor failed: invalid arguments$"):
        onednn.check(2, "primitive descriptor")
    with pytest.raises(onednn.OneDnnError, match="oneDNN execute failed: unimplemented"):
        onednn.check(3, "execute")
    with pytest.raises(onednn.OneDnnError, match="oneDNN query failed: status 7"):
        onednn.check(7, "query")
    assert issubclass(onednn.OneDnnError, RuntimeError)


@pytest.mark.parametrize(("shape", "strides"), [([-1, 4], [4, 1]), ([-1, 4], None), ([2, 3], [1, -5])])
def test_an_impossible_descriptor_raises_naming_the_memory_descriptor(shape, strides) -> None:
    """Negative dims (or strides) are oneDNN's invalid arguments, raised as OneDnnError naming the descriptor."""
    lib = onednn.library()
    assert lib is not None
    with pytest.raises(onednn.OneDnnError, match=r"memory descriptor \[" + f"{shape[0]}, {shape[1]}" + r"\].*invalid"):
        onednn.Desc(lib, shape, strides)


# --- threads ------------------------------------------------------------------------------------------------------


def _recording(monkeypatch: pytest.MonkeyPatch) -> tuple[list[onednn.Primitive], list[int]]:
    """Primitives made with post-ops (the convolutions, not the reorders) and the thread counts of runs."""
    made: list[onednn.Primitive] = []
    ran: list[int] = []

    class Recording(onednn.Primitive):
        def __init__(self, lib, make, post_ops, threads) -> None:
            super().__init__(lib, make, post_ops, threads)
            if post_ops is not None:
                made.append(self)

        def run(self) -> None:
            if self in made:
                ran.append(self.threads)
            super().run()

    monkeypatch.setattr(onednn, "Primitive", Recording)
    return made, ran


def test_a_large_layer_has_primitives_for_one_and_the_engines_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """From MIN_OPENMP_FLOPS a primitive per thread count; a run takes the one threads_for picks, each exact."""
    made, ran = _recording(monkeypatch)
    monkeypatch.setattr(onednn_buffers, "engine_threads", lambda: 2)
    op = _operator(32, 32, (3, 3), pads=[1, 1, 1, 1], activation="RELU")
    x = _random((1, 32, 20, 20), 12)
    x_buffer, out = _stored(x, HWC), _empty((1, 32, 20, 20), HWC)
    run = onednn_conv.convolution_onednn(op, x_buffer, out, None, [HWC, HWC])
    assert run is not None
    assert sorted(p.threads for p in made) == [1, 2]
    want = _reference(op, x)
    asked: list[float] = []
    for threads in (1, 2, 1):
        monkeypatch.setattr(onednn_buffers, "threads_for", lambda flops, least, n=threads: asked.append(flops) or n)
        ran.clear()
        out.fill(np.nan)
        run()
        assert ran == [threads]
        _assert_close(_logical(out, HWC), want)
    assert asked == [2.0 * 32 * 20 * 20 * 32 * 9] * 3 and asked[0] >= MIN_OPENMP_FLOPS  # the layer's work


def test_a_small_layer_has_one_single_thread_primitive(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below MIN_OPENMP_FLOPS one primitive on one thread, whatever threads_for says at the run."""
    made, ran = _recording(monkeypatch)
    monkeypatch.setattr(onednn_buffers, "engine_threads", lambda: 2)
    monkeypatch.setattr(onednn_buffers, "threads_for", lambda flops, least: 2)
    op, _, _ = _small()
    x = _random((1, 8, 5, 5), 13)
    out = _empty((1, 8, 5, 5), HWC)
    run = onednn_conv.convolution_onednn(op, _stored(x, HWC), out, None, [HWC, HWC])
    assert run is not None
    assert [p.threads for p in made] == [1]
    run()
    assert ran == [1]
    _assert_close(_logical(out, HWC), _reference(op, x))


# --- an engine ----------------------------------------------------------------------------------------------------


def _model() -> object:
    """Conv 3x3 + Relu -> depthwise 3x3 + Clip(0, 6) -> 1x1 Conv + Add (the first layer's result)."""
    rng = np.random.default_rng(14)
    inits, nodes = [], []

    def conv_node(x: str, y: str, c: int, m: int, k: int, group: int = 1, **attrs: object) -> None:
        w = (rng.standard_normal((m, c // group, k, k)) * 0.3).astype(np.float32)
        inits.append(numpy_helper.from_array(w, y + "w"))
        inits.append(numpy_helper.from_array(rng.standard_normal(m).astype(np.float32), y + "b"))
        nodes.append(helper.make_node("Conv", [x, y + "w", y + "b"], [y], kernel_shape=[k, k], group=group, **attrs))

    conv_node("x", "c1", 8, 16, 3, pads=[1, 1, 1, 1])
    nodes.append(helper.make_node("Relu", ["c1"], ["r1"]))
    conv_node("r1", "c2", 16, 16, 3, group=16, pads=[1, 1, 1, 1])
    inits.append(numpy_helper.from_array(np.array(0.0, np.float32), "lo"))
    inits.append(numpy_helper.from_array(np.array(6.0, np.float32), "hi"))
    nodes.append(helper.make_node("Clip", ["c2", "lo", "hi"], ["r2"]))
    conv_node("r2", "c3", 16, 16, 1)
    nodes.append(helper.make_node("Add", ["c3", "r1"], ["y"]))
    graph = helper.make_graph(
        nodes,
        "onednn_chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 10, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 10, 12])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _convolution_kernels(context: object) -> list[object]:
    """The kernels the convolutions of ``context`` run."""
    nodes = [step.node for step in context._executor.steps]  # type: ignore[attr-defined]
    return [node._torch_call for node in nodes if isinstance(node, ConvolutionOperator)]


def test_engine_runs_onednn_in_a_channels_last_run_and_loads_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under PLUGRT_TORCH=nhwc all convolutions run oneDNN, match onnxruntime, and load and match without it."""
    pytest.importorskip("torch")
    ort = pytest.importorskip("onnxruntime")
    model = _model()
    x = _random((1, 8, 10, 12), 15)
    monkeypatch.setenv("PLUGRT_TORCH", "nhwc")
    engine = plugrt.compile(model, device="cpu")
    got = engine(x=x)["y"]
    kernels = _convolution_kernels(engine.context)
    assert len(kernels) == 3
    assert all(k is not None and k.__module__ == onednn_buffers.__name__ for k in kernels)
    expected = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    tolerance = 1e-5 * np.abs(expected).max()
    np.testing.assert_allclose(got, expected, rtol=0, atol=tolerance)
    blob = engine.serialize()
    monkeypatch.setenv(onednn.ENV_SWITCH, "0")
    monkeypatch.setattr(onednn, "_STATE", {"library": None, "tried": False})
    runtime = plugrt.Runtime(plugrt.Logger(plugrt.Logger.ERROR))
    context = runtime.deserialize_cuda_engine(blob).create_execution_context()
    out = np.full_like(got, np.nan)
    context.set_tensor_address("x", x.ctypes.data)
    context.set_tensor_address("y", out.ctypes.data)
    assert context.execute_async_v3(0)
    assert not any(k is not None and k.__module__ == onednn_buffers.__name__ for k in _convolution_kernels(context))
    np.testing.assert_allclose(out, expected, rtol=0, atol=tolerance)
