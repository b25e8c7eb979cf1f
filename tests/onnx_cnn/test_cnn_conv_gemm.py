"""Conv, ConvTranspose and Gemm imported from ONNX, against the reference evaluator and onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from cnn_harness import check, node_model, onnxruntime, plugrt_run, random

from plugrt.onnx.importers.base import OnnxImportError

CONVS = {
    "2d_basic": ((1, 3, 7, 8), (4, 3, 3, 3), {}),
    "2d_pads_strides_dilations": (
        (2, 4, 9, 10),
        (6, 4, 3, 2),
        {"pads": [1, 0, 2, 1], "strides": [2, 1], "dilations": [1, 2]},
    ),
    "2d_groups": ((1, 6, 8, 8), (9, 2, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),
    "2d_depthwise": ((2, 5, 9, 7), (5, 1, 3, 3), {"group": 5, "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    "2d_depthwise_multiplier": ((1, 4, 6, 6), (8, 1, 3, 3), {"group": 4}),
    "2d_pointwise": ((2, 8, 5, 5), (3, 8, 1, 1), {}),
    "2d_pointwise_strided": ((1, 8, 7, 7), (3, 8, 1, 1), {"strides": [2, 2]}),
    "2d_same_upper": ((1, 2, 7, 6), (3, 2, 3, 4), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    "2d_same_lower": ((1, 2, 7, 6), (3, 2, 4, 3), {"auto_pad": "SAME_LOWER", "strides": [2, 3]}),
    "2d_valid": ((1, 2, 7, 6), (3, 2, 3, 2), {"auto_pad": "VALID", "strides": [2, 1]}),
    "1d": ((2, 3, 11), (4, 3, 4), {"strides": [3], "pads": [2, 1]}),
    "3d": ((1, 2, 5, 6, 4), (3, 2, 2, 3, 2), {"pads": [1, 0, 1, 0, 1, 1], "dilations": [2, 1, 1]}),
}


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("name", sorted(CONVS))
def test_conv_matches_reference(name: str, bias: bool) -> None:
    x_shape, w_shape, attrs = CONVS[name]
    inputs = {"x": random(x_shape), "w": random(w_shape), "b": random(w_shape[:1]) if bias else None}
    model, feeds = node_model("Conv", inputs, initializers=("w", "b"), **attrs)
    check(model, feeds)


@pytest.mark.parametrize("name", ["2d_groups", "1d", "3d", "2d_same_lower"])
def test_conv_with_run_time_kernel_and_bias(name: str) -> None:
    x_shape, w_shape, attrs = CONVS[name]
    model, feeds = node_model("Conv", {"x": random(x_shape), "w": random(w_shape), "b": random(w_shape[:1])}, **attrs)
    check(model, feeds)


@pytest.mark.parametrize("name", ["2d_pads_strides_dilations", "2d_depthwise", "2d_pointwise", "3d"])
def test_conv_float16(name: str) -> None:
    x_shape, w_shape, attrs = CONVS[name]
    inputs = {"x": random(x_shape, np.float16), "w": random(w_shape, np.float16), "b": random(w_shape[:1], np.float16)}
    model, feeds = node_model("Conv", inputs, initializers=("w", "b"), **attrs)
    check(model, feeds, oracle=onnxruntime, rtol=2e-2, atol=2e-2)


def test_conv_dynamic_batch_and_spatial_dims() -> None:
    w = random((4, 3, 3, 3))
    x = random((2, 3, 9, 8))
    model, _ = node_model(
        "Conv",
        {"x": x, "w": w},
        initializers=("w",),
        dynamic={"x": ["n", 3, "h", "w"]},
        pads=[1, 1, 0, 0],
        strides=[2, 2],
    )
    from plugrt.onnx.compile import compile as compile_model

    compiled = compile_model(model, shapes={"x": ((1, 3, 4, 4), (2, 3, 9, 8), (3, 3, 12, 12))})
    for shape in [(2, 3, 9, 8), (1, 3, 4, 5), (3, 3, 12, 11)]:
        feeds = {"x": random(shape)}
        expected = onnxruntime(model, feeds)[0]
        got = compiled(feeds)["y"]
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


CONV_TRANSPOSES = {
    "basic": ((1, 2, 4, 5), (2, 3, 3, 3), {}),
    "strides_pads_output_padding": (
        (2, 4, 4, 5),
        (4, 3, 3, 2),
        {"strides": [2, 3], "pads": [1, 0, 0, 1], "dilations": [1, 2], "output_padding": [1, 1]},
    ),
    "groups": ((1, 4, 3, 3), (4, 2, 3, 3), {"group": 2, "strides": [2, 2]}),
    "output_shape": ((1, 2, 5, 5), (2, 3, 3, 3), {"strides": [2, 2], "output_shape": [10, 8]}),
    "same_upper": ((1, 2, 5, 5), (2, 3, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    "same_lower": ((1, 2, 5, 5), (2, 3, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    "1d": ((1, 2, 7), (2, 1, 4), {"strides": [3], "pads": [2, 1]}),
    "3d": ((1, 2, 3, 4, 2), (2, 2, 2, 3, 2), {"strides": [2, 1, 2]}),
}


@pytest.mark.parametrize("name", sorted(CONV_TRANSPOSES))
def test_conv_transpose_matches_onnxruntime(name: str) -> None:
    x_shape, w_shape, attrs = CONV_TRANSPOSES[name]
    maps = w_shape[1] * attrs.get("group", 1)
    inputs = {"x": random(x_shape), "w": random(w_shape), "b": random((maps,))}
    model, feeds = node_model("ConvTranspose", inputs, initializers=("w", "b"), **attrs)
    check(model, feeds, oracle=onnxruntime)


def test_conv_transpose_run_time_kernel_and_float16() -> None:
    x_shape, w_shape, attrs = CONV_TRANSPOSES["strides_pads_output_padding"]
    model, feeds = node_model("ConvTranspose", {"x": random(x_shape), "w": random(w_shape)}, **attrs)
    check(model, feeds, oracle=onnxruntime)
    half = {"x": random(x_shape, np.float16), "w": random(w_shape, np.float16)}
    model, feeds = node_model("ConvTranspose", half, initializers=("w",), **attrs)
    check(model, feeds, oracle=onnxruntime, rtol=2e-2, atol=2e-2)


GEMMS = [
    (0, 0, 1.0, 1.0, (4,)),
    (1, 0, 0.5, 2.0, (3, 4)),
    (0, 1, 1.0, 1.0, (1,)),
    (1, 1, 2.0, 0.25, (3, 1)),
    (0, 0, 1.0, 1.0, None),
    (0, 0, 1.5, 0.0, (3, 4)),
    (0, 0, 1.0, 1.0, ()),
]


@pytest.mark.parametrize("constant", [True, False])
@pytest.mark.parametrize("trans_a, trans_b, alpha, beta, c_shape", GEMMS)
def test_gemm_matches_reference(trans_a: int, trans_b: int, alpha: float, beta: float, c_shape, constant: bool) -> None:
    a = random((5, 3) if trans_a else (3, 5))
    b = random((4, 5) if trans_b else (5, 4))
    c = None if c_shape is None else random(c_shape)
    inits = ("b", "c") if constant else ()
    model, feeds = node_model(
        "Gemm", {"a": a, "b": b, "c": c}, initializers=inits, transA=trans_a, transB=trans_b, alpha=alpha, beta=beta
    )
    check(model, feeds)


def test_gemm_float16() -> None:
    inputs = {"a": random((3, 6), np.float16), "b": random((4, 6), np.float16), "c": random((4,), np.float16)}
    model, feeds = node_model("Gemm", inputs, initializers=("b",), transB=1, alpha=0.5)
    check(model, feeds, rtol=1e-2, atol=1e-2)


# --- misuse ---------------------------------------------------------------------------------
def test_conv_channel_mismatch_is_reported() -> None:
    model, feeds = node_model("Conv", {"x": random((1, 4, 5, 5)), "w": random((2, 3, 3, 3))}, initializers=("w",))
    with pytest.raises(OnnxImportError, match=r"input has 4 channels, the kernel expects 3"):
        plugrt_run(model, feeds)


def test_conv_kernel_shape_must_match_the_kernel() -> None:
    model, feeds = node_model(
        "Conv", {"x": random((1, 3, 5, 5)), "w": random((2, 3, 3, 3))}, initializers=("w",), kernel_shape=[2, 2]
    )
    with pytest.raises(OnnxImportError, match=r"kernel_shape \[2, 2\] does not match W's spatial dims \[3, 3\]"):
        plugrt_run(model, feeds)


def test_conv_unknown_auto_pad_lists_the_valid_ones() -> None:
    model, feeds = node_model(
        "Conv", {"x": random((1, 3, 5, 5)), "w": random((2, 3, 3, 3))}, initializers=("w",), auto_pad="SAME"
    )
    with pytest.raises(OnnxImportError, match=r"unknown auto_pad 'SAME'; valid: NOTSET, SAME_UPPER, SAME_LOWER, VALID"):
        plugrt_run(model, feeds)


def test_gemm_needs_matrices() -> None:
    model, feeds = node_model("Gemm", {"a": random((2, 3, 4)), "b": random((4, 5))}, initializers=("b",))
    with pytest.raises(OnnxImportError, match=r"A must be a matrix \(rank 2\), got rank 3"):
        plugrt_run(model, feeds)


def test_conv_group_must_divide_the_maps() -> None:
    model, feeds = node_model(
        "Conv", {"x": random((1, 4, 5, 5)), "w": random((3, 2, 3, 3))}, initializers=("w",), group=2
    )
    with pytest.raises(OnnxImportError, match=r"group 2 does not divide the kernel's 3 output maps"):
        plugrt_run(model, feeds)
