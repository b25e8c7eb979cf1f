"""The tensor and recurrent ops on the GPU (CuPy), checked against ONNX's expected outputs and the CPU."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper
from tensor_harness import Compiled, make_model
from test_recurrent_cells import cell_model
from test_tensor_node_suite import _UNSUPPORTED, CASES

pytestmark = pytest.mark.gpu


def _with_values_baked(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> tuple[onnx.ModelProto, dict]:
    """The model with its small graph inputs (shape-setting values) turned into initializers."""
    baked = onnx.ModelProto()
    baked.CopyFrom(model)
    kept = []
    for value in baked.graph.input:
        array = feeds[value.name]
        if array.ndim <= 1 and array.size <= 64 and value.name != model.graph.input[0].name:
            baked.graph.initializer.append(numpy_helper.from_array(array, value.name))
        elif array.ndim <= 1 and baked.graph.node[0].op_type in ("ConstantOfShape", "Range"):
            baked.graph.initializer.append(numpy_helper.from_array(array, value.name))
        else:
            kept.append(value)
    del baked.graph.input[:]
    baked.graph.input.extend(kept)
    return baked, {v.name: feeds[v.name] for v in kept}


@pytest.mark.parametrize("name", sorted(n for n in CASES if not any(m in n for m in _UNSUPPORTED)))
def test_node_case_on_the_gpu(name: str) -> None:
    model = CASES[name].model
    inputs, expected = CASES[name].data_sets[0]
    feeds = {v.name: np.asarray(a) for v, a in zip(model.graph.input, inputs)}
    try:
        outputs = Compiled(model, device="cuda")(feeds)
    except AssertionError as exc:
        if "must be known" not in str(exc):
            raise
        baked, remaining = _with_values_baked(model, feeds)
        outputs = Compiled(baked, device="cuda")(remaining)
    for got, want in zip(outputs, expected):
        want = np.asarray(want)
        assert got.shape == want.shape
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got, want.astype(got.dtype), rtol=1e-4, atol=1e-5)
        else:
            np.testing.assert_array_equal(got, want.astype(got.dtype))


def test_dynamic_shape_chain_and_data_dependent_output_on_the_gpu() -> None:
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Slice", ["s", "zero", "one"], ["lead"]),
        helper.make_node("Concat", ["lead", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["flat"]),
        helper.make_node("NonZero", ["flat"], ["nz"]),
        helper.make_node("TopK", ["flat", "k"], ["values", "indices"]),
    ]
    inits = {
        "zero": np.array([0], np.int64),
        "one": np.array([1], np.int64),
        "minus1": np.array([-1], np.int64),
        "k": np.array([2], np.int64),
    }
    model = make_model(nodes, {"x": (TP.FLOAT, ["N", 3, "W"])}, ["flat", "nz", "values", "indices"], inits)
    profile = {"x": ((1, 3, 1), (2, 3, 4), (5, 3, 6))}
    gpu, cpu = Compiled(model, profile, device="cuda"), Compiled(model, profile)
    rng = np.random.default_rng(3)
    for shape in [(2, 3, 4), (5, 3, 6), (1, 3, 1)]:
        x = (np.where(rng.random(shape) > 0.5, 1.0, 0.0) * rng.random(shape)).astype(np.float32)
        for got, want in zip(gpu({"x": x}), cpu({"x": x})):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("cell", ["LSTM", "GRU", "RNN"])
def test_recurrent_cells_on_the_gpu_match_the_cpu(cell: str) -> None:
    model, feeds = cell_model(cell, "bidirectional", lengths=True, initial=True, clip=2.0)
    for got, want in zip(Compiled(model, device="cuda")(feeds), Compiled(model)(feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
