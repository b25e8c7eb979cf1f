"""oneDNN's linear as the PyTorch tactic of products by a constant matrix (MatMul with its fused bias, Gemm): the
same results as the NumPy kernel within 2e-6 of the output's scale; the tactic is offered only where it computes
the layer as the NumPy kernel does (a constant right operand, a row bias, no INT8 subclass). Skips without torch."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt
from plugrt.core.types import DataType
from plugrt.ops.int8 import Int8MatrixMultiplyOperator
from plugrt.ops.matrix_multiply import MatrixMultiplyOperator

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _torch_s_own_linear(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests pin torch's linear: oneDNN's primitive called directly, which the products take first where its
    library is there, is turned off (tests/unit/test_onednn_matmul.py pins that one)."""
    monkeypatch.setenv("PLUGRT_ONEDNN", "0")

RNG = np.random.default_rng(31)
n = helper.make_node


def _model(nodes, inits: dict[str, np.ndarray], inputs: dict[str, tuple[int, ...]]):  # type: ignore[no-untyped-def]
    graph = helper.make_graph(
        nodes,
        "linear",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v)) for k, v in inputs.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in inits.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _both(monkeypatch, model, feeds: dict[str, np.ndarray]):  # type: ignore[no-untyped-def]
    results = {}
    for mode in ("0", "always"):
        monkeypatch.setenv("PLUGRT_TORCH", mode)
        compiled = plugrt.compile(model)
        tactics = [layer.tactic for layer in compiled.engine.plan.layers if layer.kind in ("matrix_multiply", "gemm")]
        results[mode] = (tactics, compiled(feeds)["y"])
    return results["0"], results["always"]


def _close(got: np.ndarray, want: np.ndarray) -> None:
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6 * float(np.abs(want).max()))


def test_matmul_by_a_constant_with_its_bias(monkeypatch) -> None:
    weight, bias = RNG.standard_normal((96, 80)), RNG.standard_normal(80)
    model = _model(
        [n("MatMul", ["x", "w"], ["m"]), n("Add", ["m", "b"], ["y"])], {"w": weight, "b": bias}, {"x": (3, 37, 96)}
    )
    x = RNG.standard_normal((3, 37, 96)).astype(np.float32)
    (plain_tactics, plain), (torch_tactics, got) = _both(monkeypatch, model, {"x": x})
    assert plain_tactics == [0] and torch_tactics == [1]
    _close(got, plain)
    _close(got, (x.astype(np.float64) @ weight + bias).astype(np.float32))


@pytest.mark.parametrize("bias", ["row", "none"])
def test_gemm_by_a_constant_transposed_with_alpha_and_beta(monkeypatch, bias: str) -> None:
    inits = {"w": RNG.standard_normal((48, 64))}
    if bias == "row":
        inits["c"] = RNG.standard_normal((1, 48))
    node = n("Gemm", ["x", "w", *(["c"] if bias == "row" else [])], ["y"], transB=1, alpha=0.5, beta=2.0)
    x = RNG.standard_normal((20, 64)).astype(np.float32)
    (_, plain), (torch_tactics, got) = _both(monkeypatch, _model([node], inits, {"x": (20, 64)}), {"x": x})
    assert torch_tactics == [1]
    _close(got, plain)


def test_what_the_linear_kernel_does_not_compute_keeps_numpy(monkeypatch) -> None:
    full_c = _model([n("Gemm", ["x", "w", "c"], ["y"])], {"w": np.ones((8, 4)), "c": np.ones((5, 4))}, {"x": (5, 8)})
    _, (tactics, _) = _both(monkeypatch, full_c, {"x": np.ones((5, 8), np.float32)})
    assert tactics == [0]  # C of [M, N] is no bias row
    two_inputs = _model([n("MatMul", ["x", "z"], ["y"])], {}, {"x": (5, 8), "z": (8, 4)})
    feeds = {"x": np.ones((5, 8), np.float32), "z": np.ones((8, 4), np.float32)}
    _, (tactics, _) = _both(monkeypatch, two_inputs, feeds)
    assert tactics == [0]  # a right operand that is not a constant
    monkeypatch.setenv("PLUGRT_TORCH", "always")
    types, shapes, constant = [DataType.FLOAT] * 2, [(5, 8), (8, 4)], [False, True]
    assert MatrixMultiplyOperator({"op0": "NONE", "op1": "NONE"}).tactics(types, shapes, constant) == [1]
    int8 = Int8MatrixMultiplyOperator({"op0": "NONE", "op1": "NONE", "input_scale": 0.1, "other_scale": 0.1})
    assert int8.tactics(types, shapes, constant) == [0]  # its own (INT8) kernel only


def test_a_product_runs_on_torch_s_threads_in_one_call(monkeypatch) -> None:
    """A large product is one call of oneDNN's linear with the engine's threads set for torch (no blocks on the
    helper thread), with NumPy's results."""
    from plugrt.ops import blas_threads, torch_cpu, torch_cpu_linear

    weight, bias = RNG.standard_normal((64, 40)), RNG.standard_normal(40)
    model = _model(
        [n("MatMul", ["x", "w"], ["m"]), n("Add", ["m", "b"], ["y"])], {"w": weight, "b": bias}, {"x": (2, 150, 64)}
    )
    x = RNG.standard_normal((2, 150, 64)).astype(np.float32)
    monkeypatch.setattr(blas_threads, "engine_threads", lambda: 2)
    monkeypatch.setattr(blas_threads, "_machine_busy", lambda: False)
    counts = []
    real = torch_cpu.use_threads
    monkeypatch.setattr(torch_cpu_linear, "use_threads", lambda flops: (counts.append(flops), real(flops)))
    (_, numpy_result), (tactics, torch_result) = _both(monkeypatch, model, {"x": x})
    assert tactics == [1] and counts and max(counts) == 2.0 * 300 * 40 * 64
    _close(torch_result, numpy_result)
