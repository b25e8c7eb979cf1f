"""Channels-last runs on the GPU: convolutions, max pooling and global pooling between them storing their tensors
HWC, cuDNN's NHWC kernels on channels-last views (no reorders), against the CPU engine, FLOAT and FP16, eager and
captured; forced (``PLUGRT_TORCH=nhwc``), and by default for HALF layers (FP16)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt as trt
from plugrt.core.types import TensorFormat
from plugrt.engine.plan import EnginePlan

from gpu_helpers import onnx_plan, run_plan

pytestmark = pytest.mark.gpu
LOGGER = trt.Logger(trt.Logger.ERROR)


def _model() -> bytes:
    """A bottleneck: 1x1 + ReLU, 3x3 + ReLU, 1x1 + residual + ReLU, then 3x3 stride 2 padded at the end only."""
    rng = np.random.default_rng(0)
    nodes, inits = [], []

    def conv(x: str, y: str, c: int, m: int, k: int, **attrs: object) -> None:
        for name, shape in ((f"{y}_w", (m, c, k, k)), (f"{y}_b", (m,))):
            inits.append(numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name))
        nodes.append(helper.make_node("Conv", [x, f"{y}_w", f"{y}_b"], [y], kernel_shape=[k, k], **attrs))

    conv("x", "c0", 16, 16, 3, pads=[1, 1, 1, 1])
    nodes.append(helper.make_node("Relu", ["c0"], ["r0"]))
    nodes.append(helper.make_node("MaxPool", ["r0"], ["p"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    conv("p", "c1", 16, 8, 1)
    nodes.append(helper.make_node("Relu", ["c1"], ["r1"]))
    conv("r1", "c2", 8, 8, 3, pads=[1, 1, 1, 1])
    nodes.append(helper.make_node("Relu", ["c2"], ["r2"]))
    conv("r2", "c3", 8, 16, 1)
    nodes.append(helper.make_node("Add", ["c3", "p"], ["s3"]))
    nodes.append(helper.make_node("Relu", ["s3"], ["r3"]))
    conv("r3", "c4", 16, 16, 3, strides=[2, 2], pads=[0, 0, 1, 1])
    nodes.append(helper.make_node("Relu", ["c4"], ["r4"]))
    nodes.append(helper.make_node("GlobalAveragePool", ["r4"], ["y"]))
    graph = helper.make_graph(
        nodes,
        "bottleneck",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16, 14, 14])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _plan(device: str, fp16: bool) -> bytes:
    return onnx_plan(_model(), device, {"x": ((1, 16, 14, 14), (4, 16, 14, 14), (4, 16, 14, 14))}, fp16)


@pytest.mark.parametrize("switch", ["nhwc", "1"])
@pytest.mark.parametrize("graph", [False, True])
@pytest.mark.parametrize("fp16", [False, True])
def test_channels_last_runs_on_the_gpu_match_the_cpu(monkeypatch, fp16: bool, graph: bool, switch: str) -> None:
    x = np.random.default_rng(1).standard_normal((3, 16, 14, 14)).astype(np.float32)
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    want = run_plan(_plan("cpu", False), "cpu", {"x": x})["y"]
    monkeypatch.setenv("PLUGRT_TORCH", switch)  # nhwc: every layer with a channels-last kernel takes it
    plan = _plan("cuda", fp16)
    loaded = EnginePlan.from_bytes(plan)
    stored = sum(t.format == TensorFormat.HWC for t in loaded.tensors)
    if switch == "nhwc" or fp16:  # the tensors between the convolutions and the poolings, FLOAT (forced) or HALF
        assert stored >= 5
        assert all(layer.tactic == 2 for layer in loaded.layers if "pool" in layer.kind)
    else:  # FLOAT keeps cuDNN's NCHW kernels unless forced
        assert stored == 0
    got = run_plan(plan, "cuda", {"x": x}, graph=graph)["y"]
    assert got.shape == want.shape and np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=0, atol=(3e-2 if fp16 else 2e-3) * float(np.abs(want).max()))


@pytest.mark.parametrize("graph", [False, True])
def test_channels_last_runs_hand_over_on_the_gpu_call_after_call(monkeypatch, graph: bool) -> None:
    """Between the layers of a HALF channels-last run cuDNN's fused convolution + ReLU and max pooling leave their
    results in the buffers' hand-over slots (no copy into the buffer), which the executor empties after their last
    reader; one context run on new inputs (eager, or graph replays) reads this call's tensors, never the last
    call's."""
    import cupy as cp

    from plugrt.engine import executor

    rng = np.random.default_rng(5)
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    cpu_plan = _plan("cpu", False)
    hosts = [rng.standard_normal((3, 16, 14, 14)).astype(np.float32) for _ in range(4)]
    wants = [run_plan(cpu_plan, "cpu", {"x": host})["y"] for host in hosts]
    monkeypatch.setenv("PLUGRT_TORCH", "1")  # (also at bind, the first run: torch's kernels)
    plan = _plan("cuda", True)
    engine = trt.Runtime(LOGGER, device="cuda").deserialize_cuda_engine(plan)
    context = engine.create_execution_context()
    context.use_cuda_graph = graph
    context.set_input_shape("x", (3, 16, 14, 14))
    x, y = cp.zeros((3, 16, 14, 14), np.float32), cp.zeros((3, 16, 1, 1), np.float32)
    context.set_tensor_address("x", int(x.data.ptr))
    context.set_tensor_address("y", int(y.data.ptr))
    released: list[object] = []  # what the slots held when the executor emptied them after their last reader
    original = executor._release

    def recording(slots):  # type: ignore[no-untyped-def]
        released.extend(slot.tensor for slot in slots if slot.tensor is not None)
        original(slots)

    monkeypatch.setattr(executor, "_release", recording)
    stream = cp.cuda.Stream(non_blocking=True)
    for call, (host, want) in enumerate(zip(hosts, wants)):
        x.set(host)
        context.execute_async_v3(stream.ptr)
        stream.synchronize()
        got = cp.asnumpy(y)
        np.testing.assert_allclose(got, want, rtol=0, atol=3e-2 * float(np.abs(want).max()), err_msg=f"call {call}")
    assert any(t.is_cuda for t in released)  # the fused convolutions' and the pooling's results, not copies
