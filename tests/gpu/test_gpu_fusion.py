"""The GPU softmax kernel and the fused layers on CUDA engines, against the CPU engine."""

from __future__ import annotations

import numpy as np
import pytest

import plugrt as trt

from gpu_helpers import run_plan

pytestmark = pytest.mark.gpu
LOGGER = trt.Logger(trt.Logger.ERROR)


def _softmax_network(shape: tuple[int, ...], axis: int, dtype: type, scaled: bool) -> bytes:
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    kind = trt.float32 if dtype == np.float32 else trt.float16
    x = network.add_input("x", kind, shape)
    source = x
    if scaled:
        scale = network.add_constant((1,) * len(shape), np.full((1,) * len(shape), 0.3, dtype))
        source = network.add_elementwise(x, scale.get_output(0), trt.ElementWiseOperation.PROD).get_output(0)
    softmax = network.add_softmax(source)
    softmax.axes = 1 << axis
    softmax.get_output(0).name = "y"
    network.mark_output(softmax.get_output(0))
    return bytes(builder.build_serialized_network(network, builder.create_builder_config()))


@pytest.mark.parametrize(
    ("shape", "axis"),
    [((4, 8, 128, 128), 3), ((3, 5, 33), 2), ((2, 2049), 1), ((6, 7, 5), 1), ((1000, 2048), 1), ((7, 1), 1)],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("scaled", [False, True])
def test_softmax_on_the_gpu_matches_the_cpu(shape: tuple[int, ...], axis: int, dtype: type, scaled: bool) -> None:
    rng = np.random.default_rng(sum(shape))
    x = rng.normal(0, 4, shape).astype(dtype)
    plan = _softmax_network(shape, axis, dtype, scaled)
    got, want = run_plan(plan, "cuda", {"x": x})["y"], run_plan(plan, "cpu", {"x": x})["y"]
    tolerance = dict(rtol=2e-6, atol=1e-7) if dtype == np.float32 else dict(rtol=2e-3, atol=2e-4)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), **tolerance)
    np.testing.assert_allclose(got.astype(np.float64).sum(axis), 1.0, rtol=1e-2 if dtype == np.float16 else 1e-5)


def test_matrix_bias_fusion_on_the_gpu_and_in_a_graph() -> None:
    rng = np.random.default_rng(2)
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (8, 64, 96))
    w = network.add_constant((1, 96, 48), rng.normal(0, 0.1, (1, 96, 48)).astype(np.float32))
    b = network.add_constant((1, 1, 48), rng.normal(0, 1, (1, 1, 48)).astype(np.float32))
    mm = network.add_matrix_multiply(x, trt.MatrixOperation.NONE, w.get_output(0), trt.MatrixOperation.NONE)
    mm.name = "mm"
    add = network.add_elementwise(mm.get_output(0), b.get_output(0), trt.ElementWiseOperation.SUM)
    add.name = "bias"
    relu = network.add_activation(add.get_output(0), trt.ActivationType.RELU)
    relu.get_output(0).name = "y"
    network.mark_output(relu.get_output(0))
    plan = bytes(builder.build_serialized_network(network, builder.create_builder_config()))
    assert "mm + bias" in [layer.name for layer in trt.Runtime(LOGGER).deserialize_cuda_engine(plan).plan.layers]
    feeds = {"x": rng.normal(0, 1, (8, 64, 96)).astype(np.float32)}
    want = run_plan(plan, "cpu", feeds)["y"]
    for graph in (False, True):
        np.testing.assert_allclose(run_plan(plan, "cuda", feeds, graph)["y"], want, rtol=1e-4, atol=1e-4)
