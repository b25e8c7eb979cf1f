"""Silero VAD (pretrained, from the ``silero-vad`` package): its ``If`` nodes, against onnxruntime.

Its conditions are computed from shapes (and the sample rate): with the chunk shape and the rate
fixed they are known when the network is built and the branches taken are imported inline; with the
rate an input, the packaged files run as exported once the profile fixes the chunk length.
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


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("file", ["silero_vad.onnx", "silero_vad_16k_op15.onnx"])
def test_packaged_model_as_exported_matches_onnxruntime(file, batch):
    """The packaged files unchanged: a profile fixing the chunk length decides the shape-only ``If``
    nodes at build; the sample-rate ``If`` runs at run time (its 8 kHz branch does not fit a
    512-sample chunk, and is an error only if taken)."""
    path = str(importlib.resources.files("silero_vad") / "data" / file)
    shapes = {"input": ((1, CHUNK), (1, CHUNK), (4, CHUNK)), "state": ((2, 1, 128), (2, 1, 128), (2, 4, 128))}
    ours = plugrt.compile(path, shapes=shapes)
    theirs = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(batch)
    state = np.zeros((2, batch, 128), np.float32)
    for step in range(4):
        t = np.arange(CHUNK) + step * CHUNK
        x = (np.sin(t * 0.05) * 0.1 * step + rng.standard_normal((batch, CHUNK)) * 0.02).astype(np.float32)
        feeds = {"input": x, "state": state, "sr": np.array(RATE, np.int64)}
        want_prob, want_state = theirs.run(None, feeds)
        got = ours(feeds)
        np.testing.assert_allclose(got["output"], want_prob, atol=1e-5)
        # the state is sensitive to float32 rounding: onnxruntime's own state is up to 2e-5 from ONNX's
        # reference evaluator's (onnx.reference) on these chunks, plugrt's up to 7e-6
        np.testing.assert_allclose(got["stateN"], want_state, atol=5e-5)
        state = got["stateN"]  # plugrt's own state carried on


@pytest.mark.parametrize("file", ["silero_vad.onnx", "silero_vad_16k_op15.onnx"])
def test_packaged_model_imports_as_declared(file):
    """Without shapes= the shape-only ``If`` nodes are decided by the first call's shapes (the engine is
    built for them, as for any model compiled without shapes=)."""
    path = str(importlib.resources.files("silero_vad") / "data" / file)
    ours = plugrt.compile(path)
    theirs = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(5)
    state = np.zeros((2, 2, 128), np.float32)
    for step in range(3):
        x = (np.sin(np.arange(CHUNK) * 0.03) * 0.1 * step + rng.standard_normal((2, CHUNK)) * 0.02).astype(np.float32)
        feeds = {"input": x, "state": state, "sr": np.array(RATE, np.int64)}
        want_prob, want_state = theirs.run(None, feeds)
        got = ours(feeds)
        np.testing.assert_allclose(got["output"], want_prob, atol=1e-5)
        np.testing.assert_allclose(got["stateN"], want_state, atol=5e-5)
        state = want_state
