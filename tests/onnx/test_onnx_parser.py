"""OnnxParser: model checks, error records, naming, types, folding, and standard ops against onnxruntime."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx_helpers import Collect, errors, model, onnxruntime_outputs, parse, single, tensor_info

import plugrt as trt
from plugrt.onnx import ErrorCode, OnnxParser
from plugrt.onnx.compile import compile as compile_model

F = TensorProto.FLOAT


def _relu_model(opset: int = 17) -> onnx.ModelProto:
    return model(
        [helper.make_node("Relu", ["x"], ["y"], name="act")],
        [tensor_info("x", F, ["batch", 4])],
        [tensor_info("y", F, ["batch", 4])],
        opset=opset,
    )


# --- the happy path -------------------------------------------------------------------------
def test_inputs_outputs_and_names_follow_the_model() -> None:
    ok, parser, network = parse(_relu_model())
    assert ok, errors(parser)
    assert network.num_inputs == 1 and network.num_outputs == 1
    x = network.get_input(0)
    assert x.name == "x" and tuple(x.shape) == (-1, 4) and x.dtype == trt.float32
    assert network.get_output(0).name == "y"
    assert parser.num_errors == 0


def test_unsorted_nodes_are_imported_in_topological_order() -> None:
    nodes = [helper.make_node("Neg", ["a"], ["y"]), helper.make_node("Relu", ["x"], ["a"])]
    proto = model(nodes, [tensor_info("x", F, [3])], [tensor_info("y", F, [3])])
    x = np.array([-1.0, 0.5, 2.0], dtype=np.float32)
    np.testing.assert_array_equal(compile_model(proto)({"x": x})["y"], -np.maximum(x, 0))


def test_double_input_is_float_with_a_warning_and_the_boundary_converts() -> None:
    proto = model(
        [helper.make_node("Mul", ["x", "x"], ["y"])],
        [tensor_info("x", TensorProto.DOUBLE, [2])],
        [tensor_info("y", TensorProto.DOUBLE, [2])],
    )
    logger = Collect()
    ok, _, network = parse(proto, logger)
    assert ok and network.get_input(0).dtype == trt.float32
    assert any("'x' is DOUBLE" in m for m in logger.at(trt.Severity.WARNING))
    y = compile_model(proto)({"x": np.array([1.5, -2.0])})["y"]
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, [2.25, 4.0])


def test_output_that_is_an_initializer_or_constant_gets_its_own_tensor() -> None:
    proto = model(
        [helper.make_node("Identity", ["x"], ["y"]), helper.make_node("Constant", [], ["c"], value_ints=[1, 2])],
        [tensor_info("x", F, [2])],
        [tensor_info("y", F, [2]), tensor_info("c", TensorProto.INT64, [2]), tensor_info("w", F, [1])],
        initializers={"w": np.float32([7.0])},
    )
    out = compile_model(proto)({"x": np.float32([1, 2])})
    np.testing.assert_array_equal(out["y"], [1, 2])
    np.testing.assert_array_equal(out["c"], [1, 2])
    np.testing.assert_array_equal(out["w"], [7.0])


def test_supports_operator_and_supported_operators() -> None:
    parser = OnnxParser(trt.Builder(Collect()).create_network(0), Collect())
    assert parser.supports_operator("Relu") and parser.supports_operator("MatMul")
    assert not parser.supports_operator("NoSuchOp")
    assert "Softmax" in parser.supported_operators()


def test_static_shape_chain_is_folded_to_constants() -> None:
    # Shape -> Gather -> Unsqueeze -> Concat -> Cast feeding Reshape: with static shapes no layer computes it.
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus_one"], ["shape"], axis=0),
        helper.make_node("Cast", ["shape"], ["shape64"], to=TensorProto.INT64),
        helper.make_node("Reshape", ["x", "shape64"], ["y"]),
    ]
    inits = {"zero": np.int64(0), "axes": np.int64([0]), "minus_one": np.int64([-1])}
    proto = model(nodes, [tensor_info("x", F, [2, 3, 4])], [tensor_info("y", F, [2, 12])], inits, opset=13)
    compiled = compile_model(proto)
    kinds = {layer.kind for layer in compiled.engine.plan.layers}
    assert kinds <= {"shuffle", "constant"}, kinds
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(compiled({"x": x})["y"], x.reshape(2, 12))


def test_dynamic_shape_chain_runs_through_shape_values() -> None:
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus_one"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    inits = {"zero": np.int64(0), "axes": np.int64([0]), "minus_one": np.int64([-1])}
    proto = model(nodes, [tensor_info("x", F, ["n", 3, 4])], [tensor_info("y", F, ["n", 12])], inits, opset=13)
    compiled = compile_model(proto, shapes={"x": ((1, 3, 4), (2, 3, 4), (6, 3, 4))})
    for n in (1, 4, 6):
        x = np.random.default_rng(n).standard_normal((n, 3, 4)).astype(np.float32)
        np.testing.assert_array_equal(compiled({"x": x})["y"], x.reshape(n, 12))


# --- errors ---------------------------------------------------------------------------------
def test_error_records_name_node_operator_code_and_reason() -> None:
    proto = model(
        [helper.make_node("Relu", ["x"], ["a"], name="first"), helper.make_node("NoSuchOp", ["a"], ["y"], name="odd")],
        [tensor_info("x", F, [2])],
        [tensor_info("y", F, [2])],
    )
    logger = Collect()
    ok, parser, _ = parse(proto, logger)
    assert not ok and parser.num_errors == 1
    error = parser.get_error(0)
    assert error.code() == ErrorCode.UNSUPPORTED_NODE
    assert (error.node(), error.node_name(), error.node_operator()) == (1, "odd", "NoSuchOp")
    assert "no built-in importer" in error.desc() and "no plugin creator for 'NoSuchOp'" in error.desc()
    assert "In node 1 with name: 'odd' and operator: NoSuchOp" in str(error)
    assert str(error) in logger.at(trt.Severity.ERROR)
    parser.clear_errors()
    assert parser.num_errors == 0
    with pytest.raises(IndexError, match="holds 0 errors"):
        parser.get_error(0)


def test_independent_problems_are_all_reported_and_dependents_skipped() -> None:
    nodes = [
        helper.make_node("Bad1", ["x"], ["a"]),
        helper.make_node("Relu", ["a"], ["b"]),  # depends on a failed node: skipped silently
        helper.make_node("Bad2", ["x"], ["c"]),
    ]
    proto = model(nodes, [tensor_info("x", F, [2])], [tensor_info("b", F, [2]), tensor_info("c", F, [2])])
    ok, parser, _ = parse(proto)
    assert not ok
    assert [parser.get_error(i).node_operator() for i in range(parser.num_errors)] == ["Bad1", "Bad2"]


@pytest.mark.parametrize("cut", [1, 7, 20, 45, -30, -3])
def test_truncated_bytes_are_a_parse_error(cut: int) -> None:
    data = _relu_model().SerializeToString()
    ok, parser, _ = parse(data[:cut])
    assert not ok and parser.num_errors >= 1


def test_every_truncation_and_bit_flip_gives_errors_never_exceptions() -> None:
    data = bytearray(_relu_model().SerializeToString())
    rng = np.random.default_rng(0)
    for cut in range(0, len(data), 3):
        parse(bytes(data[:cut]))  # must not raise
    for _ in range(200):
        damaged = bytearray(data)
        damaged[int(rng.integers(len(damaged)))] ^= 1 << int(rng.integers(8))
        parse(bytes(damaged))


def test_garbage_and_wrong_argument_types() -> None:
    ok, parser, _ = parse(b"\xff\xfe not an onnx model at all")
    assert not ok and parser.get_error(0).code() == ErrorCode.MODEL_DESERIALIZE_FAILED
    network = trt.Builder(Collect()).create_network(0)
    parser = OnnxParser(network, Collect())
    assert not parser.parse("model.onnx")  # a path, not bytes
    assert "use parse_from_file" in parser.get_error(0).desc()
    assert not parser.parse(12345)
    with pytest.raises(trt.TypeMismatchError, match="INetworkDefinition"):
        OnnxParser("not a network", Collect())  # type: ignore[arg-type]


def test_empty_graph_is_an_error() -> None:
    proto = model([], [], [])
    ok, parser, _ = parse(proto)
    assert not ok and "no outputs" in errors(parser)[0]
    ok, parser, _ = parse(onnx.ModelProto())
    assert not ok and "no graph" in errors(parser)[0]


def test_missing_input_producer_is_an_error_naming_the_node_and_tensor() -> None:
    proto = model(
        [helper.make_node("Add", ["x", "ghost"], ["y"], name="adder")],
        [tensor_info("x", F, [2])],
        [tensor_info("y", F, [2])],
    )
    ok, parser, _ = parse(proto)
    assert not ok
    error = parser.get_error(0)
    assert error.code() == ErrorCode.INVALID_GRAPH and error.node_name() == "adder"
    assert "'ghost' is not produced" in error.desc()


def test_cycle_is_an_error() -> None:
    nodes = [
        helper.make_node("Add", ["x", "b"], ["a"], name="n0"),
        helper.make_node("Relu", ["a"], ["b"], name="n1"),
        helper.make_node("Neg", ["a"], ["y"], name="n2"),
    ]
    proto = model(nodes, [tensor_info("x", F, [2])], [tensor_info("y", F, [2])])
    ok, parser, _ = parse(proto)
    assert not ok
    text = "\n".join(errors(parser))
    assert "cycle" in text and "n0" in text and "n1" in text


def test_name_produced_twice_is_an_error() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["y"])]
    ok, parser, _ = parse(model(nodes, [tensor_info("x", F, [2])], [tensor_info("y", F, [2])]))
    assert not ok and "already produced" in errors(parser)[0]


@pytest.mark.parametrize("opset", [5, 6, 999])
def test_unsupported_opset_is_an_error(opset: int) -> None:
    proto = _relu_model()
    proto.opset_import[0].version = opset
    ok, parser, _ = parse(proto)
    assert not ok
    assert parser.get_error(0).code() == ErrorCode.UNSUPPORTED_GRAPH
    assert f"opset {opset}" in parser.get_error(0).desc()


def test_missing_default_opset_is_an_error() -> None:
    proto = _relu_model()
    del proto.opset_import[:]
    ok, parser, _ = parse(proto)
    assert not ok and "opset_import" in errors(parser)[0]


def test_input_without_shape_or_with_unsupported_type() -> None:
    no_shape = model([helper.make_node("Relu", ["x"], ["y"])], [tensor_info("x", F, None)], [tensor_info("y", F, [1])])
    ok, parser, _ = parse(no_shape)
    assert not ok and "no shape" in errors(parser)[0]
    strings = model(
        [helper.make_node("Identity", ["x"], ["y"])],
        [tensor_info("x", TensorProto.STRING, [1])],
        [tensor_info("y", TensorProto.STRING, [1])],
    )
    ok, parser, _ = parse(strings)
    assert not ok and "STRING" in errors(parser)[0]


def test_output_never_produced_is_an_error() -> None:
    proto = model([helper.make_node("Relu", ["x"], ["y"])], [tensor_info("x", F, [2])], [tensor_info("z", F, [2])])
    ok, parser, _ = parse(proto)
    assert not ok and "'z' is not produced" in errors(parser)[0]


def test_bad_node_attributes_are_errors_not_exceptions() -> None:
    proto = model(
        [helper.make_node("Concat", ["x", "x"], ["y"], axis=5)],
        [tensor_info("x", F, [2])],
        [tensor_info("y", F, [4])],
    )
    ok, parser, _ = parse(proto)
    assert not ok and "axis 5 is out of range" in errors(parser)[0]
    proto = model(
        [helper.make_node("Concat", ["x", "x"], ["y"])], [tensor_info("x", F, [2])], [tensor_info("y", F, [4])]
    )
    ok, parser, _ = parse(proto)
    assert not ok and "required attribute 'axis'" in errors(parser)[0]


def test_parse_from_file_and_missing_file(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "relu.onnx")
    onnx.save(_relu_model(), path)
    network = trt.Builder(Collect()).create_network(0)
    parser = OnnxParser(network, Collect())
    assert parser.parse_from_file(path), errors(parser)
    assert not parser.parse_from_file(os.path.join(str(tmp_path), "absent.onnx"))
    assert parser.get_error(0).code() == ErrorCode.MODEL_DESERIALIZE_FAILED


def test_external_weights_are_read_next_to_the_file(tmp_path: object) -> None:
    weights = np.arange(4096, dtype=np.float32)
    proto = model(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        [tensor_info("x", F, [4096])],
        [tensor_info("y", F, [4096])],
        {"w": weights},
    )
    path = os.path.join(str(tmp_path), "ext.onnx")
    onnx.save(proto, path, save_as_external_data=True, all_tensors_to_one_file=True, size_threshold=16)
    compiled = compile_model(path)
    np.testing.assert_array_equal(compiled({"x": np.ones(4096, np.float32)})["y"], weights + 1)


def test_local_functions_are_inlined() -> None:
    double_relu = helper.make_function(
        "local",
        "DoubleRelu",
        ["a"],
        ["b"],
        [helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Add", ["r", "r"], ["b"])],
        [helper.make_opsetid("", 17)],
    )
    proto = model(
        [helper.make_node("DoubleRelu", ["x"], ["y"], domain="local")],
        [tensor_info("x", F, [3])],
        [tensor_info("y", F, [3])],
        extra_opsets=[("local", 1)],
    )
    proto.functions.append(double_relu)
    x = np.float32([-1, 0.5, 2])
    np.testing.assert_array_equal(compile_model(proto)({"x": x})["y"], 2 * np.maximum(x, 0))


def test_supports_model_leaves_the_network_untouched() -> None:
    network = trt.Builder(Collect()).create_network(0)
    parser = OnnxParser(network, Collect())
    ok, subgraphs = parser.supports_model(_relu_model().SerializeToString())
    assert ok and subgraphs == [([0], True)] and network.num_layers == 0


# --- standard ops against onnxruntime -------------------------------------------------------------
RNG = np.random.default_rng(7)


def _f(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _i(*shape: int, low: int = -5, high: int = 6) -> np.ndarray:
    return RNG.integers(low, high, shape).astype(np.int64)


def _b(*shape: int) -> np.ndarray:
    return RNG.integers(0, 2, shape).astype(bool)


CASES: list[tuple[str, str, dict, dict, dict, int]] = [
    # id, op, inputs, attributes, initializers, opset
    ("add_bcast", "Add", {"a": _f(2, 3, 4), "b": _f(4)}, {}, {}, 17),
    ("sub_scalar", "Sub", {"a": _f(2, 3), "b": _f()}, {}, {}, 17),
    ("mul_bcast_both", "Mul", {"a": _f(2, 1, 4), "b": _f(3, 1)}, {}, {}, 17),
    ("div_int_truncates", "Div", {"a": _i(5, low=-9, high=9), "b": np.int64([2, -3, 4, -2, 5])}, {}, {}, 17),
    ("pow_float_int", "Pow", {"a": np.abs(_f(3, 2)) + 0.5, "b": np.int32([2, 3])}, {}, {}, 17),
    ("max_nary", "Max", {"a": _f(2, 3), "b": _f(3), "c": _f(1, 1)}, {}, {}, 17),
    ("min_nary", "Min", {"a": _f(2, 3), "b": _f(3)}, {}, {}, 17),
    ("sum_nary", "Sum", {"a": _f(2, 3), "b": _f(2, 3), "c": _f(3)}, {}, {}, 17),
    ("mean_nary", "Mean", {"a": _f(2, 3), "b": _f(1, 3)}, {}, {}, 17),
    ("equal_int", "Equal", {"a": _i(4, 3), "b": _i(3)}, {}, {}, 17),
    ("greater", "Greater", {"a": _f(2, 3), "b": _f(3)}, {}, {}, 17),
    ("less_or_equal", "LessOrEqual", {"a": _i(3, 3), "b": _i(3)}, {}, {}, 17),
    ("greater_or_equal", "GreaterOrEqual", {"a": _f(3, 3), "b": _f(3, 1)}, {}, {}, 17),
    ("and", "And", {"a": _b(2, 3), "b": _b(3)}, {}, {}, 17),
    ("or", "Or", {"a": _b(2, 3), "b": _b(2, 1)}, {}, {}, 17),
    ("xor", "Xor", {"a": _b(4), "b": _b(4)}, {}, {}, 17),
    ("not", "Not", {"a": _b(2, 2)}, {}, {}, 17),
    ("mod_int", "Mod", {"a": _i(6, low=-9, high=9), "b": np.int64([2, -3, 4, -2, 5, 7])}, {}, {}, 17),
    ("fmod_float", "Mod", {"a": _f(6) * 5, "b": np.float32([2, -3, 4, -2, 5, 7])}, {"fmod": 1}, {}, 17),
    ("bitshift", "BitShift", {"a": np.uint8([1, 2, 128]), "b": np.uint8([1, 2, 3])}, {"direction": "RIGHT"}, {}, 17),
    ("relu", "Relu", {"x": _f(3, 4)}, {}, {}, 17),
    ("leaky_relu", "LeakyRelu", {"x": _f(3, 4)}, {"alpha": 0.2}, {}, 17),
    ("elu", "Elu", {"x": _f(3, 4)}, {"alpha": 0.7}, {}, 17),
    ("selu", "Selu", {"x": _f(3, 4)}, {}, {}, 17),
    ("sigmoid", "Sigmoid", {"x": _f(3, 4)}, {}, {}, 17),
    ("hard_sigmoid", "HardSigmoid", {"x": _f(3, 4)}, {"alpha": 0.3}, {}, 17),
    ("tanh", "Tanh", {"x": _f(3, 4)}, {}, {}, 17),
    ("softplus", "Softplus", {"x": _f(3, 4) * 30}, {}, {}, 17),
    ("softsign", "Softsign", {"x": _f(3, 4)}, {}, {}, 17),
    ("thresholded_relu", "ThresholdedRelu", {"x": _f(3, 4)}, {"alpha": 0.5}, {}, 17),
    ("gelu_tanh", "Gelu", {"x": _f(3, 4)}, {"approximate": "tanh"}, {}, 20),
    ("gelu", "Gelu", {"x": _f(3, 4)}, {}, {}, 20),
    ("celu", "Celu", {"x": _f(3, 4)}, {"alpha": 2.0}, {}, 17),
    ("hard_swish", "HardSwish", {"x": _f(3, 4) * 4}, {}, {}, 17),
    ("mish", "Mish", {"x": _f(3, 4)}, {}, {}, 18),
    ("shrink", "Shrink", {"x": _f(3, 4)}, {"lambd": 0.4, "bias": 0.1}, {}, 17),
    ("erf", "Erf", {"x": _f(3, 4)}, {}, {}, 17),
    ("clip_inputs", "Clip", {"x": _f(3, 4)}, {}, {"lo": np.float32(-0.5), "hi": np.float32(0.7)}, 13),
    ("clip_attrs", "Clip", {"x": _f(3, 4)}, {"min": -0.2, "max": 0.3}, {}, 10),
    ("clip_int", "Clip", {"x": _i(3, 4)}, {}, {"lo": np.int64(-2), "hi": np.int64(3)}, 13),
    ("abs_int", "Abs", {"x": _i(3, 4)}, {}, {}, 17),
    ("neg", "Neg", {"x": _f(3, 4)}, {}, {}, 17),
    ("exp", "Exp", {"x": _f(3, 4)}, {}, {}, 17),
    ("log", "Log", {"x": np.abs(_f(3, 4)) + 0.1}, {}, {}, 17),
    ("sqrt", "Sqrt", {"x": np.abs(_f(3, 4))}, {}, {}, 17),
    ("reciprocal", "Reciprocal", {"x": np.abs(_f(3, 4)) + 0.5}, {}, {}, 17),
    ("sin", "Sin", {"x": _f(3, 4)}, {}, {}, 17),
    ("atan", "Atan", {"x": _f(3, 4)}, {}, {}, 17),
    ("ceil", "Ceil", {"x": _f(3, 4) * 3}, {}, {}, 17),
    ("floor", "Floor", {"x": _f(3, 4) * 3}, {}, {}, 17),
    ("round", "Round", {"x": np.float32([0.5, 1.5, 2.5, -0.5, -1.2, 2.7])}, {}, {}, 17),
    ("sign", "Sign", {"x": _f(3, 4)}, {}, {}, 17),
    ("isinf_pos", "IsInf", {"x": np.float32([np.inf, -np.inf, 1, np.nan])}, {"detect_negative": 0}, {}, 17),
    ("isnan", "IsNaN", {"x": np.float32([np.inf, -np.inf, 1, np.nan])}, {}, {}, 17),
    ("matmul_2d", "MatMul", {"a": _f(3, 4), "b": _f(4, 5)}, {}, {}, 17),
    ("matmul_vec_mat", "MatMul", {"a": _f(4), "b": _f(2, 4, 5)}, {}, {}, 17),
    ("matmul_mat_vec", "MatMul", {"a": _f(2, 3, 4), "b": _f(4)}, {}, {}, 17),
    ("matmul_vec_vec", "MatMul", {"a": _f(4), "b": _f(4)}, {}, {}, 17),
    ("matmul_batch_bcast", "MatMul", {"a": _f(2, 1, 3, 4), "b": _f(5, 4, 2)}, {}, {}, 17),
    ("reshape_zero_minus_one", "Reshape", {"x": _f(2, 3, 4)}, {}, {"s": np.int64([0, -1])}, 17),
    ("reshape_allowzero", "Reshape", {"x": _f(0, 3)}, {"allowzero": 1}, {"s": np.int64([3, 0])}, 17),
    ("transpose_default", "Transpose", {"x": _f(2, 3, 4)}, {}, {}, 17),
    ("transpose_perm", "Transpose", {"x": _f(2, 3, 4)}, {"perm": [1, 2, 0]}, {}, 17),
    ("concat_neg_axis", "Concat", {"a": _f(2, 3), "b": _f(2, 1)}, {"axis": -1}, {}, 17),
    ("cast_float_int", "Cast", {"x": _f(3, 4) * 3}, {"to": TensorProto.INT32}, {}, 17),
    ("cast_int_bool", "Cast", {"x": _i(5)}, {"to": TensorProto.BOOL}, {}, 17),
    ("cast_like", "CastLike", {"x": _f(4) * 3, "t": np.int64([1])}, {}, {}, 17),
    ("softmax_11_flattens", "Softmax", {"x": _f(2, 3, 4)}, {"axis": 1}, {}, 11),
    ("softmax_13", "Softmax", {"x": _f(2, 3, 4)}, {"axis": 1}, {}, 13),
    ("log_softmax", "LogSoftmax", {"x": _f(2, 3, 4) * 20}, {}, {}, 13),
    ("log_softmax_11", "LogSoftmax", {"x": _f(2, 3, 4)}, {"axis": 1}, {}, 11),
    ("hardmax", "Hardmax", {"x": _f(2, 3, 4)}, {"axis": 1}, {}, 13),
    ("hardmax_11", "Hardmax", {"x": _f(2, 3, 4)}, {"axis": 1}, {}, 11),
    ("reduce_sum_13_input", "ReduceSum", {"x": _f(2, 3, 4)}, {"keepdims": 0}, {"axes": np.int64([0, -1])}, 13),
    ("reduce_sum_all", "ReduceSum", {"x": _f(2, 3, 4)}, {}, {}, 13),
    ("reduce_sum_noop", "ReduceSum", {"x": _f(2, 3)}, {"noop_with_empty_axes": 1}, {}, 13),
    ("reduce_mean_attr", "ReduceMean", {"x": _f(2, 3, 4)}, {"axes": [1]}, {}, 13),
    ("reduce_max_18", "ReduceMax", {"x": _f(2, 3, 4)}, {"keepdims": 0}, {"axes": np.int64([1])}, 18),
    ("reduce_min_int", "ReduceMin", {"x": _i(2, 3)}, {"axes": [0]}, {}, 13),
    ("reduce_prod", "ReduceProd", {"x": _f(2, 3)}, {"axes": [1]}, {}, 13),
    ("reduce_l1", "ReduceL1", {"x": _f(2, 3)}, {"axes": [1]}, {}, 13),
    ("reduce_l2", "ReduceL2", {"x": _f(2, 3)}, {"axes": [1], "keepdims": 0}, {}, 13),
    ("reduce_log_sum", "ReduceLogSum", {"x": np.abs(_f(2, 3)) + 0.1}, {"axes": [0]}, {}, 13),
    ("reduce_log_sum_exp", "ReduceLogSumExp", {"x": _f(2, 3) * 50}, {"axes": [1], "keepdims": 0}, {}, 13),
    ("reduce_sum_square", "ReduceSumSquare", {"x": _f(2, 3)}, {"axes": [1]}, {}, 13),
    ("identity", "Identity", {"x": _f(2, 3)}, {}, {}, 17),
]


@pytest.mark.parametrize(("op", "inputs", "attrs", "inits", "opset"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_standard_op_matches_onnxruntime(op: str, inputs: dict, attrs: dict, inits: dict, opset: int) -> None:
    proto = single(op, inputs, attrs, inits, opset=opset)
    try:
        expected = onnxruntime_outputs(proto, inputs)
    except Exception:  # onnxruntime before 1.24 (the last for Python 3.10) fails noop_with_empty_axes
        if not attrs.get("noop_with_empty_axes"):
            raise
        expected = [inputs["x"]]  # ONNX: no axes and noop_with_empty_axes=1 is the identity
    got = compile_model(proto)(inputs)["out0"]
    assert got.dtype == expected[0].dtype and got.shape == expected[0].shape
    np.testing.assert_allclose(got, expected[0], rtol=1e-5, atol=1e-6)


def test_dropout_is_identity_with_an_all_true_mask() -> None:
    x = _f(3, 4)
    proto = single("Dropout", {"x": x}, {}, {"ratio": np.float32(0.3)}, num_outputs=2, opset=13)
    expected = onnxruntime_outputs(proto, {"x": x})
    out = compile_model(proto)({"x": x})
    np.testing.assert_array_equal(out["out0"], expected[0])
    np.testing.assert_array_equal(out["out1"], expected[1])


@pytest.mark.parametrize("attr", ["value_float", "value_floats", "value_int", "value_ints", "value"])
def test_constant_node_value_attributes(attr: str) -> None:
    values = {
        "value_float": 1.5,
        "value_floats": [1.0, 2.5],
        "value_int": 3,
        "value_ints": [4, 5],
        "value": onnx.numpy_helper.from_array(np.arange(6, dtype=np.int32).reshape(2, 3)),
    }
    proto = model(
        [helper.make_node("Constant", [], ["c"], **{attr: values[attr]})],
        [],
        [helper.make_tensor_value_info("c", TensorProto.UNDEFINED, None)],
    )
    expected = onnxruntime_outputs(proto, {})[0]
    got = compile_model(proto)({})["c"]
    np.testing.assert_array_equal(got, expected)


def test_constant_sparse_value() -> None:
    sparse = helper.make_sparse_tensor(
        onnx.numpy_helper.from_array(np.float32([5, 6])), onnx.numpy_helper.from_array(np.int64([1, 4])), [2, 3]
    )
    proto = model(
        [helper.make_node("Constant", [], ["c"], sparse_value=sparse)],
        [],
        [helper.make_tensor_value_info("c", F, [2, 3])],
    )
    np.testing.assert_array_equal(compile_model(proto)({})["c"], [[0, 5, 0], [0, 6, 0]])


def test_runtime_reshape_shape_is_a_clear_error() -> None:
    proto = model(
        [helper.make_node("Reshape", ["x", "s"], ["y"])],
        [tensor_info("x", F, [6]), tensor_info("s", TensorProto.INT64, [2])],
        [tensor_info("y", F, None)],
    )
    ok, parser, _ = parse(proto)
    assert not ok and "computed at run time" in errors(parser)[0]


# --- ops defined by ONNX functions ----------------------------------------------------------
def test_ops_without_an_importer_expand_into_their_onnx_function_body() -> None:
    scores = _f(3, 5)
    labels = np.int64([1, 4, 0])
    for op, attrs in (("NegativeLogLikelihoodLoss", {"reduction": "mean"}), ("SoftmaxCrossEntropyLoss", {})):
        proto = single(op, {"scores": scores, "labels": labels}, attrs, opset=17)
        expected = onnxruntime_outputs(proto, {"scores": scores, "labels": labels})[0]
        got = compile_model(proto)({"scores": scores, "labels": labels})["out0"]
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_an_importer_takes_precedence_over_the_function_body() -> None:
    ok, parser, network = parse(single("HardSwish", {"x": _f(4)}))
    assert ok, errors(parser)
    assert [type(layer).__name__ for layer in network] == ["IActivationLayer", "IElementWiseLayer"]


def test_errors_inside_a_function_body_name_the_node() -> None:
    proto = single("Bernoulli", {"x": np.float32([0.5, 0.5])})
    ok, parser, _ = parse(proto)
    assert not ok
    assert parser.get_error(0).node_operator() == "Bernoulli"
    assert "in its ONNX function body" in parser.get_error(0).desc()
