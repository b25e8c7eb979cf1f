"""The fused attention layer on the GPU: its own kernel (CuPy products and the one-pass softmax) and PyTorch's
scaled_dot_product_attention tactic, eager and captured, FLOAT and FP16, against the unfused engine on the CPU."""

from __future__ import annotations

import numpy as np
import pytest

import plugrt as trt
from plugrt.builder.fusion import DISABLE_ENV
from plugrt.engine.plan import EnginePlan

from export_graphs import masked_attention
from gpu_helpers import run_plan

pytestmark = pytest.mark.gpu
LOGGER = trt.Logger(trt.Logger.ERROR)


def _plan(device: str, fp16: bool = False) -> bytes:
    builder = trt.Builder(LOGGER, device=device)
    network = builder.create_network(0)
    assert trt.OnnxParser(network, LOGGER).parse(masked_attention().SerializeToString())  # type: ignore[attr-defined]
    config = builder.create_builder_config()
    if fp16:
        config.set_flag(trt.BuilderFlag.FP16)
    profile = builder.create_optimization_profile()
    profile.set_shape("x", (1, 16, 64), (2, 16, 64), (4, 16, 64))
    profile.set_shape("mask", (1, 16), (2, 16), (4, 16))
    config.add_optimization_profile(profile)
    return bytes(builder.build_serialized_network(network, config))


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
    want = run_plan(_plan("cpu"), "cpu", feeds)["y"]
    monkeypatch.setenv(DISABLE_ENV, "")
    monkeypatch.setenv("PLUGRT_TORCH", tactic)
    plan = _plan("cuda", fp16)
    layers = [layer for layer in EnginePlan.from_bytes(plan).layers if layer.kind == "attention"]
    assert len(layers) == 1 and layers[0].tactic == (1 if tactic == "always" else 0)
    got = run_plan(plan, "cuda", feeds, graph=graph)["y"]
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=0, atol=(2e-2 if fp16 else 1e-4) * float(np.abs(want).max()))
