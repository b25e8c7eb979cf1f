"""The weights of a compiled model are in memory once: read from external files into arrays the network,
the plan and the running context share (no copy in the ONNX model, at lowering, through plan bytes, or in
the arena)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt
from plugrt.core.errors import TypeMismatchError
from plugrt.onnx.external_data import load_external_data

K, N = 64, 48


def _model(folder: Path) -> Path:
    """y = x @ w + b, then a second product by w2; w and w2 in an external file, b inline."""
    rng = np.random.default_rng(0)
    weights = {
        "w": rng.standard_normal((K, N), dtype=np.float32),
        "w2": rng.standard_normal((N, K), dtype=np.float32),
        "b": rng.standard_normal(N, dtype=np.float32),
    }
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["xw"]),
        helper.make_node("Add", ["xw", "b"], ["h"]),
        helper.make_node("MatMul", ["h", "w2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 7, K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    path = folder / "model.onnx"
    onnx.save(model, str(path), save_as_external_data=True, location="weights.bin", size_threshold=1024)
    return path


def _reference(path: Path, x: np.ndarray) -> np.ndarray:
    model = onnx.load(str(path))
    w, w2, b = (numpy_helper.to_array(t).astype(np.float64) for t in model.graph.initializer)
    return (x.astype(np.float64) @ w + b) @ w2


def test_external_initializers_are_read_into_arrays_not_into_the_model(tmp_path: Path) -> None:
    path = _model(tmp_path)
    model = onnx.load(str(path), load_external_data=False)
    arrays = load_external_data(model, str(tmp_path), "test")
    assert sorted(arrays) == ["w", "w2"]  # b is small: inline
    external = [t for t in model.graph.initializer if t.name in arrays]
    assert all(t.data_location == TensorProto.EXTERNAL and not t.raw_data for t in external)
    full = onnx.load(str(path))
    for tensor in full.graph.initializer:
        if tensor.name in arrays:
            np.testing.assert_array_equal(arrays[tensor.name], numpy_helper.to_array(tensor))


def test_a_compiled_model_holds_its_weights_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the NumPy kernels: products with PyTorch's tactic hold their weights packed instead (test_packed_weights.py)
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    path = _model(tmp_path)
    compiled = plugrt.compile(str(path), shapes={"x": ((1, 7, K), (2, 7, K), (4, 7, K))})
    x = np.random.default_rng(1).standard_normal((2, 7, K), dtype=np.float32)
    y, exact = compiled(x=x)["y"], _reference(path, x)
    assert np.abs(y - exact).max() <= 1e-6 * np.abs(exact).max()  # float32 products of 64 and 48 terms
    network_arrays = [
        layer.weights.numpy()
        for layer in (compiled.network.get_layer(i) for i in range(compiled.network.num_layers))
        if isinstance(layer, plugrt.IConstantLayer)
    ]
    plan_weights = [w for w in compiled.engine.plan.weights.values() if w.size >= K * N]
    assert len(plan_weights) == 2
    for weight in plan_weights:  # the plan's weights are the network's arrays (views of them), read-only
        assert not weight.flags.writeable
        assert any(np.shares_memory(weight, array) for array in network_arrays)
    executor = compiled.context._executor
    viewed = list(executor.weight_views.values())
    assert len(viewed) >= 2
    arena = executor.arena
    for weight in plan_weights:  # the context reads them in place: not copies in its arena
        assert any(np.shares_memory(view, weight) for view in viewed)
        assert not any(np.shares_memory(view, arena) for view in viewed)


def test_an_engine_made_in_memory_matches_one_loaded_from_its_bytes(tmp_path: Path) -> None:
    path = _model(tmp_path)
    compiled = plugrt.compile(str(path), shapes={"x": ((1, 7, K), (2, 7, K), (4, 7, K))})
    data = compiled.serialize()  # written from the in-memory plan
    loaded = plugrt.Runtime(plugrt.Logger()).deserialize_cuda_engine(data)
    assert loaded.plan.to_bytes() == bytes(data)
    x = np.random.default_rng(2).standard_normal((3, 7, K), dtype=np.float32)
    context = loaded.create_execution_context()
    context.set_input_shape("x", x.shape)
    out = np.empty(tuple(context.get_tensor_shape("y")), np.float32)
    context.set_tensor_address("x", x.ctypes.data)
    context.set_tensor_address("y", out.ctypes.data)
    assert context.execute_async_v3(0)
    np.testing.assert_array_equal(out, compiled(x=x)["y"])


def test_engine_from_plan_refuses_what_is_not_a_plan() -> None:
    runtime = plugrt.Runtime(plugrt.Logger())
    with pytest.raises(TypeMismatchError, match="engine_from_plan takes an EnginePlan, got bytes"):
        runtime.engine_from_plan(b"plan")  # type: ignore[arg-type]
    builder = plugrt.Builder(plugrt.Logger())
    with pytest.raises(TypeMismatchError, match="build_plan takes an INetworkDefinition, got str"):
        builder.build_plan("network", builder.create_builder_config())  # type: ignore[arg-type]
