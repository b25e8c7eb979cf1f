"""plugrt on a busy machine: its layers in parts or whole, the parts taken by the compiled loop or as Python items,
against onnxruntime, interleaved in one process while other processes keep cores busy.

The engine on a machine whose other cores are busy runs its oneDNN primitives on one thread, and a layer of
enough work (convolutions, LSTMs, products by a constant matrix) in parts that this thread and the helper take in
turn (``ops/onednn_parts.py``), the helper kept off the caller's core (``ops/host_threads.py``). This script builds
each model three times and times, in alternating blocks with onnxruntime (same thread count, its spinning off):

- ``whole``: no parts (every layer one one-thread primitive),
- ``parts, Python items``: parts, each a Python item of ``host_threads.pulled_by_two`` (the engine without numba),
- ``parts`` (the engine as it is, with numba): parts taken by the compiled loop (``ops/parts_numba_loops.py``).

Models come from ``real_models_cpu.py`` (its export cache; ``--models name:batch ...``). Reports the median over
blocks of the fastest run of each block, in ms.

Usage: python benchmarks/busy_cpu.py [--models resnet18:1 mobilenetv2:8 ...] [--busy 1] [--blocks 7] [--runs 3]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import real_models_cpu as models

from plugrt.ops import onednn_parts

DEFAULT = ["resnet18:1", "resnet18:8", "mobilenetv2:1", "mobilenetv2:8", "magika:8", "crnn:1", "ppocr-rec:1"]


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=DEFAULT, help="model:batch pairs")
    parser.add_argument("--busy", type=int, default=1, help="processes keeping one core busy each")
    parser.add_argument("--threads", type=int, default=2, help="threads of both engines")
    parser.add_argument("--blocks", type=int, default=7, help="alternating timing blocks per engine")
    parser.add_argument("--runs", type=int, default=3, help="runs per block (the fastest counts)")
    parser.add_argument("--cache", default=os.path.expanduser("~/.cache/plugrt-real-models"), help="export cache")
    return parser.parse_args()


@contextlib.contextmanager
def _variant(parts: bool, compiled: bool) -> Iterator[None]:
    """Parts made (at a layer's first busy run) or not; taken by the compiled loop or as Python items."""
    most, made = onednn_parts.MAX_PARTS, onednn_parts._Compiled.made
    onednn_parts.MAX_PARTS = most if parts else 0
    if not compiled:
        onednn_parts._Compiled.made = lambda *args: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        onednn_parts.MAX_PARTS, onednn_parts._Compiled.made = most, made  # type: ignore[method-assign]


VARIANTS = {"whole": (False, True), "parts, Python items": (True, False), "parts": (True, True)}


def _engines(path: str, shapes: dict[str, Any], feeds: dict[str, Any], threads: int) -> dict[str, Callable[[], Any]]:
    import onnxruntime as ort

    from plugrt.onnx.compile import compile as compile_model

    engines: dict[str, Callable[[], Any]] = {}
    for name, (parts, compiled) in VARIANTS.items():
        with _variant(parts, compiled):
            engine = compile_model(path, shapes=shapes or None)
            engine(**feeds)  # (busy: the parts are made here)

        def run(engine: Any = engine, parts: bool = parts, compiled: bool = compiled) -> Any:
            with _variant(parts, compiled):
                return engine(**feeds)

        engines[name] = run
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    engines["onnxruntime"] = lambda: session.run(None, feeds)
    return engines


def main() -> None:
    args = _parse()
    os.environ["OMP_NUM_THREADS"] = os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    known = {m.name: m for m in models._exported_models() + models._packaged_models()}
    print(f"# {os.uname().nodename} {os.cpu_count()} cores, threads {args.threads}, busy processes {args.busy}, "
          f"load {os.getloadavg()[0]:.2f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")  # fmt: skip
    print("| model | batch | " + " | ".join([*VARIANTS, "onnxruntime"]) + " | parts / onnxruntime |")
    print("|---|---|" + "---|" * (len(VARIANTS) + 2))
    with models.busy_cores(args.busy):
        for spec in args.models:
            name, batch = spec.split(":")
            model = known[name]
            path = model.source(args.cache)
            feeds = models._feeds_for(model, path, int(batch))
            engines = _engines(path, models._fit_profile(path, model.shapes), feeds, args.threads)
            times: dict[str, list[float]] = {k: [] for k in engines}
            for _ in range(args.blocks):
                for key, run in engines.items():
                    best = float("inf")
                    for _ in range(args.runs):
                        start = time.perf_counter()
                        run()
                        best = min(best, time.perf_counter() - start)
                    times[key].append(best)
            ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
            cells = " | ".join(f"{ms[k]:.2f}" for k in engines)
            print(f"| {name} | {batch} | {cells} | {ms['parts'] / ms['onnxruntime']:.2f}x |", flush=True)
    print(f"# load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
