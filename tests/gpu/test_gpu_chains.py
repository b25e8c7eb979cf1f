"""Elementwise chains as one generated CUDA kernel (ops/fused_elementwise_cuda.py), FLOAT and FP16, eager and
captured, against the CPU engine; every op a chain may hold."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import plugrt as trt
from plugrt.engine.plan import EnginePlan

from export_graphs import onnx_model
from gpu_helpers import onnx_plan, run_plan

pytestmark = pytest.mark.gpu
LOGGER = trt.Logger(trt.Logger.ERROR)
n = helper.make_node

#: chains of unary/binary/activation nodes on x [B, 8, 33] (odd widths: no vector-width assumption); "b" is a
#: [1, 8, 1] operand, "h" one of [1, 8, 33]
CHAINS = {
    "arithmetic": [n("Add", ["x", "b"], ["t0"]), n("Mul", ["t0", "h"], ["t1"]), n("Sub", ["t1", "b"], ["t2"]),
                   n("Div", ["t2", "two"], ["t3"]), n("Max", ["t3", "h"], ["t4"]), n("Min", ["t4", "b"], ["y"])],
    "activations": [n("Relu", ["x"], ["t0"]), n("Sigmoid", ["t0"], ["t1"]), n("Tanh", ["t1"], ["t2"]),
                    n("LeakyRelu", ["t2"], ["t3"], alpha=0.1), n("Elu", ["t3"], ["t4"], alpha=0.7),
                    n("Softplus", ["t4"], ["t5"]), n("Softsign", ["t5"], ["y"])],
    "clips": [n("Clip", ["x", "lo", "hi"], ["t0"]), n("HardSigmoid", ["t0"], ["t1"], alpha=0.3, beta=0.4),
              n("Mul", ["t1", "x"], ["t2"]), n("HardSwish", ["t2"], ["t3"]), n("Selu", ["t3"], ["y"])],
    "unary": [n("Abs", ["x"], ["t0"]), n("Add", ["t0", "two"], ["t1"]), n("Log", ["t1"], ["t2"]), n("Sqrt", ["t2"], ["t3"]),
              n("Exp", ["t3"], ["t4"]), n("Reciprocal", ["t4"], ["t5"]), n("Neg", ["t5"], ["t6"]), n("Sin", ["t6"], ["t7"]),
              n("Cos", ["t7"], ["t8"]), n("Erf", ["t8"], ["t9"]), n("Floor", ["t9"], ["t10"]), n("Sign", ["x"], ["t11"]),
              n("Add", ["t10", "t11"], ["y"])],
    "gelu_pow": [n("Pow", ["x", "two"], ["t0"]), n("Mul", ["t0", "x"], ["t1"]), n("Gelu", ["t1"], ["y"])],
    # the normalization takes the Mul in, then joins the chain as two steps by constants the layer holds
    "batch_norm": [n("BatchNormalization", ["x", "g", "beta", "mu", "var"], ["t0"]), n("Mul", ["t0", "b"], ["t1"]),
                   n("Relu", ["t1"], ["y"])],
}


def _model(name: str):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(3)
    inits = {"b": rng.standard_normal((1, 8, 1)).astype(np.float32), "two": np.array(2.0, np.float32),
             "h": rng.standard_normal((1, 8, 33)).astype(np.float32),
             "lo": np.array(-0.5, np.float32), "hi": np.array(0.75, np.float32),
             "g": rng.uniform(0.5, 2, 8).astype(np.float32), "beta": rng.standard_normal(8).astype(np.float32),
             "mu": rng.standard_normal(8).astype(np.float32), "var": rng.uniform(0.5, 2, 8).astype(np.float32)}  # fmt: skip
    nodes = CHAINS[name]
    used = {i for node in nodes for i in node.input}
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 8, 33])]
    model = onnx_model(nodes, inputs, ["y"], {k: v for k, v in inits.items() if k in used})
    model.opset_import[0].version = 20
    return model, [i.name for i in inputs]


def _plan(model, names: list[str], device: str, fp16: bool) -> bytes:  # type: ignore[no-untyped-def]
    return onnx_plan(model, device, {name: ((1, 8, 33), (3, 8, 33), (4, 8, 33)) for name in names}, fp16)


@pytest.mark.parametrize("graph", [False, True])
@pytest.mark.parametrize("fp16", [False, True])
@pytest.mark.parametrize("name", sorted(CHAINS))
def test_chain_kernel_on_the_gpu_matches_the_cpu(monkeypatch, name: str, fp16: bool, graph: bool) -> None:
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    model, names = _model(name)
    rng = np.random.default_rng(11)
    feeds = {k: (rng.standard_normal((3, 8, 33)) * 1.5).astype(np.float32) for k in names}
    want = run_plan(_plan(model, names, "cpu", False), "cpu", feeds)["y"]
    plan = _plan(model, names, "cuda", fp16)
    kinds = [layer.kind for layer in EnginePlan.from_bytes(plan).layers]
    assert "fused_elementwise" in kinds
    got = run_plan(plan, "cuda", feeds, graph=graph)["y"]
    assert np.isfinite(got).all() == np.isfinite(want).all()
    scale = float(np.abs(want[np.isfinite(want)]).max()) + 1e-30
    np.testing.assert_allclose(got, want, rtol=0, atol=(2e-2 if fp16 else 2e-5) * scale, equal_nan=True)
