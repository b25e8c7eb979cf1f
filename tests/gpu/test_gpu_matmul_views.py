"""On the GPU: the matrix product's PyTorch tactic (tensors viewed once at bind), reshapes as views, and the
attention layer with its transposes and scales taken in, eager and captured, FLOAT and FP16, against the CPU."""

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


def _plan(model, device: str, fp16: bool = False) -> bytes:  # type: ignore[no-untyped-def]
    return onnx_plan(model, device, {"x": ((1, 10, 32), (2, 10, 32), (4, 10, 32))}, fp16)


def _products():  # type: ignore[no-untyped-def]
    """x [B, 10, 32]: a product with a bias (one addmm), a batched product of two activations with a transpose,
    reshapes between them (views) and a product by a weight."""
    rng = np.random.default_rng(8)
    nodes = [
        n("MatMul", ["x", "w1"], ["a"]),
        n("Add", ["a", "b1"], ["ab"]),
        n("Reshape", ["ab", "split"], ["h"]),  # [B, 10, 4, 8]
        n("Transpose", ["h"], ["ht"], perm=[0, 2, 1, 3]),  # [B, 4, 10, 8]
        n("Transpose", ["ht"], ["htt"], perm=[0, 1, 3, 2]),  # [B, 4, 8, 10]
        n("MatMul", ["ht", "htt"], ["s"]),  # [B, 4, 10, 10]
        n("Relu", ["s"], ["r"]),
        n("Reshape", ["r", "flat"], ["f"]),  # [B, 10, 40]
        n("MatMul", ["f", "w2t"], ["y"]),
    ]
    inits = {
        "w1": (0.2 * rng.standard_normal((32, 32))).astype(np.float32),
        "b1": rng.standard_normal(32).astype(np.float32),
        "split": np.array([0, 10, 4, 8], np.int64),
        "flat": np.array([0, 10, 40], np.int64),
        "w2t": (0.2 * rng.standard_normal((40, 16))).astype(np.float32),
    }
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 10, 32])
    return onnx_model(nodes, [x], ["y"], inits), {"x": rng.standard_normal((3, 10, 32)).astype(np.float32)}


@pytest.mark.parametrize("graph", [False, True])
@pytest.mark.parametrize("fp16", [False, True])
@pytest.mark.parametrize("tactic", ["0", "always"])
def test_products_and_views_on_the_gpu(monkeypatch, tactic: str, fp16: bool, graph: bool) -> None:
    model, feeds = _products()
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    want = run_plan(_plan(model, "cpu"), "cpu", feeds)["y"]
    monkeypatch.setenv("PLUGRT_TORCH", tactic)
    plan = _plan(model, "cuda", fp16)
    products = [layer for layer in EnginePlan.from_bytes(plan).layers if layer.kind == "matrix_multiply"]
    assert len(products) == 3
    if tactic == "always":
        assert all(layer.tactic == 1 for layer in products)
    got = run_plan(plan, "cuda", feeds, graph=graph)["y"]
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=0, atol=(2e-2 if fp16 else 1e-4) * float(np.abs(want).max()))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_a_product_with_a_bias_takes_the_epilogue_in_half(dtype) -> None:  # type: ignore[no-untyped-def]
    """A product of few rows with a bias: HALF takes cuBLASLt's bias epilogue (one ``addmm``: faster there at
    every size measured, and one launch), FLOAT the product then the add (cuBLASLt picks a slow kernel for the
    epilogue at few rows); both compute the product and the bias."""
    import functools

    import cupy as cp
    import torch

    from plugrt.ops.matrix_multiply import MatrixMultiplyOperator

    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((2, 10, 32)).astype(dtype), rng.standard_normal((1, 32, 24)).astype(dtype)
    bias = rng.standard_normal((1, 1, 24)).astype(dtype)
    op = MatrixMultiplyOperator({"op0": "NONE", "op1": "NONE", "bias": True})
    op.xp = cp
    out = cp.zeros((2, 10, 24), dtype)
    op.prepare([a.shape, b.shape, bias.shape], [out.shape])
    kernel = op.torch_kernel([cp.asarray(a), cp.asarray(b), cp.asarray(bias)], [out])
    assert kernel is not None
    epilogue = isinstance(kernel, functools.partial) and kernel.func is torch.addmm
    assert epilogue is (dtype == np.float16)
    kernel()
    torch.cuda.synchronize()
    want = a.astype(np.float64) @ b[0].astype(np.float64) + bias[0, 0].astype(np.float64)
    np.testing.assert_allclose(cp.asnumpy(out).astype(np.float64), want, rtol=0, atol=5e-2 if dtype == np.float16 else 1e-4)
