"""Products with a bias on the GPU, in the forms an engine can call: which cuBLAS path is fastest per shape.

For the products of BERT-base and ViT-B/16 at batch 1 (M = 128 / 197 rows) and batch 32, and of the d512 transformer
block at batch 1 (M = 128), times (CUDA events, median of 50 after warm-up) ``addmm`` with a 1-D bias (cuBLASLt's
bias epilogue), ``mm`` then an in-place bias add, and ``addmm`` with the bias expanded to the output's dims (cuBLAS
with beta = 1 over a copy of the bias); FP32, or ``--half`` FP16; ``--host`` also prints each form's host time a call
(what an eager run pays to launch it).

Usage: python benchmarks/gpu_product_forms.py [--half] [--host]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from typing import Any


def _mm_add(torch: Any, a: Any, b: Any, bias: Any, out: Any) -> None:
    torch.mm(a, b, out=out).add_(bias)


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", action="store_true", help="FP16 operands (default FP32)")
    parser.add_argument("--host", action="store_true", help="also the host's time a call, us (median of 200)")
    args = parser.parse_args()
    dtype = torch.float16 if args.half else torch.float32
    torch.manual_seed(0)
    shapes = [(128, 512, 1536), (128, 512, 512), (128, 512, 2048), (128, 2048, 512),
              (128, 768, 768), (128, 768, 3072), (128, 3072, 768), (197, 768, 768), (197, 768, 3072),
              (4096, 768, 768), (4096, 768, 3072), (6304, 3072, 768)]  # fmt: skip
    print(f"{dtype}: M K N | addmm(bias) | mm + add_ | addmm(expanded bias) | ms" + " | host us" * args.host)
    for m, k, n in shapes:
        a, b, bias = (torch.randn(*s, device="cuda", dtype=dtype) for s in ((m, k), (k, n), (n,)))
        out = torch.empty(m, n, device="cuda", dtype=dtype)
        wide = bias.expand(m, n)
        forms = {
            "addmm": functools.partial(torch.addmm, bias, a, b, out=out),
            "mm+add": functools.partial(_mm_add, torch, a, b, bias, out),
            "addmm-expanded": functools.partial(torch.addmm, wide, a, b, out=out),
        }
        times = {}
        for name, call in forms.items():
            for _ in range(10):
                call()
            samples = []
            for _ in range(50):
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                call()
                stop.record()
                stop.synchronize()
                samples.append(start.elapsed_time(stop))
            times[name] = statistics.median(samples)
        host = {}
        for name, call in forms.items() if args.host else ():
            spent = []
            for _ in range(200):
                began = time.perf_counter()
                call()
                spent.append((time.perf_counter() - began) * 1e6)
            torch.cuda.synchronize()
            host[name] = statistics.median(spent)
        hosts = " | " + " / ".join(f"{host[f]:.1f}" for f in forms) if host else ""
        print(f"{m} {k} {n} | " + " | ".join(f"{times[f]:.4f}" for f in forms) + hosts)


if __name__ == "__main__":
    main()
