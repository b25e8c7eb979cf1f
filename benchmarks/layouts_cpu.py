"""The timed channels-last choice against every candidate channels-last, on the real CNN models at batch 1.

Each model (``real_models_cpu.py``'s exports and packaged models, its profiles and inputs) is built twice in
one process: with the default, timed tactics and channels-last choice (``builder/layouts.py``), and with
``PLUGRT_TORCH=nhwc`` (the channels-last kernel on every layer that has one, the torch kernel on every other
layer that has one, untimed). The two engines then run in alternating blocks, and the fastest run of each is
reported (the calling thread's CPU time), with each build's time and how many layers run channels-last.

``PYTHONPATH=src python benchmarks/layouts_cpu.py --models ppocr-cls mobilenetv2 magika resnet18 ppocr-det
ppocr-rec --threads 1``
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time


def main() -> None:
    """Build, time and print one line per model."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=["ppocr-cls", "mobilenetv2"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--blocks", type=int, default=5)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--cache", default=os.path.expanduser("~/.cache/plugrt-real-models"))
    args = parser.parse_args()
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = str(args.threads)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import real_models_cpu as real

    from plugrt.onnx.compile import compile as compile_model
    from plugrt.ops.torch_cpu import CHANNELS_LAST_TACTIC

    models = {m.name: m for m in real._exported_models() + real._packaged_models()}
    print(
        f"# threads {args.threads}, thread clock, load {os.getloadavg()[0]:.2f}, {time.strftime('%H:%M UTC', time.gmtime())}"
    )
    for name in args.models:
        model = models[name]
        path = model.source(args.cache)
        shapes = real._fit_profile(path, model.shapes) or None
        engines, notes = {}, []
        for label, switch in (("timed", None), ("nhwc", "nhwc")):
            if switch is not None:
                os.environ["PLUGRT_TORCH"] = switch
            start = time.perf_counter()
            try:
                engines[label] = compile_model(path, shapes=shapes)
            finally:
                os.environ.pop("PLUGRT_TORCH", None)
            layers = engines[label].engine.plan.layers
            taken = sum(layer.tactic == CHANNELS_LAST_TACTIC for layer in layers)
            notes.append(f"{label}: build {time.perf_counter() - start:.1f} s, {taken} channels-last")
        feeds = real._feeds_for(model, path, 1)
        best = dict.fromkeys(engines, math.inf)
        for _ in range(args.blocks):
            for label, engine in engines.items():
                engine(**feeds)
                for _ in range(args.runs):
                    start = time.thread_time()
                    engine(**feeds)
                    best[label] = min(best[label], time.thread_time() - start)
        times = ", ".join(f"{label} {t * 1e3:.3f} ms" for label, t in best.items())
        print(f"{name}: {times} ({'; '.join(notes)}; load {os.getloadavg()[0]:.2f})", flush=True)


if __name__ == "__main__":
    main()
