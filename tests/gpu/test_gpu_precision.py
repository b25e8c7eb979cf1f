"""BuilderFlag.FP16 on the GPU: the compute layers run in HALF, network I/O keep FLOAT, masks stay finite."""

from __future__ import annotations

import numpy as np
import pytest

import plugrt as trt

from export_graphs import masked_attention
from gpu_helpers import run_plan

pytestmark = pytest.mark.gpu

LOGGER = trt.Logger(trt.Logger.ERROR)


def _plan(model: object, fp16: bool) -> bytes:
    builder = trt.Builder(LOGGER, device="cuda")
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, LOGGER)
    assert parser.parse(model.SerializeToString())  # type: ignore[attr-defined]
    config = builder.create_builder_config()
    if fp16:
        config.set_flag(trt.BuilderFlag.FP16)
    profile = builder.create_optimization_profile()
    profile.set_shape("x", (1, 16, 64), (2, 16, 64), (4, 16, 64))
    profile.set_shape("mask", (1, 16), (2, 16), (4, 16))
    config.add_optimization_profile(profile)
    return bytes(builder.build_serialized_network(network, config))


@pytest.mark.parametrize("graph", [False, True])
def test_masked_attention_in_fp16_is_finite_and_close_to_fp32(graph: bool) -> None:
    rng = np.random.default_rng(1)
    mask = np.ones((2, 16), np.int64)
    mask[1, 11:] = 0
    feeds = {"x": rng.standard_normal((2, 16, 64)).astype(np.float32), "mask": mask}
    half_plan = _plan(masked_attention(), True)
    assert trt.float16 in {t.dtype for t in trt.engine.plan.EnginePlan.from_bytes(half_plan).tensors}
    want = run_plan(_plan(masked_attention(), False), "cuda", feeds)["y"]
    got = run_plan(half_plan, "cuda", feeds, graph=graph)["y"]
    assert got.dtype == np.float32 and np.isfinite(got).all()
    np.testing.assert_allclose(got, want, atol=2e-2 * np.abs(want).max())
