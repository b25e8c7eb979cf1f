"""Peak memory and build time of real models on the CPU: plugrt against onnxruntime, each in a child process.

For each model of ``real_models_cpu.py`` (exported or packaged, from its cache) one child
process per engine loads the model, builds it (plugrt: ``plugrt.compile`` with the model's
dynamic profile; onnxruntime: an ``InferenceSession``) and runs it once at batch 1. Each
child reports its resident memory before the build, its peak (``VmHWM`` from
``/proc/self/status``, else ``getrusage``'s ``ru_maxrss``) after the build and after the
run, and the build's wall and CPU seconds; the weights' size is the model's initializer
bytes. Peaks include the interpreter and the libraries each engine imports: plugrt's
optional PyTorch tactic imports torch (~190 MB) where a layer needs one of its kernels (with
oneDNN's library installed, only layers that none of its direct kernels runs), and numba's
compiled loops numba (~100 MB with llvmlite); the last column says which of the two the child
imported; ``PLUGRT_TORCH=0`` turns the tactic off).

Usage: python benchmarks/real_models_memory.py [--models bert vit ...]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))


def _resident() -> tuple[float, float]:
    """(current, peak) resident memory in MB."""
    found: dict[str, float] = {}
    try:
        with open("/proc/self/status") as status:
            for line in status:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    found[key] = int(value.split()[0]) / 1024
    except OSError:
        pass
    peak = found.get("VmHWM", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return found.get("VmRSS", peak), peak


def child(engine: str, name: str, cache: str) -> dict[str, Any]:
    """Build and run one model with one engine in this process; what it measured."""
    sys.path.insert(0, HERE)
    import real_models_cpu as models

    model = next(m for m in models._exported_models() + models._packaged_models() if m.name == name)
    path = model.source(cache)
    feeds = models._feeds_for(model, path, 1)
    before = _resident()[0]
    start, cpu = time.perf_counter(), time.process_time()
    if engine == "ort":
        import onnxruntime as ort

        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        run = lambda: session.run(None, feeds)  # noqa: E731
    else:
        from plugrt.onnx.compile import compile as compile_model

        compiled = compile_model(path, shapes=models._fit_profile(path, model.shapes) or None)
        run = lambda: compiled(**feeds)  # noqa: E731
    build_s, build_cpu = time.perf_counter() - start, time.process_time() - cpu
    built = _resident()[1]
    run()
    peak = _resident()[1]
    return {
        "before": before,
        "built": built,
        "run": peak,
        "build_s": build_s,
        "build_cpu": build_cpu,
        "torch": "torch" in sys.modules,
        "numba": "numba" in sys.modules,
    }


def _weights_mb(path: str) -> float:
    import onnx

    model = onnx.load(path)
    return sum(len(t.raw_data) or onnx.numpy_helper.to_array(t).nbytes for t in model.graph.initializer) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=["bert"], help="model names (default: bert)")
    parser.add_argument("--cache", default=os.path.expanduser("~/.cache/plugrt-real-models"), help="export cache")
    parser.add_argument("--child", nargs=2, metavar=("ENGINE", "MODEL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args.cache)))
        return
    sys.path.insert(0, HERE)
    import real_models_cpu as models

    print(f"# load {os.getloadavg()[0]:.2f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(
        "| model | weights MB | engine | RSS before build MB | peak after build MB | peak after run MB "
        "| / onnxruntime's | build s (CPU s) | imported |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.models:
        model = next(m for m in models._exported_models() + models._packaged_models() if m.name == name)
        weights = _weights_mb(model.source(args.cache))
        peaks: dict[str, float] = {}
        for engine in ("ort", "plugrt"):
            command = [sys.executable, __file__, "--child", engine, name, "--cache", args.cache]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(f"| {name} | {weights:.0f} | {engine} | failed: {done.stderr.strip().splitlines()[-1:]} ||||||")
                continue
            r = json.loads(done.stdout.strip().splitlines()[-1])
            peaks[engine] = r["run"]
            ratio = f"{r['run'] / peaks['ort']:.2f}x" if engine != "ort" and "ort" in peaks else "-"
            print(
                f"| {name} | {weights:.0f} | {engine} | {r['before']:.0f} | {r['built']:.0f} | {r['run']:.0f} | {ratio} "
                f"| {r['build_s']:.1f} ({r['build_cpu']:.1f}) | {', '.join(m for m in ('torch', 'numba') if r[m]) or '-'} |",
                flush=True,
            )
    print(f"# load {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
