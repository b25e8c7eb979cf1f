"""Identity, elementwise, unary, activation and cast: shape rules, kernels, misuse."""

from __future__ import annotations

import math

import numpy as np
import pytest

from plugrt.core.errors import NetworkError, ShapeError, TypeMismatchError
from plugrt.core.types import DataType, from_nptype, nptype
from plugrt.network.definition import INetworkDefinition
from plugrt.network.layer import LayerType
from plugrt.network.layer_enums import ActivationType, ElementWiseOperation, UnaryOperation
from plugrt.ops.base import Operator
from plugrt.ops.unary import erf_fallback
from plugrt.shape import constant, symbol

RNG = np.random.default_rng(1234)
E = ElementWiseOperation


def exprs(shape: tuple[int, ...]) -> list:
    return [constant(d) for d in shape]


def run(op: Operator, *inputs: np.ndarray) -> np.ndarray:
    """Run an operator the way the engine does: rules, output buffer, prepare, kernel."""
    shapes = op.output_shapes([exprs(a.shape) for a in inputs], [None] * len(inputs))
    dtype = op.output_types([from_nptype(a.dtype) for a in inputs])[0]
    shape = tuple(d.get_constant_value() for d in shapes[0])
    out = np.full(shape, 7, dtype=nptype(dtype))
    op.prepare([a.shape for a in inputs], [shape])
    op.run([np.array(a, order="C") for a in inputs], [out], np)
    return out


def net(*specs: tuple[DataType, tuple[int, ...]]) -> tuple[INetworkDefinition, list]:
    network = INetworkDefinition()
    return network, [network.add_input(f"in{i}", dtype, shape) for i, (dtype, shape) in enumerate(specs)]


def random(shape: tuple[int, ...], dtype: type = np.float32, low: float = -3.0, high: float = 3.0) -> np.ndarray:
    if np.issubdtype(dtype, np.integer):
        return RNG.integers(int(low), int(high) + 1, size=shape).astype(dtype)
    if dtype is np.bool_:
        return RNG.integers(0, 2, size=shape).astype(bool)
    return RNG.uniform(low, high, size=shape).astype(dtype)


# --- identity -----------------------------------------------------------------------------------
def test_identity_copies_shape_values_and_data() -> None:
    network, (x,) = net((DataType.HALF, (-1, 3)))
    layer = network.add_identity(x)
    assert layer.type == LayerType.IDENTITY and layer.num_inputs == 1
    op = layer.to_operator()
    assert op.name == layer.name
    (shape,) = op.output_shapes([[symbol("in0[0]"), constant(3)]], [None])
    assert [d.evaluate({"in0[0]": 5}) for d in shape] == [5, 3]
    assert op.output_values([[constant(2)]], [[symbol("a"), constant(4)]]) == [[symbol("a"), constant(4)]]
    data = random((4, 3), np.float16)
    np.testing.assert_array_equal(run(op, data), data)


def test_add_identity_rejects_non_tensor_and_foreign_tensor() -> None:
    network, _ = net((DataType.FLOAT, (2,)))
    with pytest.raises(TypeMismatchError, match="add_identity: expected an ITensor, got ndarray"):
        network.add_identity(np.zeros(2))
    _, (foreign,) = net((DataType.FLOAT, (2,)))
    with pytest.raises(NetworkError, match="belongs to another network"):
        network.add_identity(foreign)


# --- elementwise ----------------------------------------------------------------------------------
ARITHMETIC = {
    E.SUM: np.add,
    E.PROD: np.multiply,
    E.MAX: np.maximum,
    E.MIN: np.minimum,
    E.SUB: np.subtract,
    E.DIV: np.divide,
    E.POW: np.power,
    E.FLOOR_DIV: np.floor_divide,
}
BROADCASTS = [((2, 3, 4), (1, 3, 1)), ((5, 1), (1, 6)), ((), ()), ((3,), (3,))]


def elementwise(op: ElementWiseOperation, dtype: DataType = DataType.FLOAT, rank: int = 1) -> Operator:
    network, (a, b) = net((dtype, (1,) * rank), (dtype, (1,) * rank))
    return network.add_elementwise(a, b, op).to_operator()


@pytest.mark.parametrize("shapes", BROADCASTS)
@pytest.mark.parametrize("op", list(ARITHMETIC))
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_elementwise_arithmetic_matches_numpy(op: ElementWiseOperation, dtype: type, shapes: tuple) -> None:
    low = 0.5 if op == E.POW else -3.0
    a, b = random(shapes[0], dtype, low), random(shapes[1], dtype, low)
    if op in (E.DIV, E.FLOOR_DIV):
        b = np.where(np.abs(b) < 0.25, 1, b).astype(dtype)
    out = run(elementwise(op, from_nptype(dtype), len(shapes[0])), a, b)
    expected = ARITHMETIC[op](a.astype(np.float64), b.astype(np.float64)).astype(dtype)
    assert out.dtype == dtype and out.shape == np.broadcast_shapes(a.shape, b.shape)
    tolerance = 1e-6 if dtype == np.float32 else 2e-3
    np.testing.assert_allclose(out, expected, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_elementwise_integer_division_truncates_and_floor_division_floors(dtype: type) -> None:
    a = np.array([-7, 7, -7, 7, 6, -6, 0], dtype=dtype)
    b = np.array([2, 2, -2, -2, 3, 3, 5], dtype=dtype)
    np.testing.assert_array_equal(run(elementwise(E.DIV, from_nptype(dtype)), a, b), [-3, 3, 3, -3, 2, -2, 0])
    np.testing.assert_array_equal(run(elementwise(E.FLOOR_DIV, from_nptype(dtype)), a, b), [-4, 3, 3, -4, 2, -2, 0])
    np.testing.assert_array_equal(run(elementwise(E.SUM, from_nptype(dtype)), a, b), a + b)


def test_elementwise_comparisons_and_logic_give_bool() -> None:
    a, b = random((3, 4)), random((1, 4))
    b[0, 0] = a[0, 0]
    for op, reference in ((E.EQUAL, np.equal), (E.GREATER, np.greater), (E.LESS, np.less)):
        out = run(elementwise(op, rank=2), a, b)
        assert out.dtype == np.bool_
        np.testing.assert_array_equal(out, reference(a, b))
    p, q = random((2, 3), np.bool_), random((2, 1), np.bool_)
    for op, reference in ((E.AND, np.logical_and), (E.OR, np.logical_or), (E.XOR, np.logical_xor)):
        np.testing.assert_array_equal(run(elementwise(op, DataType.BOOL, 2), p, q), reference(p, q))


def test_elementwise_shapes_broadcast_symbolically() -> None:
    op = elementwise(E.SUM, rank=3)
    x0, x1 = symbol("x[0]"), symbol("y[0]")
    (shape,) = op.output_shapes([[x0, constant(3), constant(1)], [constant(1), constant(3), constant(5)]], [None, None])
    assert [d.evaluate({"x[0]": 4}) for d in shape] == [4, 3, 5]
    (shape,) = op.output_shapes([[x0, x1, constant(2)], [x1, constant(7), constant(2)]], [None, None])
    assert shape[1] == constant(7) and [d.evaluate({"x[0]": 1, "y[0]": 6}) for d in shape] == [6, 7, 2]


def test_elementwise_output_values_follow_shape_arithmetic() -> None:
    op = elementwise(E.SUM)
    x = symbol("x[0]")
    (value,) = op.output_values([[constant(2)], [constant(1)]], [[x, constant(3)], [constant(1)]])
    assert value is not None and [v.evaluate({"x[0]": 5}) for v in value] == [6, 4]
    (value,) = elementwise(E.DIV).output_values([[constant(2)]] * 2, [[constant(-7), constant(7)], [constant(2)] * 2])
    assert value == [constant(-3), constant(3)]
    assert elementwise(E.PROD).output_values([[constant(1)]] * 2, [[x], None]) == [None]
    assert elementwise(E.POW).output_values([[constant(1)]] * 2, [[x], [x]]) == [None]


def test_elementwise_misuse() -> None:
    network, (a, b, c, f) = net(
        (DataType.FLOAT, (2, 3)), (DataType.FLOAT, (2, 3, 1)), (DataType.INT32, (2, 3)), (DataType.FLOAT, (2, 4))
    )
    with pytest.raises(ShapeError, match="add_elementwise: inputs must have the same rank, got 2 and 3"):
        network.add_elementwise(a, b, E.SUM)
    with pytest.raises(ShapeError, match="add_elementwise: dimension 1 is 3 and 4"):
        network.add_elementwise(a, f, E.SUM)
    with pytest.raises(TypeMismatchError, match="needs inputs of one type, got FLOAT and INT32"):
        network.add_elementwise(a, c, E.SUM)
    with pytest.raises(TypeMismatchError, match="AND needs BOOL inputs, got FLOAT"):
        network.add_elementwise(a, a, E.AND)
    with pytest.raises(
        TypeMismatchError, match=r"add_elementwise: op must be a value of the ElementWiseOperation enum .*got 'SUM'"
    ):
        network.add_elementwise(a, a, "SUM")  # type: ignore[arg-type]
    with pytest.raises(TypeMismatchError, match="add_elementwise input2: expected an ITensor, got float"):
        network.add_elementwise(a, 1.0, E.SUM)  # type: ignore[arg-type]
    layer = network.add_elementwise(a, a, E.SUM)
    with pytest.raises(
        TypeMismatchError, match=r"IElementWiseLayer.op must be a value of the ElementWiseOperation enum"
    ):
        layer.op = 3
    assert network.num_layers == 1  # failed calls add nothing


def test_elementwise_rules_name_the_layer_when_checked_at_build() -> None:
    network, (a, b) = net((DataType.FLOAT, (2, 3)), (DataType.FLOAT, (2, 3, 1)))
    layer = network.add_elementwise(network.add_identity(a).get_output(0), b, E.SUM)
    with pytest.raises(ShapeError, match=r"\(Unnamed Layer\* 1\).*same rank, got 2 and 3"):
        layer.to_operator().output_shapes([exprs((2, 3)), exprs((2, 3, 1))], [None, None])
    layer.set_input(2, a)
    with pytest.raises(NetworkError, match="expected 2 input"):
        layer.to_operator().output_types([DataType.FLOAT] * 3)


# --- unary ----------------------------------------------------------------------------------------
U = UnaryOperation
UNARY = {
    U.EXP: (np.exp, -3, 3),
    U.LOG: (np.log, 0.1, 5),
    U.SQRT: (np.sqrt, 0, 5),
    U.RECIP: (np.reciprocal, 0.5, 4),
    U.ABS: (np.abs, -3, 3),
    U.NEG: (np.negative, -3, 3),
    U.SIN: (np.sin, -3, 3),
    U.COS: (np.cos, -3, 3),
    U.TAN: (np.tan, -1, 1),
    U.SINH: (np.sinh, -2, 2),
    U.COSH: (np.cosh, -2, 2),
    U.ASIN: (np.arcsin, -0.9, 0.9),
    U.ACOS: (np.arccos, -0.9, 0.9),
    U.ATAN: (np.arctan, -3, 3),
    U.ASINH: (np.arcsinh, -3, 3),
    U.ACOSH: (np.arccosh, 1, 4),
    U.ATANH: (np.arctanh, -0.9, 0.9),
    U.CEIL: (np.ceil, -3, 3),
    U.FLOOR: (np.floor, -3, 3),
    U.SIGN: (np.sign, -3, 3),
    U.ROUND: (np.round, -3, 3),
    U.ERF: (np.vectorize(math.erf), -3, 3),
}


def unary(op: UnaryOperation, dtype: DataType = DataType.FLOAT) -> Operator:
    network, (x,) = net((dtype, (1,)))
    return network.add_unary(x, op).to_operator()


@pytest.mark.parametrize("op", list(UNARY))
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_unary_matches_reference(op: UnaryOperation, dtype: type) -> None:
    reference, low, high = UNARY[op]
    x = random((3, 5), dtype, low, high)
    out = run(unary(op, from_nptype(dtype)), x)
    expected = reference(x.astype(np.float64))
    tolerance = 2e-6 if dtype == np.float32 else 2e-3
    assert out.dtype == dtype
    np.testing.assert_allclose(out, expected.astype(dtype), rtol=tolerance, atol=tolerance)


def test_unary_round_is_half_to_even_and_predicates_are_bool() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4], dtype=np.float32)
    np.testing.assert_array_equal(run(unary(U.ROUND), x), [0, 2, 2, 0, -2, -2, 2])
    special = np.array([np.inf, -np.inf, np.nan, 1.0], dtype=np.float32)
    assert run(unary(U.ISINF), special).tolist() == [True, True, False, False]
    assert run(unary(U.ISNAN), special).tolist() == [False, False, True, False]
    flags = np.array([True, False])
    assert run(unary(U.NOT, DataType.BOOL), flags).tolist() == [False, True]
    ints = np.array([-3, 0, 4], dtype=np.int32)
    assert run(unary(U.ABS, DataType.INT32), ints).tolist() == [3, 0, 4]
    assert run(unary(U.SIGN, DataType.INT32), ints).tolist() == [-1, 0, 1]


def test_erf_fallback_is_accurate_everywhere() -> None:
    x = np.concatenate([np.linspace(-7, 7, 2001), [0.0, 1e-8, -1e-30, 2.5, -2.5, np.inf, -np.inf]])
    expected = np.array([math.erf(v) for v in x])
    np.testing.assert_allclose(erf_fallback(np, x), expected, rtol=1e-12, atol=1e-14)
    assert np.isnan(erf_fallback(np, np.array([np.nan])))[0]


def test_unary_misuse() -> None:
    network, (f, i) = net((DataType.FLOAT, (2,)), (DataType.INT32, (2,)))
    with pytest.raises(TypeMismatchError, match="unary EXP takes FLOAT, HALF, got INT32"):
        network.add_unary(i, U.EXP)
    with pytest.raises(TypeMismatchError, match="unary NOT takes BOOL, got FLOAT"):
        network.add_unary(f, U.NOT)
    with pytest.raises(
        TypeMismatchError, match=r"add_unary: op must be a value of the UnaryOperation enum .*got <ActivationType.RELU"
    ):
        network.add_unary(f, ActivationType.RELU)  # type: ignore[arg-type]


# --- activation -----------------------------------------------------------------------------------
A = ActivationType
ALPHA, BETA = 0.7, 1.3


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf)(x)


ACTIVATIONS = {
    A.RELU: lambda x: np.maximum(x, 0),
    A.SIGMOID: lambda x: 1 / (1 + np.exp(-x)),
    A.TANH: np.tanh,
    A.LEAKY_RELU: lambda x: np.where(x >= 0, x, ALPHA * x),
    A.ELU: lambda x: np.where(x >= 0, x, ALPHA * (np.exp(x) - 1)),
    A.SELU: lambda x: np.where(x > 0, BETA * x, BETA * (ALPHA * np.exp(x) - ALPHA)),
    A.SOFTSIGN: lambda x: x / (1 + np.abs(x)),
    A.SOFTPLUS: lambda x: ALPHA * np.log(np.exp(BETA * x) + 1),
    A.CLIP: lambda x: np.maximum(ALPHA, np.minimum(BETA, x)),
    A.HARD_SIGMOID: lambda x: np.maximum(0, np.minimum(1, ALPHA * x + BETA)),
    A.SCALED_TANH: lambda x: ALPHA * np.tanh(BETA * x),
    A.THRESHOLDED_RELU: lambda x: np.where(x > ALPHA, x, 0),
    A.GELU_ERF: lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))),
    A.GELU_TANH: lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
}


def activation(kind: ActivationType, dtype: DataType = DataType.FLOAT) -> Operator:
    network, (x,) = net((dtype, (1,)))
    layer = network.add_activation(x, kind)
    layer.alpha, layer.beta = ALPHA, BETA
    return layer.to_operator()


@pytest.mark.parametrize("kind", list(ACTIVATIONS))
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape", [(7,), (2, 3, 5), ()])
def test_activation_matches_tensorrt_formulas(kind: ActivationType, dtype: type, shape: tuple) -> None:
    x = random(shape, dtype, -4, 4)
    out = run(activation(kind, from_nptype(dtype)), x)
    expected = ACTIVATIONS[kind](x.astype(np.float64))
    tolerance = 2e-6 if dtype == np.float32 else 2e-3
    assert out.dtype == dtype and out.shape == shape
    np.testing.assert_allclose(out, expected, rtol=tolerance, atol=tolerance)


def test_activation_is_stable_for_extreme_inputs() -> None:
    x = np.array([-1e4, -100.0, 0.0, 100.0, 1e4], dtype=np.float32)
    for kind in (A.SIGMOID, A.SOFTPLUS, A.ELU, A.SELU, A.GELU_ERF, A.GELU_TANH):
        assert np.isfinite(run(activation(kind), x)).all(), kind
    np.testing.assert_allclose(run(activation(A.SIGMOID), x), [0, 0, 0.5, 1, 1], atol=1e-7)


def test_activation_layer_attributes_and_misuse() -> None:
    network, (x, i) = net((DataType.FLOAT, (2,)), (DataType.INT32, (2,)))
    layer = network.add_activation(x, A.RELU)
    assert layer.type == A.RELU and layer.layer_type == LayerType.ACTIVATION
    assert (layer.alpha, layer.beta) == (0.0, 0.0)
    layer.type = A.CLIP
    assert layer.to_operator().params == {"type": "CLIP", "alpha": 0.0, "beta": 0.0}
    np.testing.assert_array_equal(run(network.add_activation(i, A.RELU).to_operator(), np.array([-2, 3])), [0, 3])
    with pytest.raises(TypeMismatchError, match="activation SIGMOID takes FLOAT, HALF, got INT32"):
        network.add_activation(i, A.SIGMOID)
    with pytest.raises(TypeMismatchError, match=r"IActivationLayer.alpha must be a finite float, got nan"):
        layer.alpha = float("nan")
    with pytest.raises(TypeMismatchError, match=r"IActivationLayer.beta must be a finite float, got '1'"):
        layer.beta = "1"
    with pytest.raises(
        TypeMismatchError, match=r"add_activation: type must be a value of the ActivationType enum .*got 'RELU'"
    ):
        network.add_activation(x, "RELU")  # type: ignore[arg-type]


# --- cast -----------------------------------------------------------------------------------------
def cast(source: DataType, target: DataType) -> Operator:
    network, (x,) = net((source, (1,)))
    return network.add_cast(x, target).to_operator()


def test_cast_conversions() -> None:
    x = np.array([1.7, -1.7, 2.5, 0.0, -0.2], dtype=np.float32)
    out = run(cast(DataType.FLOAT, DataType.INT32), x)
    assert out.dtype == np.int32 and out.tolist() == [1, -1, 2, 0, 0]
    assert run(cast(DataType.FLOAT, DataType.BOOL), x).tolist() == [True, True, True, False, True]
    assert run(cast(DataType.BOOL, DataType.FLOAT), np.array([True, False])).tolist() == [1.0, 0.0]
    big = np.array([2**40, -5], dtype=np.int64)
    assert run(cast(DataType.INT64, DataType.INT32), np.array([7, -5], dtype=np.int64)).dtype == np.int32
    assert run(cast(DataType.INT64, DataType.FLOAT), big).tolist() == [2.0**40, -5.0]
    half = run(cast(DataType.FLOAT, DataType.HALF), x)
    np.testing.assert_array_equal(half, x.astype(np.float16))


def test_cast_types_values_and_misuse() -> None:
    network, (x,) = net((DataType.INT64, (2,)))
    layer = network.add_cast(x, DataType.INT32)
    assert layer.to_type == DataType.INT32 and layer.type == LayerType.CAST
    value = [symbol("x[0]"), constant(3)]
    assert layer.to_operator().output_values([[constant(2)]], [value]) == [value]
    layer.to_type = DataType.FLOAT
    op = layer.to_operator()
    assert op.output_types([DataType.INT64]) == [DataType.FLOAT]
    assert op.output_values([[constant(2)]], [value]) == [None]
    with pytest.raises(TypeMismatchError, match="add_cast: to_type must be a DataType, got 'int32'"):
        network.add_cast(x, "int32")  # type: ignore[arg-type]
    with pytest.raises(TypeMismatchError, match=r"ICastLayer.to_type: DataType.FP8 has no NumPy equivalent"):
        layer.to_type = DataType.FP8


def test_a_small_float64_erf_needs_no_scipy() -> None:
    """Up to ``SMALL_ERF`` elements, float64 Erf is the fallback series (within 1e-14): no SciPy import (~22 MB) for
    the builder's GELU probes; larger arrays take SciPy where it is installed."""
    import subprocess
    import sys

    script = (
        "import math, sys, numpy as np\n"
        "from plugrt.ops.unary import erf\n"
        "x = np.linspace(-6, 6, 1001)\n"
        "out = np.empty_like(x)\n"
        "erf(np, x, out)\n"
        "assert max(abs(o - math.erf(v)) for o, v in zip(out, x)) < 1e-14\n"
        "print('scipy' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
