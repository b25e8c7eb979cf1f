"""Network side of the standard layers: layer types, operator kinds, plan-ready params."""

from __future__ import annotations

import json

import numpy as np
import pytest

import plugrt as trt
from plugrt.core.errors import NetworkError, PlanFormatError, ShapeError, TypeMismatchError
from plugrt.core.types import DataType
from plugrt.network.definition import INetworkDefinition
from plugrt.network.layer import ILayer, LayerType
from plugrt.network.layer_enums import (
    ActivationType,
    ElementWiseOperation,
    MatrixOperation,
    ReduceOperation,
    UnaryOperation,
)
from plugrt.ops.base import create_operator, registered_operators
from plugrt.shape import constant

KINDS = {
    "identity",
    "elementwise",
    "activation",
    "unary",
    "matrix_multiply",
    "constant",
    "shuffle",
    "concatenation",
    "cast",
    "softmax",
    "reduce",
}


def every_layer() -> list[tuple[ILayer, LayerType, str]]:
    network = INetworkDefinition()
    x = network.add_input("x", DataType.FLOAT, (2, 3, 4))
    shuffle = network.add_shuffle(x)
    shuffle.reshape_dims = (0, -1)
    shuffle.second_transpose = (1, 0)
    activation = network.add_activation(x, ActivationType.SELU)
    activation.alpha, activation.beta = 1.5, 2.0
    return [
        (network.add_identity(x), LayerType.IDENTITY, "identity"),
        (network.add_elementwise(x, x, ElementWiseOperation.POW), LayerType.ELEMENTWISE, "elementwise"),
        (activation, LayerType.ACTIVATION, "activation"),
        (network.add_unary(x, UnaryOperation.ERF), LayerType.UNARY, "unary"),
        (
            network.add_matrix_multiply(x, MatrixOperation.NONE, x, MatrixOperation.TRANSPOSE),
            LayerType.MATRIX_MULTIPLY,
            "matrix_multiply",
        ),
        (network.add_constant((2, 2), np.arange(4, dtype=np.int32)), LayerType.CONSTANT, "constant"),
        (shuffle, LayerType.SHUFFLE, "shuffle"),
        (network.add_concatenation([x, x]), LayerType.CONCATENATION, "concatenation"),
        (network.add_cast(x, DataType.HALF), LayerType.CAST, "cast"),
        (network.add_softmax(x), LayerType.SOFTMAX, "softmax"),
        (network.add_reduce(x, ReduceOperation.AVG, 0b110, True), LayerType.REDUCE, "reduce"),
    ]


def test_every_kind_is_registered() -> None:
    assert KINDS <= set(registered_operators())


@pytest.mark.parametrize("index", range(len(KINDS)))
def test_layers_lower_to_plan_ready_operators(index: int) -> None:
    layer, layer_type, kind = every_layer()[index]
    assert layer.layer_type == layer_type and layer.num_outputs == 1
    op = layer.to_operator()
    assert op.kind == kind and op.name == layer.name
    # A plan stores (kind, params, weights): params must survive JSON, and the revived
    # operator must behave as the original.
    params = json.loads(json.dumps(op.params))
    revived = create_operator(kind, params, {k: v.copy() for k, v in op.weights.items()})
    shapes = [[constant(d) for d in (2, 3, 4)]] * layer.num_inputs
    assert revived.output_shapes(shapes, [None] * len(shapes)) == op.output_shapes(shapes, [None] * len(shapes))
    assert revived.output_types([DataType.FLOAT] * len(shapes)) == op.output_types([DataType.FLOAT] * len(shapes))


def test_operator_kinds_reject_bad_params() -> None:
    cases = [
        ("elementwise", {"op": "MODULO"}, "unknown op 'MODULO'"),
        ("activation", {"type": "SWISH"}, "unknown type 'SWISH'"),
        ("unary", {"op": "CBRT"}, "unknown op 'CBRT'"),
        ("matrix_multiply", {"op0": "NONE", "op1": "CONJ"}, "unknown op1 'CONJ'"),
        ("reduce", {"op": "MEDIAN", "axes": 1, "keep_dims": True}, "unknown op 'MEDIAN'"),
        ("cast", {"to_type": "FLOAT128"}, "unknown to_type 'FLOAT128'"),
        ("elementwise", {}, "missing parameter 'op'"),
    ]
    for kind, params, message in cases:
        with pytest.raises(NetworkError, match=message):
            create_operator(kind, params, {})
    unweighted = create_operator("constant", {"shape": [2]}, {})  # params alone are valid
    with pytest.raises(NetworkError, match="constant: weight 'value' is missing"):
        unweighted.output_types([])
    with pytest.raises(ShapeError, match=r"constant: shape \[2\] does not match 3 weight values"):
        create_operator("constant", {"shape": [2]}, {"value": np.zeros(3, np.float32)})
    with pytest.raises(PlanFormatError, match="operator kind 'conv9d'"):
        create_operator("conv9d", {}, {})


def test_layer_names_are_unique_and_outputs_registered() -> None:
    layers = [layer for layer, _, _ in every_layer()]
    names = [layer.name for layer in layers]
    assert len(set(names)) == len(names)
    assert all(layer.get_output(0).producer is layer for layer in layers)


def test_kernels_work_without_prepare_for_shape_cached_operators() -> None:
    """prepare() is an optimisation: a kernel called for new shapes recomputes what it needs."""
    network = INetworkDefinition()
    x = network.add_input("x", DataType.FLOAT, (-1, 4))
    shuffle = network.add_shuffle(x)
    shuffle.first_transpose = (1, 0)
    reduce = network.add_reduce(x, ReduceOperation.SUM, 0b10, False)
    softmax = network.add_softmax(x)
    data = np.arange(8, dtype=np.float32).reshape(2, 4)
    for layer, expected in (
        (shuffle, data.T),
        (reduce, data.sum(axis=1)),
        (softmax, np.exp(data - data.max(0)) / np.exp(data - data.max(0)).sum(0)),
    ):
        out = np.empty(expected.shape, np.float32)
        layer.to_operator().run([data], [out], np)
        np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_built_outputs_read_the_inferred_type_and_shape() -> None:
    """The builder records what it inferred through ITensor.set_inferred (the public way in)."""
    builder = trt.Builder(trt.Logger(trt.Logger.ERROR))
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (-1, 3))
    cast = network.add_cast(x, trt.int32)
    network.mark_output(cast.get_output(0))
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    profile.set_shape("x", (1, 3), (2, 3), (4, 3))
    config.add_optimization_profile(profile)
    assert builder.build_serialized_network(network, config)
    assert (cast.get_output(0).dtype, cast.get_output(0).shape) == (DataType.INT32, (-1, 3))
    cast.get_output(0).set_inferred(DataType.HALF, (2, 3))
    assert (cast.get_output(0).dtype, cast.get_output(0).shape) == (DataType.HALF, (2, 3))
    with pytest.raises(TypeMismatchError, match=r"tensor '.*': dtype must be a DataType, got 'float16'"):
        cast.get_output(0).set_inferred("float16", (2, 3))  # type: ignore[arg-type]
