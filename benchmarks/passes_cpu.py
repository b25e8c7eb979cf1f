"""The graph optimizer's rules one at a time: each exported pattern as a small ONNX model, fused and not.

Every pattern is built twice in one process, with the passes and with
``PLUGRT_DISABLE_PASSES=all``, and the two engines are timed alternately (fastest run of
each); the table gives both times, their ratio, the layer counts and the largest difference
between the two outputs relative to the output's largest value.

Patterns: GELU as torch's dynamo exporter writes it (Div, Erf, Add, Mul, Mul) at BERT-base's
[1, 128, 3072] and Whisper-tiny's [1, 1500, 1536]; GPT-2's tanh GELU (Mul, Mul, Mul, Mul,
Add, Mul, Tanh, Add, Mul) at [1, 128, 3072]; a written-out LayerNorm at [1, 128, 768]; an
elementwise chain (HardSigmoid, Mul by x: hard-swish, then a per-channel Add) at
[8, 96, 56, 56].

Usage: python benchmarks/passes_cpu.py [--runs 20] [--threads 2]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs per engine (alternating)")
    parser.add_argument("--threads", type=int, default=2, help="BLAS threads")
    return parser.parse_args()


ARGS = _parse() if __name__ == "__main__" else None
if ARGS is not None:
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = str(ARGS.threads)

import numpy as np  # noqa: E402
from onnx import ModelProto, TensorProto, helper, numpy_helper  # noqa: E402

n = helper.make_node


def _model(nodes: list, constants: dict[str, np.ndarray], shape: tuple[int, ...]) -> ModelProto:
    graph = helper.make_graph(
        nodes,
        "pattern",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in constants.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 10
    return model


def _scalar(value: float, rank: int) -> np.ndarray:
    return np.full((1,) * rank, value, np.float32)


def gelu_erf(shape: tuple[int, ...]) -> ModelProto:
    r = len(shape)
    nodes = [
        n("Div", ["x", "sqrt2"], ["a"]),
        n("Erf", ["a"], ["b"]),
        n("Add", ["b", "one"], ["c"]),
        n("Mul", ["half", "c"], ["d"]),
        n("Mul", ["x", "d"], ["y"]),
    ]
    return _model(nodes, {"sqrt2": _scalar(1.4142135, r), "one": _scalar(1, r), "half": _scalar(0.5, r)}, shape)


def gelu_tanh(shape: tuple[int, ...]) -> ModelProto:
    r = len(shape)
    nodes = [
        n("Mul", ["x", "half"], ["h"]),
        n("Mul", ["x", "x"], ["sq"]),
        n("Mul", ["sq", "x"], ["p"]),
        n("Mul", ["p", "c3"], ["q"]),
        n("Add", ["x", "q"], ["s0"]),
        n("Mul", ["s0", "k"], ["s"]),
        n("Tanh", ["s"], ["t"]),
        n("Add", ["t", "one"], ["u"]),
        n("Mul", ["h", "u"], ["y"]),
    ]
    constants = {
        "half": _scalar(0.5, r),
        "c3": _scalar(0.044715, r),
        "k": _scalar(math.sqrt(2 / math.pi), r),
        "one": _scalar(1, r),
    }
    return _model(nodes, constants, shape)


def layer_norm(shape: tuple[int, ...]) -> ModelProto:
    r, width = len(shape), shape[-1]
    nodes = [
        n("ReduceMean", ["x", "axes"], ["m"]),
        n("Sub", ["x", "m"], ["d"]),
        n("Pow", ["d", "two"], ["sq"]),
        n("ReduceMean", ["sq", "axes"], ["v"]),
        n("Add", ["v", "eps"], ["ve"]),
        n("Sqrt", ["ve"], ["sd"]),
        n("Div", ["d", "sd"], ["nrm"]),
        n("Mul", ["nrm", "gamma"], ["g"]),
        n("Add", ["g", "beta"], ["y"]),
    ]
    rng = np.random.default_rng(0)
    constants = {
        "axes": np.array([-1], np.int64),
        "two": _scalar(2, r),
        "eps": _scalar(1e-5, r),
        "gamma": rng.normal(1, 0.1, width).astype(np.float32),
        "beta": rng.normal(0, 0.1, width).astype(np.float32),
    }
    return _model(nodes, constants, shape)


def hard_swish(shape: tuple[int, ...]) -> ModelProto:
    bias = np.random.default_rng(0).normal(0, 1, (1, shape[1], 1, 1)).astype(np.float32)
    nodes = [
        n("HardSigmoid", ["x"], ["b"], alpha=1 / 6, beta=0.5),
        n("Mul", ["x", "b"], ["a"]),
        n("Add", ["a", "bias"], ["y"]),
    ]
    return _model(nodes, {"bias": bias}, shape)


CASES = [
    ("GELU erf (dynamo)", gelu_erf, (1, 128, 3072)),
    ("GELU erf (dynamo)", gelu_erf, (1, 1500, 1536)),
    ("GELU tanh (GPT-2)", gelu_tanh, (1, 128, 3072)),
    ("LayerNorm written out", layer_norm, (1, 128, 768)),
    ("hard-swish + bias chain", hard_swish, (8, 96, 56, 56)),
]


def _fastest_pair(first: object, second: object, x: np.ndarray, runs: int) -> tuple[float, float]:
    best = [math.inf, math.inf]
    for _ in range(runs):
        for k, engine in enumerate((first, second)):
            start = time.perf_counter()
            engine({"x": x})  # type: ignore[operator]
            best[k] = min(best[k], time.perf_counter() - start)
    return best[0] * 1e3, best[1] * 1e3


def main() -> None:
    import plugrt

    assert ARGS is not None
    print(f"# load {os.getloadavg()[0]:.2f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, runs {ARGS.runs}")
    print("| pattern | shape | layers unfused -> fused | unfused ms | fused ms | unfused / fused | max rel. diff |")
    print("|---|---|---|---|---|---|---|")
    for title, make, shape in CASES:
        model = make(shape)
        os.environ["PLUGRT_DISABLE_PASSES"] = "all"
        plain = plugrt.compile(model)
        del os.environ["PLUGRT_DISABLE_PASSES"]
        fused = plugrt.compile(model)
        x = np.random.default_rng(1).normal(0, 2, shape).astype(np.float32)
        want, got = plain({"x": x})["y"], fused({"x": x})["y"]
        diff = float(np.abs(got.astype(np.float64) - want).max() / max(np.abs(want).max(), 1e-30))
        slow, fast = _fastest_pair(plain, fused, x, ARGS.runs)
        layers = f"{len(plain.engine.plan.layers)} -> {len(fused.engine.plan.layers)}"
        print(
            f"| {title} | {list(shape)} | {layers} | {slow:.2f} | {fast:.2f} | {slow / fast:.2f}x | {diff:.1e} |",
            flush=True,
        )
    print(f"# load {os.getloadavg()[0]:.2f} at the end", file=sys.stderr)


if __name__ == "__main__":
    main()
