"""The attention-OCR (CNN, BiLSTM, attention decoder in an ONNX Loop) and CRNN examples, exported
from PyTorch, against PyTorch and onnxruntime. Skipped without torch (plugrt does not need it)."""

from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

import plugrt  # noqa: E402

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "attention_ocr.py")


def load_examples():
    """examples/attention_ocr.py as a module."""
    if "attention_ocr" in sys.modules:
        return sys.modules["attention_ocr"]
    spec = importlib.util.spec_from_file_location("attention_ocr", EXAMPLES)
    module = importlib.util.module_from_spec(spec)
    sys.modules["attention_ocr"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def ocr():
    return load_examples()


def small(ocr, kind, end_bias=0.0):
    torch.manual_seed(1)
    if kind == "ocr":
        model = ocr.AttentionOCR(classes=12, hidden=8, max_steps=6)
        with torch.no_grad():
            model.decoder.classify.bias[ocr.END] += end_bias
    else:
        model = ocr.CRNN(classes=12, hidden=8)
    return model.eval()


@pytest.mark.parametrize(("kind", "end_bias"), [("ocr", 0.0), ("ocr", 4.0), ("crnn", 0.0)])
def test_exported_model_matches_torch_and_onnxruntime(ocr, tmp_path, kind, end_bias):
    model = small(ocr, kind, end_bias)
    path = str(tmp_path / f"{kind}.onnx")
    ocr.export(model, path, width=32)
    image = np.random.default_rng(3).random((2, 1, 32, 32), dtype=np.float32)
    ours = plugrt.compile(path)({"image": image})["out"]
    theirs = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"image": image})[0]
    with torch.no_grad():
        expected = model(torch.from_numpy(image)).numpy()
    if kind == "ocr":
        np.testing.assert_array_equal(ours, theirs)
        np.testing.assert_array_equal(ours, expected)
        if end_bias:  # the end token wins at once: the loop's condition stopped it after one step
            assert (ours == ocr.END).all()
    else:
        np.testing.assert_allclose(ours, theirs, atol=1e-5)
        np.testing.assert_allclose(ours, expected, atol=1e-5)
        assert len(ocr.ctc_greedy(ours)) == 2


def test_ctc_greedy_collapses_repeats_and_drops_blanks(ocr):
    frames = np.full((1, 6, 4), -5.0, np.float32)
    for t, c in enumerate([3, 3, 0, 3, 2, 2]):
        frames[0, t, c] = 0.0
    assert ocr.ctc_greedy(frames) == [[3, 3, 2]]
