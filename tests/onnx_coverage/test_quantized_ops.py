"""QLinearConv, QLinearMatMul, ConvInteger, MatMulInteger, DynamicQuantizeLinear against onnxruntime and
ONNX's reference, bit for bit, and their misuse."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import plugrt
from plugrt.onnx.importers.base import OnnxImportError
from plugrt.ops.integer_linear import IntegerMatrixMultiplyOperator

ort = pytest.importorskip("onnxruntime")
F, U8, I8, I32 = TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8, TensorProto.INT32
NP = {U8: np.uint8, I8: np.int8}
RANGE = {U8: (0, 256), I8: (-128, 128)}


def make(node, runtime, constants, outputs, opset=21):
    """A one-node model: ``runtime`` {name: array} are graph inputs, ``constants`` initializers."""
    inputs = [
        helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in runtime.items()
    ]
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in constants.items()]
    outs = [helper.make_tensor_value_info(name, elem, None) for name, elem in outputs]
    model = helper.make_model(
        helper.make_graph([node], "q", inputs, outs, inits), opset_imports=[helper.make_opsetid("", opset)]
    )
    model.ir_version = 10
    return model


def run_all(model, feeds):
    ours = plugrt.compile(model)(feeds)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    theirs = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    return ours, theirs


def ints(rng, elem, shape, low=None, high=None):
    lo, hi = RANGE[elem]
    return rng.integers(lo if low is None else low, hi if high is None else high, shape).astype(NP[elem])


def weights(rng, at, bt, shape):
    """INT8 weights of a UINT8 activation use 7 bits, as onnxruntime's quantizer makes them: its AVX2
    UINT8 x INT8 kernels add pairs of products in saturating INT16 (a full-range pair can overflow)."""
    return ints(rng, bt, shape, -64, 64) if (at, bt) == (U8, I8) else ints(rng, bt, shape)


@pytest.mark.parametrize(("xt", "wt", "yt"), [(U8, I8, U8), (U8, U8, U8), (I8, I8, I8)])
def test_qlinear_conv_matches_onnxruntime(xt, wt, yt):
    rng = np.random.default_rng(0)
    maps, channels = 8, 128  # 64 * 3 * 3 = 576 products per output: more than one exact float32 block
    x = ints(rng, xt, (2, channels, 9, 7))
    w_zero = 0 if wt == I8 else 128  # onnxruntime takes one zero point for the weights
    consts = {
        "x_scale": np.float32(0.02),
        "x_zero": NP[xt](7 if xt == U8 else -3),
        "w": weights(rng, xt, wt, (maps, channels // 2, 3, 3)),
        "w_scale": rng.uniform(0.001, 0.01, maps).astype(np.float32),
        "w_zero": np.full(maps, w_zero, NP[wt]),
        "y_scale": np.float32(0.37),
        "y_zero": NP[yt](120 if yt == U8 else 5),
        "bias": rng.integers(-5000, 5000, maps).astype(np.int32),
    }
    node = helper.make_node(
        "QLinearConv",
        ["x", "x_scale", "x_zero", "w", "w_scale", "w_zero", "y_scale", "y_zero", "bias"],
        ["y"],
        pads=[1, 0, 1, 2],
        strides=[2, 1],
        group=2,
    )
    model = make(node, {"x": x}, consts, [("y", yt)], opset=10)
    ours, theirs = run_all(model, {"x": x})
    assert ours["y"].dtype == NP[yt]
    np.testing.assert_array_equal(ours["y"], theirs["y"])
    np.testing.assert_array_equal(ours["y"], ReferenceEvaluator(model).run(None, {"x": x})[0])
    assert len(np.unique(ours["y"])) > 20  # not saturated into a few values


@pytest.mark.parametrize(("at", "bt"), [(U8, I8), (U8, U8), (I8, I8)])
@pytest.mark.parametrize("shapes", [((5, 300), (300, 7)), ((2, 3, 40), (40, 6)), ((40,), (2, 40, 3))])
def test_qlinear_matmul_matches_onnxruntime(at, bt, shapes):
    rng = np.random.default_rng(1)
    a, b = ints(rng, at, shapes[0]), weights(rng, at, bt, shapes[1])
    consts = {
        "a_scale": np.float32(0.05),
        "a_zero": NP[at](100 if at == U8 else -7),
        "b_scale": np.float32(0.003),
        "b_zero": NP[bt](128 if bt == U8 else 0),
        "y_scale": np.float32(0.9 if shapes[0][-1] == 300 else 0.11),
        "y_zero": NP[at](90 if at == U8 else 2),
    }
    node = helper.make_node(
        "QLinearMatMul", ["a", "a_scale", "a_zero", "b", "b_scale", "b_zero", "y_scale", "y_zero"], ["y"]
    )
    ours, theirs = run_all(make(node, {"a": a, "b": b}, consts, [("y", at)]), {"a": a, "b": b})
    np.testing.assert_array_equal(ours["y"], theirs["y"])
    assert len(np.unique(ours["y"])) > min(10, ours["y"].size // 2)  # not saturated into a few values


def test_qlinear_matmul_per_column_and_per_row_quantization_matches_numpy():
    # onnxruntime takes per-column b only, ONNX's reference evaluator no per-row a: NumPy, as the spec reads
    rng = np.random.default_rng(2)
    feeds = {
        "a": ints(rng, U8, (4, 50)),
        "a_scale": rng.uniform(0.01, 0.05, 4).astype(np.float32),
        "a_zero": ints(rng, U8, (4,)),
        "b": ints(rng, I8, (50, 6)),
        "b_scale": rng.uniform(0.001, 0.01, 6).astype(np.float32),
        "b_zero": ints(rng, I8, (6,), -10, 10),
        "y_scale": np.array([0.2], np.float32),
        "y_zero": np.array([128], np.uint8),
    }
    node = helper.make_node("QLinearMatMul", list(feeds), ["y"])
    got = plugrt.compile(make(node, feeds, {}, [("y", U8)]))(feeds)["y"]
    acc = (feeds["a"].astype(np.int64) - feeds["a_zero"][:, None]) @ (feeds["b"].astype(np.int64) - feeds["b_zero"])
    multiplier = feeds["a_scale"][:, None] * feeds["b_scale"] / feeds["y_scale"]
    expected = np.clip(np.rint(acc.astype(np.float32) * multiplier) + 128, 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(got, expected)
    assert len(np.unique(got)) > 10


def test_integer_ops_are_exact_in_int32_against_onnxruntime():
    rng = np.random.default_rng(3)
    a, b = ints(rng, U8, (3, 2, 700)), weights(rng, U8, I8, (700, 5))
    node = helper.make_node("MatMulInteger", ["a", "b", "az"], ["y"])
    ours, theirs = run_all(make(node, {"a": a, "b": b}, {"az": np.uint8(3)}, [("y", I32)], opset=10), {"a": a, "b": b})
    assert ours["y"].dtype == np.int32
    np.testing.assert_array_equal(ours["y"], theirs["y"])
    expected = (a.astype(np.int64) - 3) @ b.astype(np.int64)
    np.testing.assert_array_equal(ours["y"], expected)

    x, w = ints(rng, U8, (1, 32, 6, 6)), ints(rng, U8, (4, 32, 3, 3))
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], pads=[1, 1, 1, 1], dilations=[2, 1])
    consts = {"xz": np.uint8(200), "wz": np.uint8(17)}
    ours, theirs = run_all(make(node, {"x": x, "w": w}, consts, [("y", I32)], opset=10), {"x": x, "w": w})
    np.testing.assert_array_equal(ours["y"], theirs["y"])


def test_conv_integer_per_channel_weight_zero_points_match_the_reference():
    # onnxruntime takes one weight zero point only; ONNX allows one per output channel
    rng = np.random.default_rng(4)
    feeds = {
        "x": ints(rng, I8, (2, 3, 5, 5)),
        "w": ints(rng, I8, (4, 3, 2, 2)),
        "xz": np.int8(-4),
        "wz": np.array([0, 5, -9, 100], np.int8),
    }
    node = helper.make_node("ConvInteger", list(feeds), ["y"], strides=[2, 2], auto_pad="SAME_UPPER")
    model = make(node, feeds, {}, [("y", I32)], opset=10)
    np.testing.assert_array_equal(plugrt.compile(model)(feeds)["y"], ReferenceEvaluator(model).run(None, feeds)[0])


@pytest.mark.parametrize(
    "x",
    [
        np.array([-3.0, 0.5, 2.5, 7.0], np.float32),
        np.zeros(4, np.float32),
        np.array([[1.0, 2.0], [0.25, 6.0]], np.float32),  # all positive: the range still includes 0
        np.linspace(-9.0, -1.0, 12, dtype=np.float32).reshape(3, 4),
    ],
)
def test_dynamic_quantize_linear_matches_onnxruntime(x):
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
    ours, theirs = run_all(make(node, {"x": x}, {}, [("y", U8), ("s", F), ("z", U8)], opset=11), {"x": x})
    for name in ("y", "s", "z"):
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)
    assert ours["s"].shape == () and ours["z"].dtype == np.uint8


def test_requantize_rounds_half_to_even_and_saturates():
    # a = [1, 3, 5, -1, 200] (zero point 0), b = 1: sums times 0.5 are 0.5, 1.5, 2.5, -0.5, 100
    feeds = {"a": np.array([[1], [3], [5], [-1], [120]], np.int8), "b": np.array([[1]], np.int8)}
    consts = {"s": np.float32(0.5), "z": np.int8(0), "one": np.float32(1.0), "yz": np.int8(-60)}
    node = helper.make_node("QLinearMatMul", ["a", "s", "z", "b", "one", "z", "one", "yz"], ["y"])
    got = plugrt.compile(make(node, feeds, consts, [("y", I8)]))(feeds)["y"]
    assert got.reshape(-1).tolist() == [-60, -58, -58, -60, 0]  # 0, 2, 2, -0 then +(-60); 60 - 60


# --- misuse ---------------------------------------------------------------------------------------
def _qlinear_conv(overrides):
    consts = {
        "x_scale": np.float32(0.1),
        "x_zero": np.uint8(0),
        "w": np.ones((3, 2, 1, 1), np.int8),
        "w_scale": np.ones(3, np.float32),
        "w_zero": np.zeros(3, np.int8),
        "y_scale": np.float32(1.0),
        "y_zero": np.uint8(0),
    }
    consts.update(overrides)
    node = helper.make_node(
        "QLinearConv", ["x", "x_scale", "x_zero", "w", "w_scale", "w_zero", "y_scale", "y_zero"], ["y"], name="qconv"
    )
    return make(node, {"x": np.zeros((1, 2, 4, 4), np.uint8)}, consts, [("y", U8)], opset=10)


def test_zero_point_of_the_wrong_type_names_the_node_and_the_input():
    with pytest.raises(
        OnnxImportError,
        match=r"name: 'qconv' and operator: QLinearConv.*: x_zero_point \(input 2, 'x_zero'\) "
        r"must have x's type UINT8, got INT8",
    ):
        plugrt.compile(_qlinear_conv({"x_zero": np.int8(0)}))


def test_per_channel_scale_of_the_wrong_length_names_the_node_and_the_input():
    with pytest.raises(
        OnnxImportError,
        match=r"name: 'qconv' and operator: QLinearConv.*: w_scale \(input 4, 'w_scale'\) has "
        r"shape \[2\]; it takes one value \(per tensor\) or 3 \(one per output",
    ):
        plugrt.compile(_qlinear_conv({"w_scale": np.ones(2, np.float32)}))
    with pytest.raises(OnnxImportError, match=r"w_zero_point \(input 5, 'w_zero'\) has shape \[4\]"):
        plugrt.compile(_qlinear_conv({"w_zero": np.zeros(4, np.int8)}))


def test_bias_and_output_zero_point_misuse_name_the_input():
    with pytest.raises(OnnxImportError, match=r"y_zero_point \(input 7, 'y_zero'\) must be INT8 or UINT8, got INT32"):
        plugrt.compile(_qlinear_conv({"y_zero": np.int32(0)}))
    with pytest.raises(OnnxImportError, match=r"y_scale \(input 6, 'y_scale'\) has shape \[2\]"):
        plugrt.compile(_qlinear_conv({"y_scale": np.ones(2, np.float32)}))


def test_matmul_integer_per_row_zero_point_of_the_wrong_length_and_float_operand():
    feeds = {"a": np.zeros((4, 3), np.uint8), "b": np.zeros((3, 2), np.uint8)}
    node = helper.make_node("MatMulInteger", ["a", "b", "az"], ["y"], name="mmi")
    with pytest.raises(
        OnnxImportError,
        match=r"name: 'mmi' and operator: MatMulInteger.*: a_zero_point \(input 2, 'az'\) has "
        r"shape \[3\]; for an operand of shape \[4, 3\] it takes one value",
    ):
        plugrt.compile(make(node, feeds, {"az": np.zeros(3, np.uint8)}, [("y", I32)], opset=10))
    floats = {"a": np.zeros((4, 3), np.float32), "b": feeds["b"]}
    with pytest.raises(OnnxImportError, match=r"A \(input 0, 'a'\) must be INT8 or UINT8, got FLOAT"):
        plugrt.compile(make(helper.make_node("MatMulInteger", ["a", "b"], ["y"]), floats, {}, [("y", I32)], opset=10))


def test_operator_rejects_a_product_bound_out_of_range():
    with pytest.raises(plugrt.PlugrtError, match="product_bound must be in"):
        IntegerMatrixMultiplyOperator({"op0": "NONE", "op1": "NONE", "product_bound": 70000})
