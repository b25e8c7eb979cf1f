"""A second thread for large elementwise and tap-sum kernels on the CPU.

NumPy releases the GIL inside its loops, so two Python threads each running a
half of a blocked kernel (every block a few ufunc calls over cache-sized
arrays) use both cores. The helper thread and the caller wait for each other by
blocking, never by spinning, so on a machine whose other core is taken the two
halves only share the cores with the other work, as onnxruntime's threads do
with spinning off: nothing collapses, unlike a spinning BLAS worker (which
``blas_threads.py`` keeps to one thread under load). Measured at load 11 on 2
cores: GELU over 4 M floats 387 -> 288 ms, a depthwise layer 157 -> 74 ms.
Work is split only when it is large (``MIN_PARALLEL_ELEMENTS``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

__all__ = ["MIN_PARALLEL_ELEMENTS", "in_two_parts"]

#: kernels over fewer elements than this run on the calling thread only
MIN_PARALLEL_ELEMENTS = 1 << 18

_LOCK = threading.Lock()
#: (process id, the helper): a forked child has no helper thread and makes its own
_POOL: list[tuple[int, ThreadPoolExecutor]] = []
_LOCAL = threading.local()


def _helper() -> ThreadPoolExecutor:
    with _LOCK:
        if not _POOL or _POOL[0][0] != os.getpid():
            _POOL[:] = [(os.getpid(), ThreadPoolExecutor(max_workers=1, thread_name_prefix="plugrt-kernel"))]
        return _POOL[0][1]


def _as_helper(work: Callable[[int, int, int], None], start: int, stop: int) -> None:
    _LOCAL.helper = True
    try:
        work(1, start, stop)
    finally:
        _LOCAL.helper = False


def in_two_parts(count: int, elements: int, work: Callable[[int, int, int], None]) -> None:
    """Run ``work(part, start, stop)`` over the items ``[0, count)``: as parts 0 and 1 on this thread and
    the helper when the ``elements`` they touch are many and there are two items; else as part 0 alone.
    The parts' items are disjoint; ``work`` must keep per-part scratch apart."""
    single = (
        count < 2
        or elements < MIN_PARALLEL_ELEMENTS
        or (os.cpu_count() or 1) < 2
        or getattr(_LOCAL, "helper", False)  # the helper itself never waits on the helper
    )
    if single:
        work(0, 0, count)
        return
    half = (count + 1) // 2
    future = _helper().submit(_as_helper, work, half, count)
    try:
        work(0, 0, half)
    finally:
        future.result()
