"""Loop, If, Scan, the narrow storage casts and the attention-OCR / CRNN examples on the GPU, against the CPU."""

from __future__ import annotations

import numpy as np
import pytest

import plugrt
from onnx_control.test_control_flow import branchy_if, counting_loop

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize(("trip", "limit_in_body"), [(4, False), (20, True), (None, True)])
def test_loop_matches_the_cpu(trip, limit_in_body) -> None:
    s0 = np.array([0.5, 1.0], np.float32)
    x = np.array([1.0, 0.25], np.float32)
    cpu = plugrt.compile(counting_loop(limit_in_body, trip), device="cpu")({"s0": s0, "x": x})
    gpu = plugrt.compile(counting_loop(limit_in_body, trip), device="cuda")({"s0": s0, "x": x})
    for name in ("s_final", "scans"):
        np.testing.assert_allclose(gpu[name], cpu[name], rtol=1e-6)


def test_if_with_branch_dependent_shape_on_the_gpu() -> None:
    compiled = plugrt.compile(branchy_if(), device="cuda")
    x = np.array([1.0, 2.0, 3.0], np.float32)
    np.testing.assert_array_equal(compiled({"c": np.array(True), "x": x})["y"], x * x)
    np.testing.assert_array_equal(compiled({"c": np.array(False), "x": x})["y"], np.concatenate([x, x]))


def test_fp8_cast_on_the_gpu() -> None:
    from onnx import TensorProto

    from onnx_coverage.test_storage_types import cast_model

    x = np.array([0.3, 500.0, -np.inf, 1.0], np.float32)
    model = cast_model(TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E4M3FN)
    cpu = plugrt.compile(model, device="cpu")({"x": x})["y"]
    gpu = plugrt.compile(model, device="cuda")({"x": x})["y"]
    np.testing.assert_array_equal(gpu.astype(np.float32), cpu.astype(np.float32))


@pytest.mark.parametrize("kind", ["ocr", "crnn"])
def test_ocr_examples_match_the_cpu(tmp_path, kind) -> None:
    pytest.importorskip("torch")
    from onnx_control.test_ocr_models import load_examples, small

    ocr = load_examples()
    path = str(tmp_path / f"{kind}.onnx")
    ocr.export(small(ocr, kind), path, width=32)
    image = np.random.default_rng(3).random((2, 1, 32, 32), dtype=np.float32)
    cpu = plugrt.compile(path, device="cpu")({"image": image})["out"]
    gpu = plugrt.compile(path, device="cuda")({"image": image})["out"]
    if kind == "ocr":
        np.testing.assert_array_equal(gpu, cpu)
    else:
        np.testing.assert_allclose(gpu, cpu, atol=1e-4)
