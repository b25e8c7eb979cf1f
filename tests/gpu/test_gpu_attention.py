"""The fused attention layer on the GPU: its own kernel (CuPy products and the one-pass softmax) and PyTorch's
scaled_dot_product_attention tactic, eager and captured, FLOAT and FP16, against the unfused engine on the CPU."""

from __future__ import annotations

import numpy as np
import pytest

import plugrt as trt
from plugrt.builder.fusion import DISABLE_ENV
from plugrt.engine.plan import EnginePlan

from export_graphs import masked_attention
from gpu_helpers import attention_plan, run_plan

pytestmark = pytest.mark.gpu
LOGGER = trt.Logger(trt.Logger.ERROR)


@pytest.mark.parametrize("graph", [False, True])
@pytest.mark.parametrize("fp16", [False, True])
@pytest.mark.parametrize("tactic", ["0", "always"])
def test_fused_attention_on_the_gpu(monkeypatch, tactic: str, fp16: bool, graph: bool) -> None:
    rng = np.random.default_rng(4)
    mask = np.ones((3, 16), np.int64)
    mask[1, 10:] = 0
    feeds = {"x": rng.standard_normal((3, 16, 64)).astype(np.float32), "mask": mask}
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    monkeypatch.setenv(DISABLE_ENV, "attention")
    want = run_plan(attention_plan(masked_attention(), "cpu"), "cpu", feeds)["y"]
    monkeypatch.setenv(DISABLE_ENV, "")
    monkeypatch.setenv("PLUGRT_TORCH", tactic)
    plan = attention_plan(masked_attention(), "cuda", fp16)
    layers = [layer for layer in EnginePlan.from_bytes(plan).layers if layer.kind == "attention"]
    assert len(layers) == 1 and layers[0].tactic == (1 if tactic == "always" else 0)
    got = run_plan(plan, "cuda", feeds, graph=graph)["y"]
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=0, atol=(2e-2 if fp16 else 1e-4) * float(np.abs(want).max()))
