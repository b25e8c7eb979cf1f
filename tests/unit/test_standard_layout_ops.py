"""Matrix multiply, constant, shuffle, concatenation, softmax and reduce: rules, kernels, misuse."""

from __future__ import annotations

import numpy as np
import pytest

from plugrt.core.dims import Dims
from plugrt.core.errors import NetworkError, ShapeError, TypeMismatchError
from plugrt.core.types import DataType, from_nptype, nptype
from plugrt.network.definition import INetworkDefinition
from plugrt.network.layer_enums import MatrixOperation, ReduceOperation, Weights
from plugrt.ops.base import Operator
from plugrt.shape import DimensionOperation, constant, operation, symbol

RNG = np.random.default_rng(99)
M = MatrixOperation
R = ReduceOperation


def exprs(shape: tuple[int, ...]) -> list:
    return [constant(d) for d in shape]


def run(op: Operator, *inputs: np.ndarray) -> np.ndarray:
    """Rules, then an output buffer of the inferred shape and type, then prepare and the kernel."""
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


def evaluate(shape: list, **env: int) -> list[int]:
    return [d.evaluate({f"{k}[0]": v for k, v in env.items()}) for d in shape]


# --- matrix multiply ------------------------------------------------------------------------------
def matmul(op0: MatrixOperation, op1: MatrixOperation, dtype: DataType = DataType.FLOAT) -> Operator:
    network, (a, b) = net((dtype, (-1, -1)), (dtype, (-1, -1)))
    # Identity outputs have no declared shape, so add_* does not check these placeholder ranks.
    a, b = network.add_identity(a).get_output(0), network.add_identity(b).get_output(0)
    layer = network.add_matrix_multiply(a, op0, b, op1)
    assert (layer.op0, layer.op1) == (op0, op1)
    return layer.to_operator()


def _reference(a: np.ndarray, op0: M, b: np.ndarray, op1: M) -> np.ndarray:
    a, b = a.astype(np.float64), b.astype(np.float64)
    a = a.swapaxes(-1, -2) if op0 == M.TRANSPOSE else a[..., None, :] if op0 == M.VECTOR else a
    b = b.swapaxes(-1, -2) if op1 == M.TRANSPOSE else b[..., :, None] if op1 == M.VECTOR else b
    result = a @ b
    result = result[..., 0, :] if op0 == M.VECTOR else result
    return result[..., 0] if op1 == M.VECTOR else result


MATMUL_CASES = [
    (M.NONE, (2, 1, 3, 4), M.NONE, (1, 5, 4, 6), (2, 5, 3, 6)),
    (M.TRANSPOSE, (2, 4, 3), M.NONE, (2, 4, 5), (2, 3, 5)),
    (M.NONE, (3, 4), M.TRANSPOSE, (5, 4), (3, 5)),
    (M.TRANSPOSE, (1, 4, 3), M.TRANSPOSE, (6, 5, 4), (6, 3, 5)),
    (M.VECTOR, (6, 4), M.NONE, (6, 4, 5), (6, 5)),
    (M.NONE, (6, 3, 4), M.VECTOR, (1, 4), (6, 3)),
    (M.VECTOR, (2, 3, 4), M.VECTOR, (2, 1, 4), (2, 3)),
    (M.VECTOR, (4,), M.TRANSPOSE, (5, 4), (5,)),
    (M.VECTOR, (4,), M.VECTOR, (4,), ()),
]


@pytest.mark.parametrize(("op0", "shape0", "op1", "shape1", "expected"), MATMUL_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_matrix_multiply_matches_numpy(
    op0: M, shape0: tuple, op1: M, shape1: tuple, expected: tuple, dtype: type
) -> None:
    a, b = RNG.standard_normal(shape0).astype(dtype), RNG.standard_normal(shape1).astype(dtype)
    out = run(matmul(op0, op1, from_nptype(dtype)), a, b)
    assert out.shape == expected and out.dtype == dtype
    tolerance = 1e-5 if dtype == np.float32 else 1e-2
    np.testing.assert_allclose(out, _reference(a, op0, b, op1), rtol=tolerance, atol=tolerance)


def test_matrix_multiply_symbolic_shapes() -> None:
    op = matmul(M.NONE, M.TRANSPOSE)
    x, y = symbol("x[0]"), symbol("y[0]")
    (shape,) = op.output_shapes([[x, constant(3), y], [constant(1), constant(5), y]], [None, None])
    assert evaluate(shape, x=4, y=2) == [4, 3, 5]
    (shape,) = matmul(M.VECTOR, M.NONE).output_shapes([[x, y], [x, y, constant(7)]], [None, None])
    assert evaluate(shape, x=4, y=2) == [4, 7]


def test_matrix_multiply_misuse() -> None:
    network, (a, b, c, v, i) = net(
        (DataType.FLOAT, (2, 3, 4)),
        (DataType.FLOAT, (2, 5, 6)),
        (DataType.FLOAT, (4, 6)),
        (DataType.FLOAT, (4,)),
        (DataType.INT32, (3, 4)),
    )
    with pytest.raises(ShapeError, match=r"add_matrix_multiply: the reduced dimensions .* must match, got 4 and 5"):
        network.add_matrix_multiply(a, M.NONE, b, M.NONE)
    with pytest.raises(ShapeError, match="inputs have 1 and 0 batch dimensions"):
        network.add_matrix_multiply(a, M.NONE, c, M.NONE)
    with pytest.raises(ShapeError, match="input 1 with op NONE needs rank >= 2, got 1"):
        network.add_matrix_multiply(c, M.NONE, v, M.NONE)
    with pytest.raises(TypeMismatchError, match="needs two FLOAT or two HALF inputs, got INT32 and INT32"):
        network.add_matrix_multiply(i, M.NONE, i, M.TRANSPOSE)
    with pytest.raises(TypeMismatchError, match="add_matrix_multiply: op1 must be a value of the MatrixOperation"):
        network.add_matrix_multiply(a, M.NONE, a, True)  # type: ignore[arg-type]


# --- constant and Weights -------------------------------------------------------------------------
def test_constant_layer_outputs_its_weights() -> None:
    network = INetworkDefinition()
    data = np.arange(6, dtype=np.float16)
    layer = network.add_constant((2, 3), Weights(data))
    assert layer.shape == (2, 3) and layer.weights.dtype == DataType.HALF
    op = layer.to_operator()
    assert op.is_constant and op.params == {"shape": [2, 3]}
    assert op.output_types([]) == [DataType.HALF] and op.output_shapes([], []) == [exprs((2, 3))]
    out = np.empty((2, 3), np.float16)
    op.run([], [out], np)
    np.testing.assert_array_equal(out, data.reshape(2, 3))
    # the operator reads the network's array through a read-only view (no copy at lowering: the plan bytes
    # are the engine's copy); it cannot write to it
    assert np.shares_memory(op.weights["value"], data) and not op.weights["value"].flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        op.weights["value"][0, 0] = 1
    ints = network.add_constant((3,), np.array([4, 0, -1], dtype=np.int64)).to_operator()
    assert ints.output_values([], []) == [exprs((4, 0, -1))]
    assert network.add_constant((), np.array([2.5], dtype=np.float32)).to_operator().output_values([], []) == [None]


def test_weights_wrapper() -> None:
    empty = Weights()
    assert (empty.dtype, empty.size, empty.nbytes) == (DataType.FLOAT, 0, 0)
    assert Weights(DataType.INT32).dtype == DataType.INT32
    data = np.arange(6, dtype=np.int32).reshape(2, 3)
    weights = Weights(data)
    assert (weights.dtype, weights.size, weights.nbytes, len(weights)) == (DataType.INT32, 6, 24, 6)
    assert np.shares_memory(weights.numpy(), data) and weights.numpy().shape == (6,)
    assert Weights(np.array([True])).dtype == DataType.BOOL
    with pytest.raises(TypeMismatchError, match=r"NumPy dtype float64 has no DataType.*astype"):
        Weights(np.zeros(3))
    with pytest.raises(TypeMismatchError, match="Weights takes a NumPy array, a DataType or nothing, got list"):
        Weights([1.0])  # type: ignore[arg-type]


def test_constant_misuse() -> None:
    network = INetworkDefinition()
    with pytest.raises(ShapeError, match=r"add_constant: weights hold 5 values but shape \(2, 3\) has volume 6"):
        network.add_constant((2, 3), np.zeros(5, np.float32))
    with pytest.raises(TypeMismatchError, match=r"add_constant: weights: .*float64"):
        network.add_constant((2,), np.zeros(2))
    with pytest.raises(TypeMismatchError, match="add_constant: weights must be Weights or a NumPy array, got list"):
        network.add_constant((2,), [1.0, 2.0])  # type: ignore[arg-type]
    with pytest.raises(ShapeError, match=r"add_constant: shape must not contain -1, got \(-1, 2\)"):
        network.add_constant((-1, 2), np.zeros(2, np.float32))
    layer = network.add_constant((2, 2), np.zeros(4, np.float32))
    layer.shape = (5,)
    with pytest.raises(ShapeError, match=r"4 weight values do not fill shape \(5,\)"):
        layer.to_operator()
    assert network.num_layers == 1


# --- shuffle --------------------------------------------------------------------------------------
def shuffle(shape: tuple[int, ...] = (2, 3, 4), **attributes: object) -> Operator:
    network, (x,) = net((DataType.FLOAT, shape))
    layer = network.add_shuffle(x)
    for name, value in attributes.items():
        setattr(layer, name, value)
    return layer.to_operator()


def test_shuffle_reshape_rules_on_expressions() -> None:
    x = symbol("x[0]")
    (shape,) = shuffle(reshape_dims=(0, -1)).output_shapes([[x, constant(3), constant(4)]], [None])
    assert shape == [x, constant(12)]
    (shape,) = shuffle(reshape_dims=(-1, 6)).output_shapes([[x, constant(3), constant(4)]], [None])
    assert evaluate(shape, x=5) == [10, 6]
    (shape,) = shuffle(reshape_dims=(2, -1)).output_shapes([[x, constant(3), constant(4)]], [None])
    assert shape[1] == operation(DimensionOperation.PROD, constant(6), x)  # cancelled, so bounds stay tight
    (shape,) = shuffle(reshape_dims=(0, 0), zero_is_placeholder=False).output_shapes([exprs((0, 5))], [None])
    assert shape == exprs((0, 0))
    (shape,) = shuffle(first_transpose=(2, 0, 1), reshape_dims=(0, -1)).output_shapes(
        [[x, constant(3), constant(4)]], [None]
    )
    assert evaluate(shape, x=5) == [4, 15]


@pytest.mark.parametrize(
    ("first", "reshape", "second"),
    [
        ((0, 1, 2), None, (0, 1, 2)),
        ((2, 0, 1), None, (0, 1, 2)),
        ((0, 1, 2), (6, 4), (1, 0)),
        ((1, 0, 2), (0, -1), (1, 0)),
        ((0, 2, 1), (4, 3, 2), (2, 1, 0)),
        ((0, 1, 2), (24,), (0,)),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_shuffle_kernel_matches_numpy(first: tuple, reshape: tuple | None, second: tuple, dtype: type) -> None:
    x = (RNG.standard_normal((2, 3, 4)) * 5).astype(dtype)
    attributes: dict = {"first_transpose": first, "second_transpose": second}
    if reshape is not None:
        attributes["reshape_dims"] = reshape
    moved = x.transpose(first)
    mid = moved if reshape is None else moved.reshape([m if r == 0 else r for r, m in zip(reshape, moved.shape)])
    np.testing.assert_array_equal(run(shuffle(**attributes), x), mid.transpose(second))


def test_shuffle_second_input_and_values() -> None:
    network, (x, dims) = net((DataType.FLOAT, (-1, 6)), (DataType.INT32, (2,)))
    layer = network.add_shuffle(x)
    layer.set_input(1, dims)
    op = layer.to_operator()
    size = symbol("x[0]")
    (shape,) = op.output_shapes([[size, constant(6)], [constant(2)]], [None, [constant(3), constant(-1)]])
    assert evaluate(shape, x=4) == [3, 8]
    assert op.output_types([DataType.FLOAT, DataType.INT64]) == [DataType.FLOAT]
    with pytest.raises(NetworkError, match="dynamic reshape from a runtime tensor is not supported yet"):
        op.output_shapes([[size, constant(6)], [constant(2)]], [None, None])
    with pytest.raises(TypeMismatchError, match="reshape dimensions input must be INT32 or INT64, got FLOAT"):
        op.output_types([DataType.FLOAT, DataType.FLOAT])
    scalar = shuffle((1,), reshape_dims=())
    assert scalar.output_values([exprs((1,))], [[size]]) == [[size]]
    assert shuffle((2,), reshape_dims=(1, 2)).output_values([exprs((2,))], [[size, size]]) == [None]


def test_shuffle_attributes_and_misuse() -> None:
    network, (x,) = net((DataType.FLOAT, (2, 3, 4)))
    layer = network.add_shuffle(x)
    assert layer.reshape_dims is None and layer.zero_is_placeholder is True
    assert tuple(layer.first_transpose) == tuple(range(8)) == tuple(layer.second_transpose)
    layer.reshape_dims = Dims((0, -1))
    assert layer.reshape_dims == (0, -1)
    with pytest.raises(TypeMismatchError, match=r"IShuffleLayer.first_transpose must be a permutation.*got \(0, 0\)"):
        layer.first_transpose = (0, 0)
    with pytest.raises(ShapeError, match=r"IShuffleLayer.reshape_dims: a dimension must be >= -1"):
        layer.reshape_dims = (-2,)
    with pytest.raises(TypeMismatchError, match=r"IShuffleLayer.zero_is_placeholder must be a bool, got 1"):
        layer.zero_is_placeholder = 1
    cases = [
        ({"reshape_dims": (5, 5)}, r"cannot reshape \[2, 3, 4\] \(24 elements\) to \[5, 5\] \(25 elements\)"),
        ({"reshape_dims": (-1, -1)}, "have more than one -1"),
        ({"reshape_dims": (5, -1)}, "24 is not divisible by 5"),
        ({"reshape_dims": (0, 0, 0, 0)}, "reshape dimension 3 is 0 .* input has rank 3"),
        ({"first_transpose": (0, 1, 5)}, r"first_transpose \[0, 1, 5\] is not a permutation of the input's 3"),
        ({"reshape_dims": (6, 4), "second_transpose": (2, 0, 1)}, "second_transpose .* not a permutation"),
    ]
    for attributes, message in cases:
        with pytest.raises(ShapeError, match=message):
            shuffle(**attributes).output_shapes([exprs((2, 3, 4))], [None])


# --- concatenation --------------------------------------------------------------------------------
def test_concatenation_default_axis_and_symbolic_sum() -> None:
    network, (a, b, c) = net((DataType.FLOAT, (1, 2, 3, 4)), (DataType.FLOAT, (-1, 3)), (DataType.FLOAT, (-1, 3)))
    assert network.add_concatenation([a, a]).axis == 1  # TensorRT's default: rank - 3
    layer = network.add_concatenation([b, c])
    assert layer.axis == 0 and "axis" not in layer.to_operator().params
    x, y = symbol("x[0]"), symbol("y[0]")
    (shape,) = layer.to_operator().output_shapes([[x, constant(3)], [y, constant(3)]], [None, None])
    assert evaluate(shape, x=2, y=5) == [7, 3]
    layer.axis = 1
    (shape,) = layer.to_operator().output_shapes([[x, constant(3)], [x, constant(2)]], [None, None])
    assert shape == [x, constant(5)]
    values = layer.to_operator().output_values([exprs((2,)), exprs((1,))], [[x, y], [constant(4)]])
    assert values == [[x, y, constant(4)]]


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("dtype", [np.float16, np.int32, np.bool_])
def test_concatenation_kernel(axis: int, dtype: type) -> None:
    shapes = [[2, 3, 4], [2, 3, 4], [2, 3, 4]]
    for index, shape in enumerate(shapes):
        shape[axis] += index
    arrays = [(RNG.standard_normal(s) * 4).astype(dtype) for s in shapes]
    network, tensors = net(*[(from_nptype(dtype), tuple(s)) for s in shapes])
    layer = network.add_concatenation(tensors)
    layer.axis = axis
    np.testing.assert_array_equal(run(layer.to_operator(), *arrays), np.concatenate(arrays, axis=axis))


def test_concatenation_misuse() -> None:
    network, (a, b, c, i) = net(
        (DataType.FLOAT, (2, 3)), (DataType.FLOAT, (2, 4)), (DataType.FLOAT, (2, 3, 1)), (DataType.INT32, (2, 3))
    )
    layer = network.add_concatenation([a, b])  # valid once the axis is set: shapes are checked at build
    with pytest.raises(ShapeError, match=r"Layer\* 0\).*: dimension 1 of input 0 and input 1 \(axis is 0\) must match"):
        layer.to_operator().output_shapes([exprs((2, 3)), exprs((2, 4))], [None, None])
    layer.axis = 1
    assert layer.to_operator().output_shapes([exprs((2, 3)), exprs((2, 4))], [None, None]) == [exprs((2, 7))]
    with pytest.raises(ShapeError, match="input 1 has rank 3 but input 0 has rank 2"):
        network.add_concatenation([a, c]).to_operator().output_shapes([exprs((2, 3)), exprs((2, 3, 1))], [None] * 2)
    with pytest.raises(TypeMismatchError, match="add_concatenation: input 1 is INT32 but input 0 is FLOAT"):
        network.add_concatenation([a, i])
    with pytest.raises(NetworkError, match="add_concatenation: inputs is empty"):
        network.add_concatenation([])
    with pytest.raises(TypeMismatchError, match="add_concatenation: inputs must be a list of ITensor, got ITensor"):
        network.add_concatenation(a)  # type: ignore[arg-type]
    with pytest.raises(TypeMismatchError, match=r"IConcatenationLayer.axis must be an int in \[0, 8\), got -1"):
        layer.axis = -1
    layer.axis = 2
    with pytest.raises(ShapeError, match=r"concatenation axis 2 is out of range for inputs of rank 2 \(valid: 0..1\)"):
        layer.to_operator().output_shapes([exprs((2, 3)), exprs((2, 4))], [None, None])


# --- softmax --------------------------------------------------------------------------------------
def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    shifted = np.exp(x - x.max(axis=axis, keepdims=True))
    return shifted / shifted.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize(("shape", "axes", "axis"), [((2, 3, 4, 5), None, 1), ((6, 7), None, 0), ((2, 3, 4), 4, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_softmax_matches_reference(shape: tuple, axes: int | None, axis: int, dtype: type) -> None:
    network, (x,) = net((from_nptype(dtype), shape))
    layer = network.add_softmax(x)
    if axes is None:
        assert layer.axes == 1 << axis
    else:
        layer.axes = axes
    data = (RNG.standard_normal(shape) * 50).astype(dtype)
    out = run(layer.to_operator(), data)
    tolerance = 1e-6 if dtype == np.float32 else 2e-3
    np.testing.assert_allclose(out, _softmax(data.astype(np.float64), axis), rtol=tolerance, atol=tolerance)
    np.testing.assert_allclose(out.astype(np.float64).sum(axis=axis), 1.0, atol=tolerance * 10)


def test_softmax_misuse() -> None:
    network, (x, i) = net((DataType.FLOAT, (2, 3)), (DataType.INT32, (2, 3)))
    layer = network.add_softmax(x)
    with pytest.raises(NetworkError, match=r"ISoftMaxLayer.axes must have exactly one bit set .*got 0b11"):
        layer.axes = 3
    layer.axes = 1 << 4
    with pytest.raises(ShapeError, match="axes bitmask 0b10000 names an axis outside the input's 2 dimensions"):
        layer.to_operator().output_shapes([exprs((2, 3))], [None])
    with pytest.raises(TypeMismatchError, match="add_softmax: softmax takes FLOAT or HALF, got INT32"):
        network.add_softmax(i)


# --- reduce ---------------------------------------------------------------------------------------
REDUCE = {R.SUM: np.sum, R.PROD: np.prod, R.MAX: np.max, R.MIN: np.min, R.AVG: np.mean}


@pytest.mark.parametrize("op", list(REDUCE))
@pytest.mark.parametrize(("axes", "keep_dims"), [(0b010, True), (0b101, False), (0b111, False), (0b001, True)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_reduce_matches_numpy(op: R, axes: int, keep_dims: bool, dtype: type) -> None:
    if op == R.AVG and dtype == np.int32:
        return
    data = RNG.uniform(0.5, 1.5, (3, 4, 5)) if op == R.PROD else RNG.standard_normal((3, 4, 5)) * 10
    data = data.astype(dtype)
    network, (x,) = net((from_nptype(dtype), (3, 4, 5)))
    out = run(network.add_reduce(x, op, axes, keep_dims).to_operator(), data)
    chosen = tuple(a for a in range(3) if axes >> a & 1)
    expected = REDUCE[op](data.astype(np.float64), axis=chosen, keepdims=keep_dims)
    tolerance = {np.float32: 1e-5, np.float16: 1e-2, np.int32: 0}[dtype]
    assert out.dtype == dtype
    np.testing.assert_allclose(
        out, expected.astype(dtype) if dtype == np.int32 else expected, rtol=tolerance, atol=tolerance
    )


def test_reduce_half_sums_accumulate_in_float() -> None:
    data = np.full(4096, 0.1, dtype=np.float16)
    network, (x,) = net((DataType.HALF, (4096,)))
    out = run(network.add_reduce(x, R.SUM, 1, False).to_operator(), data)
    assert abs(float(out) - 4096 * float(np.float16(0.1))) < 1.0


def test_reduce_symbolic_shapes_and_misuse() -> None:
    network, (x, i) = net((DataType.FLOAT, (-1, 3, 4)), (DataType.INT32, (2, 3)))
    layer = network.add_reduce(x, R.MAX, 0b101, True)
    n = symbol("x[0]")
    assert layer.to_operator().output_shapes([[n, constant(3), constant(4)]], [None]) == [exprs((1, 3, 1))]
    layer.keep_dims, layer.axes = False, 0b110
    assert layer.to_operator().output_shapes([[n, constant(3), constant(4)]], [None]) == [[n]]
    with pytest.raises(ShapeError, match="add_reduce: axes bitmask 0b1000 names an axis outside the input's 2 dim"):
        network.add_reduce(i, R.SUM, 0b1000, False)
    with pytest.raises(TypeMismatchError, match="reduce AVG takes FLOAT, HALF, got INT32"):
        network.add_reduce(i, R.AVG, 1, False)
    with pytest.raises(TypeMismatchError, match=r"add_reduce: axes must be an int bitmask in \[0, 256\), got -1"):
        network.add_reduce(x, R.SUM, -1, False)
    with pytest.raises(TypeMismatchError, match="add_reduce: keep_dims must be a bool, got 1"):
        network.add_reduce(x, R.SUM, 1, 1)  # type: ignore[arg-type]
    with pytest.raises(TypeMismatchError, match="add_reduce: op must be a value of the ReduceOperation enum"):
        network.add_reduce(x, "SUM", 1, False)  # type: ignore[arg-type]
