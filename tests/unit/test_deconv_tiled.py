"""Transposed convolutions whose kernel equals their stride (PP-OCR det's 2x2 upsampling) take the one-pass
layout on NumPy; against an einsum of the definition, to 1e-5 relative (float32 sums of C products)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt

RNG = np.random.default_rng(31)


def _model(x_shape, w, b, **attrs):
    inputs = ["x", "w"] + (["b"] if b is not None else [])
    inits = [numpy_helper.from_array(w, "w")] + ([numpy_helper.from_array(b, "b")] if b is not None else [])
    node = helper.make_node("ConvTranspose", inputs, ["y"], kernel_shape=list(w.shape[2:]), **attrs)
    graph = helper.make_graph(
        [node],
        "tiled",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _reference(x, w, b, group):
    n, c, *spatial = x.shape
    k = w.shape[2:]
    per = c // group
    parts = []
    for g in range(group):
        xs, ws = x[:, g * per : (g + 1) * per], w[g * per : (g + 1) * per]
        if len(spatial) == 1:
            y = np.einsum("nci,cma->nmia", xs, ws).reshape(n, -1, spatial[0] * k[0])
        else:
            y = np.einsum("ncij,cmab->nmiajb", xs, ws).reshape(n, -1, spatial[0] * k[0], spatial[1] * k[1])
        parts.append(y)
    out = np.concatenate(parts, axis=1)
    return out if b is None else out + b.reshape(-1, *(1,) * len(spatial))


@pytest.mark.parametrize(
    "x_shape, w_shape, group, bias",
    [((1, 8, 6, 7), (8, 4, 2, 2), 1, True), ((2, 6, 5, 4), (6, 2, 3, 2), 3, False), ((2, 4, 9), (4, 5, 4), 1, True)],
    ids=["2x2", "grouped-3x2-no-bias", "1d"],
)
def test_tiled_transposed_convolution_matches_the_definition(monkeypatch, x_shape, w_shape, group, bias):
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    w = (RNG.standard_normal(w_shape) * 0.3).astype(np.float32)
    b = RNG.standard_normal(w_shape[1] * group).astype(np.float32) if bias else None
    model = _model(x_shape, w, b, strides=list(w_shape[2:]), group=group)
    engine = plugrt.compile(model, device="cpu")
    x = RNG.standard_normal(x_shape).astype(np.float32)
    got = engine({"x": x})["y"]
    want = _reference(x.astype(np.float64), w.astype(np.float64), None if b is None else b.astype(np.float64), group)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())
