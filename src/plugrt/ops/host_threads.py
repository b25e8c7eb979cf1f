"""A second thread for large elementwise and tap-sum kernels on the CPU.

NumPy releases the GIL inside its loops, so two Python threads each running a
half of a blocked kernel (every block a few ufunc calls over cache-sized
arrays) use both cores. The helper thread and the caller wait for each other by
blocking, never by spinning, so on a machine whose other core is taken the two
halves only share the cores with the other work, as onnxruntime's threads do
with spinning off: nothing collapses, unlike a spinning BLAS worker (which
``blas_threads.py`` keeps to one thread under load). Measured at load 11 on 2
cores: GELU over 4 M floats 387 -> 288 ms, a depthwise layer 157 -> 74 ms.
Work is split only when it is large (``MIN_PARALLEL_ELEMENTS``), and only where the engine may use two threads
(``OPENBLAS_NUM_THREADS`` / ``OMP_NUM_THREADS`` of 2 or more, or unset on two cores): an engine asked for one thread
runs everything on the calling thread.

:func:`in_two_parts` halves the work; :func:`pulled_by_two` lets both threads take
the next of many items as they finish one, so when the other core is taken the
thread that still has a core does most of the work instead of waiting for the
other half (matrix products, ``ops/product_parts.py``; layers in parts without numba, ``ops/onednn_parts.py``);
:func:`taken_by_two` does the same for items that compiled code takes itself, without the GIL (layers in parts,
``ops/parts_numba_loops.py``).

On a busy machine (:func:`~plugrt.ops.blas_threads.machine_busy`) the helper keeps off the core the caller is
on when it takes work (its affinity, changed only when it differs): Linux's scheduler otherwise often wakes it
on the caller's core, where the two share one core while the other process keeps the other, and a split gains
nothing (two 25 ms halves took 50 ms there; kept apart, the work pulled by two took 23 instead of 28 ms on one
thread, docs/benchmarks.md). On a quiet machine it may run on every core the process may use.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from .blas_threads import engine_threads, machine_busy

__all__ = [
    "BUSY_RUNS",
    "MIN_PARALLEL_ELEMENTS",
    "SPIN_SECONDS",
    "in_two_parts",
    "on_helper",
    "pulled_by_two",
    "taken_by_two",
]

#: kernels over fewer elements than this run on the calling thread only
MIN_PARALLEL_ELEMENTS = 1 << 18
#: on a busy machine, :func:`in_two_parts` cuts its items into at most this many runs, taken as each thread is free
BUSY_RUNS = 8

_LOCK = threading.Lock()
#: (process id, the helper): a forked child has no helper thread and makes its own
_POOL: list[tuple[int, ThreadPoolExecutor]] = []
_LOCAL = threading.local()


def _helper() -> ThreadPoolExecutor:
    with _LOCK:
        if not _POOL or _POOL[0][0] != os.getpid():
            _POOL[:] = [(os.getpid(), ThreadPoolExecutor(max_workers=1, thread_name_prefix="plugrt-kernel"))]
        return _POOL[0][1]


def _caller_core() -> int | None:
    """The core this thread runs on, on a busy machine (where the helper keeps off it); else None."""
    if not machine_busy():
        return None
    if not _GETCPU:
        try:
            _GETCPU.append(ctypes.CDLL(None).sched_getcpu)
        except (OSError, AttributeError):
            _GETCPU.append(None)
    getcpu = _GETCPU[0]
    core = int(getcpu()) if getcpu is not None else -1
    return core if core >= 0 else None


#: libc's ``sched_getcpu`` (None where there is none), looked up once
_GETCPU: list[Callable[[], int] | None] = []


def _place(apart: int | None) -> None:
    """Keep the helper (the calling thread) off core ``apart``, or on every core the process may use (None)."""
    if not hasattr(os, "sched_setaffinity"):
        return
    allowed = getattr(_LOCAL, "allowed", None)
    if allowed is None:
        allowed = _LOCAL.allowed = _LOCAL.placed = frozenset(os.sched_getaffinity(0))
    wanted = allowed - {apart} if apart in allowed and len(allowed) > 1 else allowed
    if wanted != _LOCAL.placed:
        try:
            os.sched_setaffinity(0, wanted)
            _LOCAL.placed = wanted
        except OSError:
            pass


def _as_helper(work: Callable[[int, int, int], None], start: int, stop: int, apart: int | None) -> None:
    _place(apart)
    _LOCAL.helper = True
    try:
        work(1, start, stop)
    finally:
        _LOCAL.helper = False


def in_two_parts(count: int, elements: int, work: Callable[[int, int, int], None]) -> None:
    """Run ``work(part, start, stop)`` over the items ``[0, count)``: as parts 0 and 1 on this thread and
    the helper when the ``elements`` they touch are many and there are two items; else as part 0 alone.
    On a busy machine (:func:`~plugrt.ops.blas_threads.machine_busy`) the items are cut into up to
    :data:`BUSY_RUNS` runs that the two threads take as each is free (:func:`pulled_by_two`), so ``work`` is called
    several times, always with part 0 on this thread and part 1 on the helper: a half on the core the other
    process shares took twice as long as the other (DenseNet-121's batch-norm + ReLU chains 10 -> 23.5 ms a run
    under load, docs/benchmarks.md). The items of the calls are disjoint; ``work`` must keep per-part scratch
    apart."""
    single = count < 2 or elements < MIN_PARALLEL_ELEMENTS or not _two_threads_allowed()
    if single:
        work(0, 0, count)
        return
    if machine_busy():  # fixed halves wait for the one on the shared core: runs of items, taken as each is free
        runs = min(count, BUSY_RUNS)
        edges = [r * count // runs for r in range(runs + 1)]
        pulled_by_two(runs, lambda run: work(1 if on_helper() else 0, edges[run], edges[run + 1]))
        return
    half = (count + 1) // 2
    future = _helper().submit(_as_helper, work, half, count, _caller_core())
    try:
        work(0, 0, half)
    finally:
        future.result()


def on_helper() -> bool:
    """True on the helper thread while it runs a part or an item."""
    return bool(getattr(_LOCAL, "helper", False))


def _two_threads_allowed() -> bool:
    """Two cores, an engine allowed two threads or more (``OPENBLAS_NUM_THREADS`` / ``OMP_NUM_THREADS``,
    :func:`~plugrt.ops.blas_threads.engine_threads`: a caller that asked for one thread gets one), and not on the
    helper itself (it never waits on the helper)."""
    return (os.cpu_count() or 1) >= 2 and engine_threads() >= 2 and not getattr(_LOCAL, "helper", False)


class _Items:
    """The items of one :func:`pulled_by_two` call: which is next, how many the helper is running, its error."""

    def __init__(self, count: int, work: Callable[[int], None], apart: int | None) -> None:
        self.count = count
        self.work = work
        self.apart = apart  # the caller's core on a busy machine, which the helper keeps off
        self.next = 0
        self.running = 0  # items the helper has taken and not finished
        self.error: BaseException | None = None
        self.done = threading.Condition(threading.Lock())

    def take(self, helper: bool) -> int | None:
        with self.done:
            item = self.next
            if item >= self.count or self.error is not None:
                return None
            self.next = item + 1
            self.running += helper
            return item

    def help(self) -> None:
        """The helper's part: items until none is left (none at all when it starts late)."""
        _place(self.apart)
        _LOCAL.helper = True
        try:
            while (item := self.take(True)) is not None:
                try:
                    self.work(item)
                except BaseException as exc:  # raised on the caller's thread
                    with self.done:
                        self.error = self.error or exc
                finally:
                    with self.done:
                        self.running -= 1
                        self.done.notify_all()
        finally:
            _LOCAL.helper = False

    def wait(self) -> None:
        with self.done:
            self.done.wait_for(lambda: self.running == 0)
        if self.error is not None:
            raise self.error


def pulled_by_two(count: int, work: Callable[[int], None]) -> None:
    """Run ``work(item)`` for every item in ``[0, count)``, on this thread and the helper together: each
    takes the next item not yet taken when it is done with one. This thread never waits for the helper
    to start (on a busy machine it may get a core late, and then finds less or nothing left to do), only
    for the items the helper has taken. On one core, from the helper itself, or for fewer than two items,
    all run on this thread in order. The first exception stops both (items not yet taken are skipped)
    and is raised here; ``work`` must keep per-item output apart."""
    if count < 2 or not _two_threads_allowed():
        for index in range(count):
            work(index)
        return
    items = _Items(count, work, _caller_core())
    _helper().submit(items.help)
    try:
        while (item := items.take(False)) is not None:
            work(item)
    except BaseException:
        with items.done:
            items.next = count  # the helper takes nothing more
        items.wait()
        raise
    items.wait()


#: how long this thread spins for the items the helper took before it blocks (:func:`taken_by_two`): about a
#: scheduler slice, the time a helper that shares its core with another process may wait for it
SPIN_SECONDS = 0.002


class _Taking:
    """The helper's call of one :func:`taken_by_two`: its error, and when it returned."""

    def __init__(self, take: Callable[[], None]) -> None:
        self.take = take
        self.error: BaseException | None = None
        self.returned = threading.Event()

    def help(self, apart: int | None) -> None:
        _place(apart)
        _LOCAL.helper = True
        try:
            self.take()
        except BaseException as exc:  # raised on the caller's thread when it is still waiting
            self.error = exc
        finally:
            _LOCAL.helper = False
            self.returned.set()


def taken_by_two(take: Callable[[], None], finished: Callable[[float], bool], stop: Callable[[], None]) -> None:
    """Run work whose items compiled code takes itself, on this thread and the helper: ``take()`` takes the next
    item not yet taken (an atomic counter the two threads share, the GIL released) and runs it, until none is left;
    ``finished(seconds)`` spins, the GIL released, until every item taken is done (True) or the time is up (False);
    ``stop()`` leaves the items not yet taken untaken. This thread never waits for the helper to start, and waits
    for the items it took by spinning (up to :data:`SPIN_SECONDS`, then blocking until its ``take`` returns): a
    thread that sleeps on a busy machine gives its core to the other process and waits for a slice to get it back
    (the Python :func:`pulled_by_two` hands the GIL and a condition variable between the threads at every item).
    On one core or from the helper itself, ``take()`` on this thread alone. The first exception is raised here."""
    if not _two_threads_allowed():
        take()
        return
    call = _Taking(take)
    _helper().submit(call.help, _caller_core())
    try:
        take()
    except BaseException:
        stop()
        raise
    finally:
        if not finished(SPIN_SECONDS):
            call.returned.wait()
    if call.error is not None and call.returned.is_set():
        raise call.error
