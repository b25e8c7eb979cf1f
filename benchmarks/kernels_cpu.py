"""The CPU kernels behind the PyTorch tactic's choices on this machine, each alternative timed in one process.

Products ``[M, K] @ [K, N]`` (NumPy's BLAS, torch's ``mm``, oneDNN's linear on the plain weight, which it
reorders at every call, and on the weight packed once, as an engine holds it, and onnxruntime's MatMul);
attention over ``heads x seq x seq`` scores (the operator's NumPy kernel, and PyTorch's tactic: every head at once,
and the blocks of query rows); the tanh form of GELU (the NumPy kernel, torch's fused kernel, and the tactic's
``x * sigmoid(2u)``); NumPy's product by a weight taken transposed (``x @ w.T``, a Gemm's ``transB``) against the
same weight laid out rows first, as an engine holds it (``ops/products.rows_first``), by rows. Fastest of ``--runs``
wall-clock runs, one thread (set before NumPy is imported). Needs torch and onnxruntime.

Usage: python benchmarks/kernels_cpu.py [--runs 30] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import Any


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="runs per kernel (the fastest is reported)")
    parser.add_argument("--threads", type=int, default=1, help="threads of every library")
    return parser.parse_args()


ARGS = _parse() if __name__ == "__main__" else None
if ARGS is not None:
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = str(ARGS.threads)

import numpy as np  # noqa: E402

#: (M, K, N): BERT-base's products at sequence 128, T5-small's, a MobileNetV2 1x1 at 7 x 7
PRODUCTS = [(128, 768, 768), (128, 768, 3072), (128, 3072, 768), (128, 512, 512), (49, 960, 160)]
#: (heads, seq, depth): BERT-base / GPT-2 at 128, ViT-B/16 at 197
ATTENTION = [(12, 128, 64), (12, 197, 64)]
GELU_SHAPE = (128, 3072)
#: (K, N) of products by a weight taken transposed, and the rows (M) they are timed at
TRANSPOSED = [(128, 512), (512, 1024), (768, 768), (768, 3072)]
TRANSPOSED_ROWS = [1, 2, 4, 8, 16, 32, 64, 128, 512]


def _fastest(run: Callable[[], Any], runs: int) -> float:
    run()
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best * 1e6


def products(torch: Any, runs: int) -> None:
    print("| M x K x N | NumPy | torch mm | oneDNN plain | oneDNN packed | onnxruntime | (us) |")
    print("|---|---|---|---|---|---|---|")
    for m, k, n in PRODUCTS:
        times = _product_times(torch, m, k, n, runs)
        print(f"| {m} x {k} x {n} | " + " | ".join(f"{t:.0f}" for t in times) + " | |")


def _product_times(torch: Any, m: int, k: int, n: int, runs: int) -> list[float]:
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    a, w = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    out = np.empty((m, n), np.float32)
    at, wt, ot = torch.from_numpy(a), torch.from_numpy(w), torch.from_numpy(out)
    rows = wt.t().contiguous()  # [N, K]: oneDNN's linear is x @ w^T
    packed = torch.ops.mkldnn._reorder_linear_weight(rows, None)
    linear = torch.ops.mkldnn._linear_pointwise
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "w"], ["y"])],
        "product",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
        [numpy_helper.from_array(w, "w")],
    )
    options = ort.SessionOptions()
    options.intra_op_num_threads = torch.get_num_threads()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return [
        _fastest(lambda: np.matmul(a, w, out=out), runs),
        _fastest(lambda: torch.mm(at, wt, out=ot), runs),
        _fastest(lambda: linear(at, rows, None, "none", [], ""), runs),
        _fastest(lambda: linear(at, packed, None, "none", [], ""), runs),
        _fastest(lambda: session.run(None, {"a": a}), runs),
    ]


def attention(runs: int) -> None:
    print("\n| heads x seq x depth | NumPy kernel | torch, every head at once | torch, row blocks | (us) |")
    print("|---|---|---|---|---|")
    for heads, seq, depth in ATTENTION:
        times = _attention_times(heads, seq, depth, runs)
        print(f"| {heads} x {seq} x {depth} | " + " | ".join(f"{t:.0f}" for t in times) + " | |")


def _attention_times(heads: int, seq: int, depth: int, runs: int) -> list[float]:
    from plugrt.ops import attention_blocks
    from plugrt.ops.attention import AttentionOperator

    rng = np.random.default_rng(1)
    params = {"op1": "TRANSPOSE", "pre": "DIV", "mask": True}
    q, k, v = (rng.standard_normal((1, heads, seq, depth)).astype(np.float32) for _ in range(3))
    inputs = [q, k, v, np.full((1, 1, 1, 1), 8.0, np.float32), np.zeros((1, 1, 1, seq), np.float32)]
    out, scores = np.empty((1, heads, seq, depth), np.float32), np.empty((1, heads, seq, seq), np.float32)
    op = AttentionOperator(params)
    op.prepare([x.shape for x in inputs], [out.shape, scores.shape])
    times = [_fastest(lambda: op.run(inputs, [out, scores]), runs)]
    for whole in (True, False):
        kept = attention_blocks.MIN_BLOCKED_SCORES
        attention_blocks.MIN_BLOCKED_SCORES = 1 << 62 if whole else 1
        try:
            kernel = AttentionOperator(params).torch_kernel(inputs, [out, scores])
        finally:
            attention_blocks.MIN_BLOCKED_SCORES = kept
        assert kernel is not None
        times.append(_fastest(kernel, runs))
    return times


def gelu(torch: Any, runs: int) -> None:
    from plugrt.ops.activation import activation_kernel
    from plugrt.ops.torch_cpu_kernels import ACTIVATIONS

    x = np.random.default_rng(2).standard_normal(GELU_SHAPE).astype(np.float32)
    out = np.empty_like(x)
    xt, ot = torch.from_numpy(x), torch.from_numpy(out)
    times = [
        _fastest(lambda: activation_kernel("GELU_TANH")(np, x, out, 0.0, 0.0), runs),
        _fastest(lambda: torch._C._nn.gelu(xt, approximate="tanh", out=ot), runs),
        _fastest(lambda: ACTIVATIONS["GELU_TANH"](torch, xt, ot, 0.0, 0.0), runs),
    ]
    print(
        "\n| GELU (tanh form), "
        + " x ".join(map(str, GELU_SHAPE))
        + " | NumPy kernel | torch's fused | the tactic's x * sigmoid(2u) | (us) |"
    )
    print("|---|---|---|---|---|")
    print("| | " + " | ".join(f"{t:.0f}" for t in times) + " | |")


def transposed_weights(runs: int) -> None:
    from plugrt.ops.products import rows_first

    print("| K x N | " + " | ".join(f"M={m}" for m in TRANSPOSED_ROWS) + " | (x @ w.T / x @ rows-first w) |")
    print("|---|" + "---|" * (len(TRANSPOSED_ROWS) + 1))
    rng = np.random.default_rng(0)
    for k, n in TRANSPOSED:
        w = rng.standard_normal((n, k)).astype(np.float32)
        laid = rows_first(w)
        ratios = []
        for m in TRANSPOSED_ROWS:
            a, out = rng.standard_normal((m, k)).astype(np.float32), np.empty((m, n), np.float32)
            plain = _fastest(lambda a=a, out=out, w=w: np.matmul(a, w.T, out=out), runs)
            ratios.append(plain / _fastest(lambda a=a, out=out, laid=laid: np.matmul(a, laid.T, out=out), runs))
        print(f"| {k} x {n} | " + " | ".join(f"{r:.2f}" for r in ratios) + " | |")


def main() -> None:
    assert ARGS is not None
    from plugrt.ops.torch_cpu import torch_module

    torch = torch_module()
    if torch is None:
        sys.exit("kernels_cpu.py needs torch (pip install torch==2.13.0)")
    torch.set_num_threads(ARGS.threads)
    print(
        f"# threads {ARGS.threads}, runs {ARGS.runs}, load {os.getloadavg()[0]:.2f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    products(torch, ARGS.runs)
    attention(ARGS.runs)
    gelu(torch, ARGS.runs)
    transposed_weights(ARGS.runs)
    print(f"# load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
