"""Float32 elementwise kernels on the CPU: plugrt's NumPy kernels against onnxruntime and a copy.

For Erf, GELU (erf form), Pow(x, 3) and a last-axis Softmax, each on the same float32
array: plugrt's operator kernel (NumPy only), onnxruntime running the one-node ONNX
model (same threads, spinning off), SciPy's ``erf`` where installed, and a plain
``numpy.copyto`` of the array (reading and writing it once: the memory-bandwidth floor).
Also the largest error of plugrt and onnxruntime against float64 (Erf in ulps of the
float32 result; GELU and Pow absolute; Softmax the difference between the two). Timings alternate engines and keep the fastest of ``--runs``.

Usage: python benchmarks/elementwise_cpu.py [--size 4000000] [--threads 1] [--runs 7]
"""

from __future__ import annotations

import argparse
import os

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--size", type=int, default=4_000_000)
parser.add_argument("--threads", type=int, default=1)
parser.add_argument("--runs", type=int, default=7)
parser.add_argument(
    "--clock", choices=("wall", "thread"), default="wall", help="wall time or this thread's CPU time (steady under load)"
)
ARGS = parser.parse_args()
for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ[variable] = str(ARGS.threads)

import math  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from plugrt.ops.activation import ActivationOperator  # noqa: E402
from plugrt.ops.elementwise import ElementwiseOperator  # noqa: E402
from plugrt.ops.softmax import SoftmaxOperator  # noqa: E402
from plugrt.ops.unary import UnaryOperator  # noqa: E402


def _session(nodes: list[Any], inits: dict[str, np.ndarray], rank: int) -> ort.InferenceSession:
    dims = [None] * rank
    graph = helper.make_graph(
        nodes,
        "k",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 10
    options = ort.SessionOptions()
    options.intra_op_num_threads = ARGS.threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _fastest(run: Callable[[], Any]) -> float:
    clock = time.thread_time if ARGS.clock == "thread" else time.perf_counter
    best = math.inf
    for _ in range(ARGS.runs):
        start = clock()
        run()
        best = min(best, clock() - start)
    return best


def _ulps(got: np.ndarray, exact: np.ndarray) -> float:
    spacing = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    return float((np.abs(got.astype(np.float64) - exact) / np.maximum(spacing, 1e-45)).max())


def _kernel(op: Any, data: np.ndarray, target: np.ndarray, square: np.ndarray) -> Callable[[], None]:
    if op is None:  # what the importer builds for Pow by 3: two products
        product = ElementwiseOperator({"op": "PROD"})

        def products() -> None:
            product.run([data, data], [square])
            product.run([square, data], [target])

        return products
    if hasattr(op, "prepare"):
        op.prepare([data.shape], [data.shape])
    return lambda: op.run([data], [target])


def main() -> None:
    erf64 = np.vectorize(math.erf, otypes=[np.float64])
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(ARGS.size) * 2).astype(np.float32)
    rows = x.reshape(-1, 1000)
    out = np.empty_like(x)
    sample = x[:200_000].astype(np.float64)
    cases = {
        "Erf": (UnaryOperator({"op": "ERF"}), [helper.make_node("Erf", ["x"], ["y"])], {}, x, erf64(sample)),
        "GELU": (
            ActivationOperator({"type": "GELU_ERF"}),
            [helper.make_node("Gelu", ["x"], ["y"])],
            {},
            x,
            0.5 * sample * (1 + erf64(sample / math.sqrt(2))),
        ),
        "Tanh": (ActivationOperator({"type": "TANH"}), [helper.make_node("Tanh", ["x"], ["y"])], {}, x, np.tanh(sample)),
        "Sigmoid": (
            ActivationOperator({"type": "SIGMOID"}),
            [helper.make_node("Sigmoid", ["x"], ["y"])],
            {},
            x,
            1 / (1 + np.exp(-sample)),
        ),
        "Exp": (UnaryOperator({"op": "EXP"}), [helper.make_node("Exp", ["x"], ["y"])], {}, x, np.exp(sample)),
        "Pow(x, 3) as x*x*x": (
            None,
            [helper.make_node("Pow", ["x", "p"], ["y"])],
            {"p": np.array(3, np.float32)},
            x,
            sample**3,
        ),
        "Softmax (rows of 1000)": (
            SoftmaxOperator({"axes": 2}),
            [helper.make_node("Softmax", ["x"], ["y"], axis=-1)],
            {},
            rows,
            None,
        ),
    }
    print(
        f"# {ARGS.size} float32 elements, threads {ARGS.threads}, clock {ARGS.clock}, load {os.getloadavg()[0]:.2f}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    copy = _fastest(lambda: np.copyto(out, x))
    print(f"copy (memory floor): {copy * 1e3:.2f} ms")
    print("| kernel | plugrt ms | onnxruntime ms | plugrt / ORT | plugrt / copy | plugrt error | ORT error |")
    print("|---|---|---|---|---|---|---|")
    square = np.empty_like(x)
    for name, (op, nodes, inits, data, exact) in cases.items():
        session = _session(nodes, inits, data.ndim)
        target = out.reshape(data.shape)
        run = _kernel(op, data, target, square)
        ours, theirs = math.inf, math.inf
        for _ in range(3):
            ours = min(ours, _fastest(run))
            theirs = min(theirs, _fastest(lambda s=session, d=data: s.run(None, {"x": d})))
        run()
        ort_out = session.run(None, {"x": data})[0].reshape(-1)
        if exact is not None and name in ("Erf", "Tanh", "Sigmoid", "Exp"):
            ulp = f"{_ulps(target.reshape(-1)[: sample.size], exact):.2f} ulp"
            ort_ulp = f"{_ulps(ort_out[: sample.size], exact):.2f} ulp"
        elif exact is not None:  # near zero GELU cancels: absolute error, as float32 resolves it
            ulp = f"abs {np.abs(target.reshape(-1)[: sample.size] - exact).max():.1e}"
            ort_ulp = f"abs {np.abs(ort_out[: sample.size] - exact).max():.1e}"
        else:
            ulp = ort_ulp = f"max diff {np.abs(target.reshape(-1) - ort_out).max():.1e}"
        print(
            f"| {name} | {ours * 1e3:.2f} | {theirs * 1e3:.2f} | {ours / theirs:.2f}x | {ours / copy:.1f}x | "
            f"{ulp} | {ort_ulp} |"
        )


if __name__ == "__main__":
    main()
