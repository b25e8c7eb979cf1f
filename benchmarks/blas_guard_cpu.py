"""What the BLAS thread guard costs around one small NumPy product, with two BLAS threads configured.

For the products of PP-OCR cls's small 1x1 convolutions at batch 1 (``[rows, C] @ [C, M]``), interleaved in
one process, the calling thread's CPU time, fastest of ``--blocks`` blocks of ``--runs`` calls, microseconds a
call: ``bare``, the product alone; ``one-thread``, inside the one-BLAS-thread guard (what every such product
had: the count set to one and back per call); ``bind``, inside :func:`~plugrt.ops.blas_threads.product_guard`'s
choice, made once (nothing where OpenBLAS runs the product on the calling thread anyway).

``PYTHONPATH=src python benchmarks/blas_guard_cpu.py``.
"""

from __future__ import annotations

import argparse
import os

os.environ["OPENBLAS_NUM_THREADS"] = "2"

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from plugrt.ops import blas_threads

#: rows (N*H*W), input channels, output channels
PRODUCTS = [(576, 8, 8), (1152, 8, 24), (288, 16, 88), (288, 104, 16), (192, 104, 32), (192, 32, 200)]


def _fastest(call: Callable[[], None], runs: int) -> float:
    start = time.thread_time()
    for _ in range(runs):
        call()
    return (time.thread_time() - start) / runs


def _product(x: np.ndarray, w: np.ndarray, out: np.ndarray, guard: Any) -> Callable[[], None]:
    def bare() -> None:
        np.matmul(x, w, out=out)

    def guarded() -> None:
        with guard:
            np.matmul(x, w, out=out)

    return bare if guard is None else guarded


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=7)
    parser.add_argument("--runs", type=int, default=1000)
    args = parser.parse_args()
    print(
        f"# OpenBLAS {blas_threads._version()}, configured threads {blas_threads.engine_threads()}, load "
        f"{os.getloadavg()[0]:.2f}"
    )
    print("| rows x C -> M | multiply-adds | bare | one-thread | bind | bind's guard |")
    print("|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for rows, channels, maps in PRODUCTS:
        x = rng.standard_normal((rows, channels), dtype=np.float32)
        w = rng.standard_normal((channels, maps), dtype=np.float32)
        out = np.empty((rows, maps), np.float32)
        one = blas_threads.one_blas_thread()
        bound = blas_threads.product_guard(rows, maps, channels) or one
        ways = [_product(x, w, out, None), _product(x, w, out, one), _product(x, w, out, bound)]
        best = [math.inf] * len(ways)
        for _ in range(args.blocks):
            for k, way in enumerate(ways):
                best[k] = min(best[k], _fastest(way, args.runs))
        kind = "none" if bound is not one else "one thread"
        cells = " | ".join(f"{t * 1e6:.2f}" for t in best)
        print(f"| {rows} x {channels} -> {maps} | {rows * channels * maps} | {cells} | {kind} |")


if __name__ == "__main__":
    main()
