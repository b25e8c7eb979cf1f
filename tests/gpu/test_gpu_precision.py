"""BuilderFlag.FP16 on the GPU: the compute layers run in HALF, network I/O keep FLOAT, masks stay finite."""

from __future__ import annotations

import numpy as np
import pytest

import plugrt as trt

from export_graphs import masked_attention
from gpu_helpers import attention_plan, run_plan

pytestmark = pytest.mark.gpu

LOGGER = trt.Logger(trt.Logger.ERROR)


@pytest.mark.parametrize("graph", [False, True])
def test_masked_attention_in_fp16_is_finite_and_close_to_fp32(graph: bool) -> None:
    rng = np.random.default_rng(1)
    mask = np.ones((2, 16), np.int64)
    mask[1, 11:] = 0
    feeds = {"x": rng.standard_normal((2, 16, 64)).astype(np.float32), "mask": mask}
    half_plan = attention_plan(masked_attention(), "cuda", True)
    assert trt.float16 in {t.dtype for t in trt.engine.plan.EnginePlan.from_bytes(half_plan).tensors}
    want = run_plan(attention_plan(masked_attention(), "cuda", False), "cuda", feeds)["y"]
    got = run_plan(half_plan, "cuda", feeds, graph=graph)["y"]
    assert got.dtype == np.float32 and np.isfinite(got).all()
    np.testing.assert_allclose(got, want, atol=2e-2 * np.abs(want).max())
