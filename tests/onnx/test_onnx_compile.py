"""plugrt.compile: an ONNX model as a callable engine, and the ONNX backend API."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx_helpers import model, tensor_info

import plugrt as trt
import plugrt.onnx.backend as backend
from plugrt.onnx.compile import CompiledModel
from plugrt.onnx.compile import compile as compile_model
from plugrt.onnx.importers.base import OnnxImportError

F = TensorProto.FLOAT


def _affine() -> onnx.ModelProto:
    w = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    return model(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        [tensor_info("x", F, ["batch", 4])],
        [tensor_info("y", F, ["batch", 3])],
        {"w": w},
    )


def _reference(x: np.ndarray) -> np.ndarray:
    return np.maximum(x @ (np.arange(12, dtype=np.float32).reshape(4, 3) / 10), 0)


def test_compile_from_path_bytes_and_proto(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "affine.onnx")
    onnx.save(_affine(), path)
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    for source in (path, _affine().SerializeToString(), _affine()):
        compiled = compile_model(source)
        assert compiled.input_names == ["x"] and compiled.output_names == ["y"]
        np.testing.assert_allclose(compiled({"x": x})["y"], _reference(x), rtol=1e-6)


def test_call_styles_dict_keywords_positional() -> None:
    compiled = compile_model(_affine())
    x = np.ones((3, 4), np.float32)
    for out in (compiled({"x": x}), compiled(x=x), compiled(x)):
        np.testing.assert_allclose(out["y"], _reference(x), rtol=1e-6)
    with pytest.raises(trt.TypeMismatchError, match="not mixed"):
        compiled(x, x=x)


def test_first_call_fixes_the_profile_and_shapes_widen_it() -> None:
    compiled = compile_model(_affine())
    assert compiled.engine is None
    compiled({"x": np.ones((2, 4), np.float32)})
    with pytest.raises(trt.ShapeError, match=r"input 'x' has shape \(5, 4\), outside the engine's profile \(min \(2, 4\), max \(2, 4\)\); pass shapes="):
        compiled({"x": np.ones((5, 4), np.float32)})
    wide = compile_model(_affine(), shapes={"x": ((1, 4), (4, 4), (16, 4))})
    for batch in (1, 7, 16):
        x = np.random.default_rng(batch).standard_normal((batch, 4)).astype(np.float32)
        np.testing.assert_allclose(wide(x=x)["y"], _reference(x), rtol=1e-6)


def test_wrong_names_dtypes_and_shapes_are_clear_errors() -> None:
    compiled = compile_model(_affine(), shapes={"x": ((1, 4), (2, 4), (4, 4))})
    with pytest.raises(trt.TypeMismatchError, match=r"unknown input name\(s\) \['z'\].*inputs are \['x'\]"):
        compiled({"z": np.ones((2, 4), np.float32)})
    with pytest.raises(trt.TypeMismatchError, match=r"missing input\(s\) \['x'\]"):
        compiled({})
    with pytest.raises(trt.TypeMismatchError, match="'x' must be a float32 array, got int64"):
        compiled({"x": np.ones((2, 4), np.int64)})
    with pytest.raises(trt.ShapeError, match=r"'x' must have shape \('\?', 4\)"):
        compiled({"x": np.ones((2, 5), np.float32)})
    with pytest.raises(trt.ShapeError, match="must have shape"):
        compiled({"x": np.ones(4, np.float32)})
    with pytest.raises(trt.ShapeError, match="not inputs"):
        compile_model(_affine(), shapes={"nope": ((1,), (1,), (1,))})
    with pytest.raises(trt.ShapeError, match="dynamic dimensions"):
        CompiledModel(_affine(), shapes={})
    with pytest.raises(trt.TypeMismatchError, match="device"):
        compile_model(_affine(), device="tpu")


def test_lists_are_converted_to_the_declared_type() -> None:
    compiled = compile_model(_affine())
    out = compiled({"x": [[1, 2, 3, 4]]})
    np.testing.assert_allclose(out["y"], _reference(np.float32([[1, 2, 3, 4]])), rtol=1e-6)


def test_unimportable_model_lists_every_error() -> None:
    proto = model(
        [helper.make_node("Foo", ["x"], ["a"]), helper.make_node("Bar", ["x"], ["y"])],
        [tensor_info("x", F, [2])],
        [tensor_info("a", F, [2]), tensor_info("y", F, [2])],
    )
    with pytest.raises(OnnxImportError, match=r"(?s)operator: Foo.*operator: Bar"):
        compile_model(proto)


def test_serialize_gives_a_plan_the_runtime_loads() -> None:
    compiled = compile_model(_affine(), shapes={"x": ((1, 4), (2, 4), (4, 4))})
    engine = trt.Runtime(trt.Logger(trt.Logger.ERROR)).deserialize_cuda_engine(compiled.serialize())
    assert engine.get_tensor_name(0) == "x"
    lazy = compile_model(_affine())
    with pytest.raises(trt.ExecutionError, match="first call"):
        lazy.serialize()


def test_outputs_are_fresh_arrays_each_call() -> None:
    compiled = compile_model(_affine())
    first = compiled(x=np.ones((2, 4), np.float32))["y"]
    second = compiled(x=np.zeros((2, 4), np.float32))["y"]
    assert first is not second and first.any() and not second.any()


def test_backend_run_model_run_node_and_devices() -> None:
    x = np.float32([[-1, 2], [3, -4]])
    (y,) = backend.run_model(
        model([helper.make_node("Abs", ["x"], ["y"])], [tensor_info("x", F, [2, 2])], [tensor_info("y", F, [2, 2])]),
        [x],
    )
    np.testing.assert_array_equal(y, np.abs(x))
    outputs = backend.run_node(helper.make_node("Add", ["a", "b"], ["c"]), [x, x])
    np.testing.assert_array_equal(outputs["c"], x + x)
    assert backend.supports_device("CPU")
    assert not backend.supports_device("TPU")


def test_backend_caches_one_engine_per_shape_signature() -> None:
    proto = model([helper.make_node("Neg", ["x"], ["y"])], [tensor_info("x", F, ["n"])], [tensor_info("y", F, ["n"])])
    rep = backend.prepare(proto)
    for n in (2, 3, 2):
        (y,) = rep.run([np.arange(n, dtype=np.float32)])
        np.testing.assert_array_equal(y, -np.arange(n))
    assert len(rep._engines) == 2


def test_backend_folds_value_inputs_per_value() -> None:
    proto = model(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])],
        [tensor_info("x", F, [6]), tensor_info("shape", TensorProto.INT64, [2])],
        [tensor_info("y", F, None)],
    )
    rep = backend.prepare(proto)
    assert rep.baked == ["shape"]
    x = np.arange(6, dtype=np.float32)
    assert rep.run([x, np.int64([2, 3])])[0].shape == (2, 3)
    assert rep.run([x, np.int64([3, 2])])[0].shape == (3, 2)
