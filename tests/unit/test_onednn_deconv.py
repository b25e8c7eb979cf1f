"""Transposed convolutions as oneDNN's deconvolution primitive called directly (``ops/onednn_deconv.py``): the
NumPy kernel's and onnxruntime's results for strides, padding, output padding, groups and dilations, and what it
declines. Skips without the library."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt
from onednn_support import ONEDNN_TESTS
from plugrt.core.types import TensorFormat
from plugrt.ops.deconv import DeconvolutionOperator
from plugrt.ops.onednn_deconv import deconvolution_onednn

pytestmark = ONEDNN_TESTS

RNG = np.random.default_rng(41)



def _model(channels: int, maps: int, kernel: int, **attrs: object) -> object:
    group = int(attrs.get("group", 1))  # type: ignore[call-overload]
    w = (RNG.standard_normal((channels, maps // group, kernel, kernel)) * 0.3).astype(np.float32)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], kernel_shape=[kernel, kernel], **attrs)
    graph = helper.make_graph(
        [node],
        "deconv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", channels, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(RNG.standard_normal(maps).astype(np.float32), "b")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize(
    "channels, maps, kernel, attrs",
    [
        (24, 24, 2, {"strides": [2, 2]}),  # PP-OCR det's upsampling
        (8, 12, 3, {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}),
        (8, 8, 4, {"strides": [2, 2], "pads": [1, 0, 1, 2], "group": 2}),
        (6, 4, 3, {"dilations": [2, 2], "pads": [1, 1, 1, 1]}),
    ],
)
def test_transposed_convolutions_match_numpy_and_onnxruntime(
    monkeypatch: pytest.MonkeyPatch, channels: int, maps: int, kernel: int, attrs: dict
) -> None:  # type: ignore[type-arg]
    ort = pytest.importorskip("onnxruntime")
    model = _model(channels, maps, kernel, **attrs)
    x = RNG.standard_normal((2, channels, 9, 11)).astype(np.float32)
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    numpy_result = plugrt.compile(model)(x=x)["y"]
    monkeypatch.setenv("PLUGRT_TORCH", "always")
    compiled = plugrt.compile(model)
    got = compiled(x=x)["y"]
    assert {getattr(fn, "__module__", "") for _, fn, _ in compiled.context._executor._calls} == {
        "plugrt.ops.onednn_buffers"
    }
    scale = float(np.abs(numpy_result).max())
    np.testing.assert_allclose(got, numpy_result, rtol=0, atol=2e-6 * scale)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]  # type: ignore[attr-defined]
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6 * scale)


def test_what_it_declines() -> None:
    packed = np.zeros((1, 4 * 9, 4), np.float32)
    op = DeconvolutionOperator({"kernel_shape": [3, 3], "num_output_maps": 4, "has_bias": False}, {"kernel": packed})
    x, out = np.zeros((1, 4, 5, 5), np.float32), np.zeros((1, 4, 7, 7), np.float32)
    linear = [TensorFormat.LINEAR] * 2
    assert deconvolution_onednn(op, x, out, linear) is not None
    assert deconvolution_onednn(op, x.astype(np.float64), out, linear) is None
    assert deconvolution_onednn(op, x, np.zeros((1, 4, 8, 8), np.float32), linear) is None  # a negative end pad
    as_input = DeconvolutionOperator({"kernel_shape": [3, 3], "num_output_maps": 4, "has_bias": False})
    assert deconvolution_onednn(as_input, x, out, linear) is None  # the kernel an input, not a weight
    flat = DeconvolutionOperator({"kernel_shape": [3], "num_output_maps": 4, "has_bias": False}, {"kernel": packed})
    assert deconvolution_onednn(flat, x[..., 0], out[..., 0], linear) is None  # 1-D
