"""The default runs on the GPU replay a CUDA graph from their second run (``engine/graph_runs.py``): the
results equal every-layer-launched runs of the same engine, new data at the same addresses is read, and a
caller capturing the stream gets the launches in their own graph instead of a nested capture."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import plugrt as trt

from export_graphs import bert_attention_reshape

pytestmark = pytest.mark.gpu

LOGGER = trt.Logger(trt.Logger.ERROR)


def _engine(model: Any, shapes: dict[str, tuple[tuple[int, ...], ...]]) -> Any:
    plan = bytes(trt.compile(model, shapes=shapes, device="cuda").engine.serialize())
    return trt.Runtime(LOGGER, device="cuda").deserialize_cuda_engine(plan)


def _bind(engine: Any, x: Any, mode: bool | None) -> tuple[Any, Any]:
    import cupy as cp

    context = engine.create_execution_context()
    context.use_cuda_graph = mode
    context.set_input_shape("x", x.shape)
    y = cp.full(tuple(context.get_tensor_shape("y")), 7, cp.float32)
    context.set_tensor_address("x", x.data.ptr)
    context.set_tensor_address("y", y.data.ptr)
    return context, y


def _torch_mlp_model() -> Any:
    """LayerNorm -> MatMul + bias -> GELU -> MatMul (products through PyTorch's cuBLAS where installed)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = {
        "w1": rng.standard_normal((64, 256)).astype(np.float32) / 8,
        "b1": rng.standard_normal(256).astype(np.float32),
        "w2": rng.standard_normal((256, 64)).astype(np.float32) / 16,
        "scale": np.ones(64, np.float32),
        "shift": np.zeros(64, np.float32),
    }
    nodes = [
        helper.make_node("LayerNormalization", ["x", "scale", "shift"], ["n"], axis=-1),
        helper.make_node("MatMul", ["n", "w1"], ["h"]),
        helper.make_node("Add", ["h", "b1"], ["hb"]),
        helper.make_node("Gelu", ["hb"], ["g"], domain=""),
        helper.make_node("MatMul", ["g", "w2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "S", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "S", 64])],
        [numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


@pytest.mark.parametrize("model", ["reshapes", "products"])
def test_default_runs_replay_from_the_second_and_equal_launched_runs(model: str) -> None:
    cp = pytest.importorskip("cupy")
    if model == "reshapes":
        engine = _engine(bert_attention_reshape(), {"x": ((1, 2, 768), (1, 16, 768), (4, 64, 768))})
        x = cp.zeros((2, 7, 768), cp.float32)
    else:
        engine = _engine(_torch_mlp_model(), {"x": ((1, 1, 64), (2, 8, 64), (4, 32, 64))})
        x = cp.zeros((3, 17, 64), cp.float32)
    default, y_default = _bind(engine, x, None)
    launched, y_launched = _bind(engine, x, False)
    cp.cuda.Device().synchronize()  # (arrays made on CuPy's default stream; the runs use their own)
    stream = cp.cuda.Stream(non_blocking=True)
    replayed = []
    for seed in range(5):
        with stream:  # new data at the same address, written on the runs' stream
            x[...] = cp.random.default_rng(seed).standard_normal(x.shape, dtype=cp.float32)
        default.execute_async_v3(stream.ptr)
        replayed.append(default.replayed_graph)
        launched.execute_async_v3(stream.ptr)
        stream.synchronize()
        assert not launched.replayed_graph
        cp.testing.assert_allclose(y_default, y_launched, rtol=1e-6, atol=1e-6)  # the same kernels
    assert replayed == [False, False, True, True, True]
    assert not bool(cp.all(y_default == 7))


def test_a_callers_capture_records_the_launches_of_a_default_run() -> None:
    cp = pytest.importorskip("cupy")
    engine = _engine(bert_attention_reshape(), {"x": ((1, 2, 768), (1, 16, 768), (4, 64, 768))})
    x = cp.asarray(np.random.default_rng(1).standard_normal((2, 5, 768)), dtype=cp.float32)
    context, y = _bind(engine, x, None)
    reference, y_reference = _bind(engine, x, False)
    cp.cuda.Device().synchronize()  # (arrays made on CuPy's default stream; the runs use their own)
    stream = cp.cuda.Stream(non_blocking=True)
    context.execute_async_v3(stream.ptr)  # one eager run first: the next would capture itself
    stream.begin_capture()
    context.execute_async_v3(stream.ptr)  # the caller is capturing: launched into their graph, not nested
    graph = stream.end_capture()
    assert not context.replayed_graph
    with stream:
        y[...] = 7
        x *= -2
    graph.launch(stream)
    reference.execute_async_v3(stream.ptr)
    stream.synchronize()
    cp.testing.assert_array_equal(y, y_reference)
