"""CPU latency of the attention-OCR and CRNN examples: plugrt against onnxruntime, interleaved in one process.

    python benchmarks/ocr_latency.py [--batch 8] [--width 128] [--runs 30] [--threads 1] [--clock thread]

Exports both models from examples/attention_ocr.py in a child process (random weights; needs PyTorch
for the export; torch's threads would otherwise compete with NumPy's in the timed process),
checks that plugrt and onnxruntime agree, then times them call by call, alternating, and prints
the medians and their ratio (``--clock thread``: the calling thread's CPU time, steady on a loaded
machine when both engines run on the calling thread, as with one thread each). The attention decoder runs every step (the end-token bias is set
low so that no line stops early): the loop runs its full ``max_steps``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_examples() -> object:
    spec = importlib.util.spec_from_file_location("attention_ocr", os.path.join(ROOT, "examples", "attention_ocr.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["attention_ocr"] = module
    spec.loader.exec_module(module)
    return module


def export_both(folder: str, batch: int, width: int) -> None:
    """Export both models (in this process: call it from a child, so that torch's threads stay out of the timing)."""
    import torch

    ocr = load_examples()
    attention, crnn = ocr.build()  # type: ignore[attr-defined]
    with torch.no_grad():
        attention.decoder.classify.bias[ocr.END] -= 100.0  # type: ignore[attr-defined]
    ocr.export(attention, os.path.join(folder, "attention_ocr.onnx"), width=width, batch=batch)  # type: ignore[attr-defined]
    ocr.export(crnn, os.path.join(folder, "crnn.onnx"), width=width, batch=batch)  # type: ignore[attr-defined]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads")
    parser.add_argument("--clock", choices=("wall", "thread"), default="wall", help="wall time or thread CPU time")
    parser.add_argument("--export-to", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.export_to:
        export_both(args.export_to, args.batch, args.width)
        return 0
    import onnxruntime as ort

    import plugrt

    folder = tempfile.mkdtemp()
    command = [sys.executable, __file__, "--export-to", folder, "--batch", str(args.batch), "--width", str(args.width)]
    subprocess.run(command, check=True, capture_output=True)
    image = np.random.default_rng(0).random((args.batch, 1, 32, args.width), dtype=np.float32)
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # spinning distorts interleaving
    for name, file in (("attention OCR (Loop, 12 steps)", "attention_ocr.onnx"), ("CRNN", "crnn.onnx")):
        path = os.path.join(folder, file)
        ours = plugrt.compile(path)
        theirs = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        a = ours({"image": image})["out"]
        b = theirs.run(None, {"image": image})[0]
        agree = a.shape == b.shape and np.allclose(a, b, atol=1e-4)
        times: dict[str, list[float]] = {"plugrt": [], "onnxruntime": []}
        clock = time.thread_time if args.clock == "thread" else time.perf_counter
        for _ in range(args.runs):
            start = clock()
            ours({"image": image})
            times["plugrt"].append(clock() - start)
            start = clock()
            theirs.run(None, {"image": image})
            times["onnxruntime"].append(clock() - start)
        p, o = (statistics.median(times[k]) * 1e3 for k in ("plugrt", "onnxruntime"))
        print(f"{name}: batch {args.batch}, width {args.width}: plugrt {p:.2f} ms, onnxruntime {o:.2f} ms, "
              f"ratio {p / o:.2f}; outputs agree: {agree}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
