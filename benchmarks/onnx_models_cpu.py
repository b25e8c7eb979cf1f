"""Latency of the nine "light" CNN models that ship with onnx: plugrt (CPU) against onnxruntime, in one run.

The models are ``onnx/backend/test/data/light/light_*.onnx`` (AlexNet, DenseNet-121,
Inception v1/v2, ResNet-50, ShuffleNet, SqueezeNet, VGG-19, ZFNet-512): full-size
architectures whose weights are ``ConstantOfShape`` nodes (constant-filled), fed
the input ONNX's backend test runner gives them (``arange(n) / n``). Both engines
are checked against the stored expected output (reported, not fatal: these outputs
are softmaxes of logits near 1e10 that are equal only in exact arithmetic, so a
GEMM that rounds identical filters differently -- OpenBLAS's single-thread
kernel does, for SqueezeNet's last 1x1 convolution -- flips them). Timing alternates blocks
of runs of the two engines (a pause between blocks lets onnxruntime's spinning
threads settle) and reports the fastest run of each, their ratio
(plugrt / onnxruntime, lower is better) and the geometric mean of the ratios;
also against onnxruntime with its graph optimizations off (no constant folding,
no Conv+BatchNorm/activation fusion, no NCHWc layout), which separates kernel
speed from graph rewriting.

onnxruntime runs with its default session options (all graph optimizations,
intra-op threads = cores); plugrt runs NumPy with its BLAS's default threads.
``--threads N`` sets both to N (``OPENBLAS_NUM_THREADS``/``OMP_NUM_THREADS``
and ``intra_op_num_threads``); ``--profile MODEL`` prints where plugrt's time
goes, per operator kind and for the slowest layers. ``--busy N`` times while N other processes keep a
core busy each (``real_models_cpu.busy_cores``); ``--no-ort-spinning`` turns onnxruntime's spinning threads off
(``session.intra_op.allow_spinning=0``), as the under-load comparison needs: run it once quiet and once busy,
both with spinning off, and compare how each engine's latency grows.

Usage: python benchmarks/onnx_models_cpu.py [--models resnet50 vgg19 ...] [--blocks 5] [--runs 3]
       [--threads N] [--profile resnet50] [--busy 1] [--no-ort-spinning]
"""

from __future__ import annotations

import argparse
import os
import sys


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=None, help="model names (default: all nine)")
    parser.add_argument("--blocks", type=int, default=5, help="alternating timing blocks per engine")
    parser.add_argument("--runs", type=int, default=3, help="runs per block")
    parser.add_argument("--threads", type=int, default=0, help="threads for both engines (0: their defaults)")
    parser.add_argument("--profile", default="", help="print plugrt's per-layer profile of this model")
    parser.add_argument(
        "--cpu-time",
        action="store_true",
        help="time with the calling thread's CPU time (with --threads 1: robust on a shared, busy machine)",
    )
    parser.add_argument("--busy", type=int, default=0, help="processes keeping one core busy each while timing")
    parser.add_argument("--no-ort-spinning", action="store_true", help="onnxruntime's threads block, never spin")
    return parser.parse_args()


ARGS = _parse() if __name__ == "__main__" else None
if ARGS is not None and ARGS.threads:
    # BLAS reads these when NumPy is imported, so they are set first.
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = str(ARGS.threads)

import glob  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import numpy_helper  # noqa: E402

from plugrt.onnx.compile import compile as compile_model  # noqa: E402

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def light_models() -> dict[str, str]:
    """Model name -> path of every light model in this onnx install."""
    paths = sorted(glob.glob(os.path.join(LIGHT, "light_*.onnx")))
    return {os.path.basename(p)[len("light_") : -len(".onnx")]: p for p in paths}


def runner_input(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """The input ONNX's backend test runner feeds a light model: ``arange(n).reshape(shape) / n``."""
    initializers = {t.name for t in model.graph.initializer}
    feeds = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        dims = value.type.tensor_type.shape.dim
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in dims)
        count = math.prod(shape)
        feeds[value.name] = (np.arange(count).reshape(shape) / count).astype(np.float32)
    return feeds


def expected_output(path: str) -> np.ndarray:
    """The stored expected output of a light model."""
    return numpy_helper.to_array(onnx.load_tensor(path[: -len(".onnx")] + "_output_0.pb"))


def ort_session(path: str, threads: int, optimized: bool = True) -> Any:
    """An onnxruntime CPU session: default options, or with every graph optimization off."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    if threads:
        options.intra_op_num_threads = threads
    if ARGS is not None and ARGS.no_ort_spinning:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if not optimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


CLOCK = time.perf_counter


def timed(fn: Callable[[], Any], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = CLOCK()
        fn()
        times.append(CLOCK() - start)
    return times


def measure(name: str, path: str, blocks: int, runs: int, threads: int) -> dict[str, Any]:
    model = onnx.load(path)
    feeds = runner_input(model)
    expected = expected_output(path)
    output = model.graph.output[0].name
    start = time.perf_counter()
    compiled = compile_model(model)
    compiled(feeds)
    build = time.perf_counter() - start
    session = ort_session(path, threads)
    plain = ort_session(path, threads, optimized=False)
    checks = {
        engine: bool(np.allclose(result, expected, rtol=2e-3, atol=1e-7))
        for engine, result in (("plugrt", compiled(feeds)[output]), ("onnxruntime", session.run([output], feeds)[0]))
    }

    def plugrt_run() -> None:
        compiled(feeds)

    def ort_run() -> None:
        session.run([output], feeds)

    def plain_run() -> None:
        plain.run([output], feeds)

    ours: list[float] = []
    theirs: list[float] = []
    unoptimized: list[float] = []
    plain_run()
    for _ in range(blocks):
        theirs += timed(ort_run, runs)
        time.sleep(0.05)
        ours += timed(plugrt_run, runs)
        time.sleep(0.05)
        unoptimized += timed(plain_run, runs)
        time.sleep(0.05)
    plugrt_ms, ort_ms, plain_ms = min(ours) * 1e3, min(theirs) * 1e3, min(unoptimized) * 1e3
    matches = "/".join("yes" if checks[e] else "NO" for e in ("plugrt", "onnxruntime"))
    return {
        "model": name,
        "plugrt_ms": plugrt_ms,
        "ort_ms": ort_ms,
        "ratio": plugrt_ms / ort_ms,
        "plain_ms": plain_ms,
        "plain_ratio": plugrt_ms / plain_ms,
        "build_s": build,
        "matches": matches,
    }


def profile(path: str, top: int = 12) -> None:
    """Per operator kind and slowest layers of one plugrt run (min over three runs)."""
    model = onnx.load(path)
    feeds = runner_input(model)
    compiled = compile_model(model)
    compiled(feeds)
    executor = compiled.context._executor
    times: dict[tuple[int, str, str], float] = {}
    for step in executor.steps:
        if step.layer.is_plugin:
            continue

        def wrapped(inputs: Any, outputs: Any, xp: Any, run: Any = step.node.run, step: Any = step) -> None:
            start = CLOCK()
            run(inputs, outputs, xp)
            key = (step.index, step.node.kind, f"{[tuple(a.shape) for a in inputs]} {step.node.describe()[:80]}")
            times[key] = min(times.get(key, math.inf), CLOCK() - start)

        step.node.run = wrapped
    executor._calls = None
    whole = min(timed(lambda: compiled(feeds), 3))
    kinds: dict[str, float] = {}
    for (_, kind, _), seconds in times.items():
        kinds[kind] = kinds.get(kind, 0.0) + seconds
    print(f"\nplugrt profile of {os.path.basename(path)}: {whole * 1e3:.1f} ms per run")
    for kind, seconds in sorted(kinds.items(), key=lambda kv: -kv[1]):
        print(f"  {kind:22s} {seconds * 1e3:8.1f} ms")
    print("  slowest layers:")
    for (index, kind, what), seconds in sorted(times.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {seconds * 1e3:8.2f} ms  #{index} {kind} {what}")


def geomean(values: list[float]) -> float:
    """The geometric mean."""
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main() -> None:
    global CLOCK
    assert ARGS is not None
    if ARGS.cpu_time:
        if ARGS.threads != 1:
            sys.exit("--cpu-time measures the calling thread only: use it with --threads 1")
        CLOCK = time.thread_time
    models = light_models()
    names = ARGS.models or list(models)
    unknown = [n for n in names if n not in models]
    if unknown:
        sys.exit(f"unknown models {unknown}; available: {sorted(models)}")
    import onnxruntime

    print(
        f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, NumPy {np.__version__}, onnxruntime {onnxruntime.__version__}, "
        f"threads: {ARGS.threads or 'defaults'}, clock: {'thread CPU time' if ARGS.cpu_time else 'wall'}, "
        f"busy processes: {ARGS.busy}, onnxruntime spinning: {'off' if ARGS.no_ort_spinning else 'on'}, "
        f"load {os.getloadavg()[0]:.2f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    print(
        "| model | plugrt (ms) | onnxruntime (ms) | ratio | onnxruntime, no graph optimizations (ms) | ratio "
        "| plugrt build (s) | expected output (plugrt/ort) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    ratios, plain_ratios = [], []
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from real_models_cpu import busy_cores

    with busy_cores(ARGS.busy):
        for name in names:
            row = measure(name, models[name], ARGS.blocks, ARGS.runs, ARGS.threads)
            ratios.append(row["ratio"])
            plain_ratios.append(row["plain_ratio"])
            print(
                f"| {name} | {row['plugrt_ms']:.1f} | {row['ort_ms']:.1f} | {row['ratio']:.2f} | {row['plain_ms']:.1f} "
                f"| {row['plain_ratio']:.2f} | {row['build_s']:.1f} | {row['matches']} |",
                flush=True,
            )
    print(f"| **geometric mean** | | | **{geomean(ratios):.2f}** | | **{geomean(plain_ratios):.2f}** | | |")
    if ARGS.profile:
        profile(models[ARGS.profile])


if __name__ == "__main__":
    main()
