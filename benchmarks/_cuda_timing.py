"""CUDA-event timing shared by the GPU micro-benchmarks (``gpu_depthwise.py``, ``gpu_transpose_copy.py``)."""

from __future__ import annotations

from collections.abc import Callable


def launch_us(run: Callable[[], object], repeats: int, warmup: int = 10) -> float:
    """Microseconds a call of ``run`` (work queued on CuPy's current stream) takes: CUDA events around ``repeats``
    back-to-back calls after ``warmup`` untimed ones, divided by ``repeats``."""
    import cupy as cp

    for _ in range(warmup):
        run()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    for _ in range(repeats):
        run()
    end.record()
    end.synchronize()
    return float(cp.cuda.get_elapsed_time(start, end)) * 1e3 / repeats
