"""Constant folding at import runs the nodes' own layers through their operators' kernels."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx_helpers import errors, model, parse, tensor_info

import plugrt as trt
from plugrt.core.errors import NetworkError
from plugrt.ops.base import create_operator
from plugrt.ops.rules import evaluate

F = TensorProto.FLOAT


def _kinds(network: trt.INetworkDefinition) -> list[str]:
    return [getattr(layer, "kind", "") or type(layer).__name__ for layer in network]


def _output_constant(network: trt.INetworkDefinition) -> np.ndarray:
    """The value of the constant the single network output copies."""
    producer = network.get_output(0)
    layer = next(layer for layer in network if layer.get_output(0) is producer)
    source = layer.get_input(0)
    constant = next(layer for layer in network if layer.get_output(0) is source)
    assert type(constant).__name__ == "IConstantLayer"
    return np.asarray(constant.weights.numpy())


def test_a_node_of_constants_becomes_the_constant_its_kernel_computes() -> None:
    value = np.linspace(-3, 3, 7, dtype=np.float32)
    proto = model([helper.make_node("Exp", ["c"], ["y"])], [], [tensor_info("y", F, [7])], {"c": value})
    ok, parser, network = parse(proto)
    assert ok, errors(parser)
    assert "unary" not in _kinds(network)
    (expected,) = evaluate(create_operator("unary", {"op": "EXP"}, {}), [value])
    assert _output_constant(network).tobytes() == expected.tobytes()


def test_every_layer_a_node_adds_is_folded_together() -> None:
    # Neg of UINT8 runs as cast, negate, cast back: three layers, all computed at import.
    value = np.uint8([0, 1, 5, 200])
    proto = model(
        [helper.make_node("Neg", ["c"], ["y"])], [], [tensor_info("y", TensorProto.UINT8, [4])], {"c": value}
    )
    ok, parser, network = parse(proto)
    assert ok, errors(parser)
    assert set(_kinds(network)) == {"IConstantLayer", "IIdentityLayer"}
    np.testing.assert_array_equal(_output_constant(network), (-value.astype(np.int32)).astype(np.uint8))


def test_a_node_reading_a_runtime_value_keeps_its_layers() -> None:
    proto = model(
        [helper.make_node("Add", ["x", "c"], ["y"])],
        [tensor_info("x", F, [3])],
        [tensor_info("y", F, [3])],
        {"c": np.float32([1, 2, 3])},
    )
    ok, parser, network = parse(proto)
    assert ok, errors(parser)
    assert "elementwise" in [getattr(layer, "kind", "") or layer.to_operator().kind for layer in network]


def test_large_known_inputs_of_gather_stay_layers() -> None:
    table = np.zeros((1 << 16) + 1, np.float32)
    proto = model(
        [helper.make_node("Gather", ["t", "i"], ["y"])],
        [],
        [tensor_info("y", F, [1])],
        {"t": table, "i": np.int64([3])},
    )
    ok, parser, network = parse(proto)
    assert ok, errors(parser)
    assert "gather" in _kinds(network)


def test_a_kernel_that_fails_leaves_the_layer_to_report_at_build() -> None:
    proto = model(
        [helper.make_node("Gather", ["t", "i"], ["y"])],
        [],
        [tensor_info("y", F, [1])],
        {"t": np.float32([1, 2]), "i": np.int64([5])},
    )
    ok, parser, network = parse(proto)
    assert ok, errors(parser)
    assert "gather" in _kinds(network)


def test_discard_layers_checks_its_index_and_keeps_network_outputs() -> None:
    logger = trt.Logger(trt.Logger.ERROR)
    network = trt.Builder(logger).create_network(0)
    x = network.add_input("x", trt.float32, (2,))
    kept = network.add_identity(x)
    network.add_identity(kept.get_output(0))
    with pytest.raises(NetworkError, match="the network has 2 layers; cannot discard from 3"):
        network.discard_layers_from(3)
    network.mark_output(network.get_layer(1).get_output(0))
    with pytest.raises(NetworkError, match=r"cannot discard layers from 1: their outputs \[.*\] are network outputs"):
        network.discard_layers_from(1)
    network.unmark_output(network.get_layer(1).get_output(0))
    removed = network.discard_layers_from(1)
    assert len(removed) == 1 and network.num_layers == 1
