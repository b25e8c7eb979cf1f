"""How fast a GPU transpose copies: CuPy's strided assignment (the shuffle kernel's) against PyTorch's ``copy_``.

The transformer block's export (``nn.MultiheadAttention``) moves its activations through transposes that the
attention fusion does not take in: ``[B, S, D] -> [S, B, D]``, the 5-D ``[S, B, 3, D] -> [3, S, B, D]`` of the
packed projection, ``[S, B*H, d] -> [B*H, S, d]`` per head split. Each is one copy of a permuted view per run;
this times the two ways of making it, on the same buffers, with CUDA events over graph-free loops.

Usage: python benchmarks/gpu_transpose_copy.py [--batch 32] [--repeats 200]
"""

from __future__ import annotations

import argparse
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()

    import cupy as cp
    import torch
    from _cuda_timing import launch_us

    b, s, d, h = args.batch, 128, 512, 8
    cases = [
        ("[B,S,D] -> [S,B,D]", (b, s, d), (1, 0, 2)),
        ("[S,B,3,D] -> [3,S,B,D]", (s, b, 3, d), (2, 0, 1, 3)),
        ("[S,B*H,d] -> [B*H,S,d]", (s, b * h, d // h), (1, 0, 2)),
    ]
    print(f"batch {b}, fp16 and fp32, us per copy (CUDA events, {args.repeats} copies)")
    for dtype in ("float16", "float32"):
        for name, shape, perm in cases:
            x = cp.random.standard_normal(shape).astype(dtype)
            out = cp.empty(tuple(shape[p] for p in perm), dtype=dtype)
            xt, ot = torch.as_tensor(x, device="cuda"), torch.as_tensor(out, device="cuda")
            source, source_t = x.transpose(perm), xt.permute(*perm)

            def with_cupy(out: Any = out, source: Any = source) -> None:
                out[...] = source

            def with_torch(ot: Any = ot, source_t: Any = source_t) -> None:
                ot.copy_(source_t)

            times = [launch_us(run, args.repeats) for run in (with_cupy, with_torch)]
            moved = 2 * x.nbytes / 1e9
            rates = "  ".join(f"{moved / (t * 1e-6):.0f} GB/s" for t in times)
            print(f"  {dtype} {name:24s} cupy {times[0]:7.1f}  torch {times[1]:7.1f}  ({rates})")


if __name__ == "__main__":
    main()
