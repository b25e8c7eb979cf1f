"""On the GPU: transposes as PyTorch's copy of the permuted view (``ShuffleOperator.direct_launch``), of several
ranks and types, a shuffle whose reshape between its two transposes is a view and one where it is not (CuPy's
assignment then), eager and captured, against the CPU engine bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import plugrt as trt

from gpu_helpers import same_on_both

pytestmark = pytest.mark.gpu
LOGGER = trt.Logger(trt.Logger.ERROR)


def _plan() -> bytes:
    builder = trt.Builder(LOGGER, device="cuda")
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (-1, 4, 6, 5))
    outputs = []
    for perm in ((0, 2, 3, 1), (3, 1, 0, 2), (0, 1, 3, 2)):
        shuffle = network.add_shuffle(x)
        shuffle.first_transpose = perm
        outputs.append(shuffle.get_output(0))
    as_int = network.add_cast(x, trt.int32).get_output(0)
    shuffle = network.add_shuffle(as_int)
    shuffle.first_transpose = (2, 0, 3, 1)
    outputs.append(shuffle.get_output(0))
    viewed = network.add_shuffle(x)  # the reshape keeps the permuted dims: a view, then the second transpose
    viewed.first_transpose, viewed.reshape_dims, viewed.second_transpose = (0, 2, 1, 3), (0, 6, 4, 5), (0, 3, 1, 2)
    outputs.append(viewed.get_output(0))
    mixed = network.add_shuffle(x)  # the reshape merges permuted axes: no view of them
    mixed.first_transpose, mixed.reshape_dims, mixed.second_transpose = (0, 2, 1, 3), (0, 6, 20), (0, 2, 1)
    outputs.append(mixed.get_output(0))
    for k, tensor in enumerate(outputs):
        tensor.name = f"y{k}"
        network.mark_output(tensor)
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    profile.set_shape("x", (1, 4, 6, 5), (2, 4, 6, 5), (3, 4, 6, 5))
    config.add_optimization_profile(profile)
    return bytes(builder.build_serialized_network(network, config))


@pytest.mark.parametrize("graph", [False, True])
def test_transposes_on_the_gpu_match_the_cpu(graph: bool) -> None:
    x = np.random.default_rng(4).standard_normal((3, 4, 6, 5)).astype(np.float32) * 10
    got = same_on_both(_plan(), {"x": x}, graph=graph)
    np.testing.assert_array_equal(got["y0"], x.transpose(0, 2, 3, 1))
    np.testing.assert_array_equal(got["y3"], x.astype(np.int32).transpose(2, 0, 3, 1))
    np.testing.assert_array_equal(got["y4"], x.transpose(0, 2, 1, 3).transpose(0, 3, 1, 2))
    np.testing.assert_array_equal(got["y5"], x.transpose(0, 2, 1, 3).reshape(3, 6, 20).transpose(0, 2, 1))
