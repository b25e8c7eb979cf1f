"""Silero VAD (pretrained, from the ``silero-vad`` package): its ``If`` nodes, against onnxruntime.

Its conditions are computed from shapes (and the sample rate), so with the chunk shape and the rate
fixed they are known when the network is built and the branches taken are imported inline.
Skipped unless ``silero-vad`` and onnxruntime are installed.
"""

from __future__ import annotations

import importlib.resources

import numpy as np
import pytest

pytest.importorskip("silero_vad")
ort = pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
from onnx import numpy_helper  # noqa: E402

import plugrt  # noqa: E402

CHUNK, RATE = 512, 16000


def fixed(path: str) -> onnx.ModelProto:
    """The model with one 512-sample chunk per call and the sample rate a constant."""
    model = onnx.load(path)
    for value in list(model.graph.input):
        if value.name == "sr":
            model.graph.input.remove(value)
            model.graph.initializer.append(numpy_helper.from_array(np.array(RATE, np.int64), "sr"))
            continue
        sizes = {"input": [1, CHUNK], "state": [2, 1, 128]}[value.name]
        for dim, size in zip(value.type.tensor_type.shape.dim, sizes):
            dim.Clear()
            dim.dim_value = size
    return model


def test_silero_vad_matches_onnxruntime_over_a_stream():
    path = str(importlib.resources.files("silero_vad") / "data" / "silero_vad.onnx")
    ours = plugrt.compile(fixed(path))
    theirs = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    state = np.zeros((2, 1, 128), np.float32)
    for step in range(6):  # a tone growing out of noise, chunk by chunk, the state carried along
        t = np.arange(CHUNK) + step * CHUNK
        x = (np.sin(t * 0.07) * 0.05 * step + rng.standard_normal(CHUNK) * 0.02).astype(np.float32)[None]
        want_prob, want_state = theirs.run(None, {"input": x, "state": state, "sr": np.array(RATE, np.int64)})
        got = ours({"input": x, "state": state})
        np.testing.assert_allclose(got["output"], want_prob, atol=1e-4)
        np.testing.assert_allclose(got["stateN"], want_state, atol=1e-4)
        state = want_state
