"""A convolution with a fused ReLU / Clip on a CUDA engine, against the CPU engine."""

from __future__ import annotations

import numpy as np
import pytest

import plugrt as trt
from plugrt.ops.conv import pack_conv_kernel

from gpu_helpers import run_plan

pytestmark = pytest.mark.gpu
LOGGER = trt.Logger(trt.Logger.ERROR)


@pytest.mark.parametrize("kind", [trt.ActivationType.RELU, trt.ActivationType.CLIP])
def test_fused_conv_activation_on_the_gpu_matches_the_cpu(kind: trt.ActivationType) -> None:
    rng = np.random.default_rng(7)
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (2, 8, 17, 17))
    conv = network.add_operator(
        "convolution",
        [x],
        {"num_output_maps": 8, "kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "group": 8},
        {"kernel": pack_conv_kernel(rng.standard_normal((8, 1, 3, 3)).astype(np.float32), 8)},
    )
    act = network.add_activation(conv.get_output(0), kind)
    act.alpha, act.beta = 0.0, 6.0
    act.get_output(0).name = "y"
    network.mark_output(act.get_output(0))
    plan = bytes(builder.build_serialized_network(network, builder.create_builder_config()))
    inputs = {"x": (rng.standard_normal((2, 8, 17, 17)) * 4).astype(np.float32)}
    np.testing.assert_allclose(
        run_plan(plan, "cuda", inputs)["y"], run_plan(plan, "cpu", inputs)["y"], rtol=1e-5, atol=1e-5
    )
