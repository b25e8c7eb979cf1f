"""The optional PyTorch tactic on real models: plugrt with NumPy only, plugrt with torch, onnxruntime.

The models, exports, profiles and inputs are ``real_models_cpu.py``'s (exports cached in
``--cache``). Each model is built twice by plugrt, once with ``PLUGRT_TORCH=0`` (every
layer on its NumPy kernel) and once with the torch tactic timed per layer, and the three
engines are timed in alternating blocks in one process with the same thread count
(onnxruntime's spinning off). Reported: the fastest run of each, the ratios to
onnxruntime, how many layers chose torch, and the largest output difference between the
two plugrt engines relative to the output's largest value. ``--busy N`` starts N
processes that each keep one core busy (pure Python spinning) for the whole run and
stops them at the end: the under-load measurement.

Usage: python benchmarks/torch_cpu_models.py [--models resnet18 ...] [--threads 2] [--busy 1]
"""

from __future__ import annotations

import argparse
import os
import sys


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=None, help="model names (default: the CNN/RNN/packaged ones)")
    parser.add_argument("--threads", type=int, default=2, help="threads of every engine")
    parser.add_argument("--blocks", type=int, default=3, help="alternating timing blocks per engine")
    parser.add_argument("--runs", type=int, default=3, help="runs per block")
    parser.add_argument("--busy", type=int, default=0, help="processes keeping one core busy each while measuring")
    parser.add_argument("--cache", default=os.path.expanduser("~/.cache/plugrt-real-models"), help="export cache")
    return parser.parse_args()


ARGS = _parse() if __name__ == "__main__" else None
if ARGS is not None:
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = str(ARGS.threads)

import math  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_models_cpu as real  # noqa: E402

DEFAULT_MODELS = [
    "mobilenetv2",
    "resnet18",
    "bilstm",
    "crnn",
    "ppocr-det",
    "ppocr-rec",
    "ppocr-cls",
    "magika",
    "whisper-encoder",
]


def _build(path: str, shapes: dict[str, Any], torch_on: bool) -> Any:
    from plugrt.onnx.compile import compile as compile_model

    previous = os.environ.get("PLUGRT_TORCH")
    os.environ["PLUGRT_TORCH"] = "1" if torch_on else "0"
    try:
        return compile_model(path, shapes=shapes or None)
    finally:
        if previous is None:
            os.environ.pop("PLUGRT_TORCH", None)
        else:
            os.environ["PLUGRT_TORCH"] = previous


def _fastest(run: Callable[[], Any], runs: int) -> float:
    best = math.inf
    for _ in range(runs):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def measure(model: Any, cache: str, threads: int, blocks: int, runs: int) -> dict[str, Any]:
    """Build both plugrt engines and onnxruntime's session; time all three at batch 1 and the larger batch."""
    import onnxruntime as ort

    row: dict[str, Any] = {"model": model.name}
    path = model.source(cache)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    fitted = real._fit_profile(path, model.shapes)
    try:
        start = time.perf_counter()
        numpy_engine = _build(path, fitted, False)
        row["build_numpy_s"] = time.perf_counter() - start
        start = time.perf_counter()
        torch_engine = _build(path, fitted, True)
        row["build_torch_s"] = time.perf_counter() - start
    except Exception as exc:
        row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[-1][:90]}"
        return row
    layers = torch_engine.engine.plan.layers
    row["torch_layers"] = f"{sum(1 for layer in layers if layer.tactic == 1)}/{len(layers)}"
    for label, batch in (("b1", 1), ("bN", model.batch)):
        feeds = real._feeds_for(model, path, batch)
        if any(
            name in fitted and any(not lo <= d <= hi for d, lo, hi in zip(a.shape, fitted[name][0], fitted[name][2]))
            for name, a in feeds.items()
        ):
            continue
        try:
            ours, theirs = numpy_engine(**feeds), torch_engine(**feeds)
        except Exception as exc:
            row[label] = f"run failed: {type(exc).__name__}: {str(exc)[:80]}"
            continue
        first, second = next(iter(ours.values())), next(iter(theirs.values()))
        scale = max(float(np.abs(first).max()), 1e-30)
        row[f"{label}_diff"] = float(np.abs(np.asarray(first, np.float64) - second).max()) / scale
        best = [math.inf] * 3
        engines = (
            lambda f=feeds: numpy_engine(**f),
            lambda f=feeds: torch_engine(**f),
            lambda f=feeds: session.run(None, f),
        )
        for _ in range(blocks):
            for k, run in enumerate(engines):
                best[k] = min(best[k], _fastest(run, runs))
        row[label] = tuple(b * 1e3 for b in best)
    return row


def _cell(row: dict[str, Any], label: str) -> str:
    value = row.get(label)
    if not isinstance(value, tuple):
        return str(value or "-")
    numpy_ms, torch_ms, ort_ms = value
    return f"{numpy_ms:.1f} / {torch_ms:.1f} / {ort_ms:.1f} ms = {numpy_ms / ort_ms:.2f}x / {torch_ms / ort_ms:.2f}x"


def main() -> None:
    assert ARGS is not None
    models = {m.name: m for m in real._exported_models() + real._packaged_models()}
    chosen = [models[name] for name in (ARGS.models or DEFAULT_MODELS) if name in models]
    with real.busy_cores(ARGS.busy):
        print(
            f"# threads {ARGS.threads}, busy processes {ARGS.busy}, load {os.getloadavg()[0]:.2f}, "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
        )
        print("| model | torch layers | batch 1: numpy / torch / ORT = numpy/ORT / torch/ORT | larger batch | diff |")
        print("|---|---|---|---|---|")
        ratios: dict[str, list[float]] = {"numpy": [], "torch": []}
        for model in chosen:
            row = measure(model, ARGS.cache, ARGS.threads, ARGS.blocks, ARGS.runs)
            if "error" in row:
                print(f"| {model.name} | {row['error']} | | | |", flush=True)
                continue
            for label in ("b1", "bN"):
                value = row.get(label)
                if isinstance(value, tuple):
                    ratios["numpy"].append(value[0] / value[2])
                    ratios["torch"].append(value[1] / value[2])
            diff = max(row.get("b1_diff", 0.0), row.get("bN_diff", 0.0))
            print(
                f"| {model.name} | {row['torch_layers']} | {_cell(row, 'b1')} | {_cell(row, 'bN')} | {diff:.1e} |",
                flush=True,
            )
        for name, values in ratios.items():
            if values:
                mean = math.exp(sum(math.log(v) for v in values) / len(values))
                print(f"# geometric mean {name}/ORT over {len(values)} runs: {mean:.2f}x")
        print(f"# load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
