"""A convolution followed by ReLU or Clip (ReLU6) runs as one layer, with the unfused engine's results."""

from __future__ import annotations

import numpy as np
import pytest

import plugrt as trt
from plugrt.core.errors import NetworkError
from plugrt.ops.conv import ConvolutionOperator, pack_conv_kernel

from testing_plugins import build, run

LOGGER = trt.Logger(trt.Logger.ERROR)


def _network(kind: str, also_output: bool = False) -> tuple[trt.INetworkDefinition, trt.Builder]:
    rng = np.random.default_rng(3)
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (2, 4, 9, 9))
    kernel = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    conv = network.add_operator(
        "convolution",
        [x],
        {"num_output_maps": 6, "kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
        {"kernel": pack_conv_kernel(kernel, 1), "bias": rng.standard_normal(6).astype(np.float32)},
    )
    conv.name = "conv"
    conv.get_output(0).name = "features"
    if kind == "relu":
        act = network.add_activation(conv.get_output(0), trt.ActivationType.RELU)
    else:
        act = network.add_activation(conv.get_output(0), trt.ActivationType.CLIP)
        act.alpha, act.beta = 0.0, 6.0
    act.name = kind
    act.get_output(0).name = "y"
    network.mark_output(act.get_output(0))
    if also_output:
        network.mark_output(conv.get_output(0))
    return network, builder


@pytest.mark.parametrize("kind", ["relu", "clip"])
def test_conv_then_relu_or_clip_fuses_and_matches_the_unfused_engine(kind: str) -> None:
    x = np.random.default_rng(4).standard_normal((2, 4, 9, 9)).astype(np.float32) * 3
    fused = trt.Runtime(LOGGER).deserialize_cuda_engine(build(*_network(kind)))
    unfused = trt.Runtime(LOGGER).deserialize_cuda_engine(build(*_network(kind, also_output=True)))
    assert f"conv + {kind}" in [layer.name for layer in fused.plan.layers]
    assert f"conv + {kind}" not in [layer.name for layer in unfused.plan.layers]  # the features are an output
    y = run(fused.create_execution_context(), {"x": x})["y"]
    expected = run(unfused.create_execution_context(), {"x": x})
    np.testing.assert_array_equal(y, expected["y"])  # the same float operations
    high = 6.0 if kind == "clip" else np.inf
    np.testing.assert_array_equal(y, np.clip(expected["features"], 0, high))


def test_an_unknown_fused_activation_is_refused() -> None:
    with pytest.raises(NetworkError, match="unknown fused activation 'GELU'"):
        ConvolutionOperator(
            {"num_output_maps": 2, "kernel_shape": [1, 1], "activation": "GELU"},
            {"kernel": np.ones((1, 2, 2), np.float32)},
        )
