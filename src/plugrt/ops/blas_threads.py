"""How many threads NumPy's BLAS may use for one matrix product.

OpenBLAS's worker threads wait for work by spinning. On a busy machine (another
process on a core) a spinning worker and the thread that has the work take turns
on the same core, and a product that takes 1 ms alone takes 30: a BiLSTM measured
48x slower than onnxruntime with two BLAS threads under load, 3.5x with one. And a
small product gains nothing from a second thread even on a quiet machine. So a
product runs on one thread unless it is large (``MIN_THREADED_FLOPS``) and the
machine has a core to spare: other processes kept fewer than the cores the engine does
not use, plus 0.3 of a core (:data:`BUSY_MARGIN`), busy since the last sample (:func:`others_cores`: the machine's
CPU time from ``/proc/stat`` less this process's own, sampled at most once a second, the first sample
at import). The one-minute load average, where ``/proc/stat`` is not there, counts this process's
own threads too (an engine timed against onnxruntime in one process saw "busy" from its
own runs and kept one thread on a quiet machine: ResNet-18 at two threads 16.6 against
onnxruntime's 8.4 ms) and lags a new load by a minute (a busy core seen only after the
kernels had run on two threads with one of them sharing it).

The BLAS is found among NumPy's bundled libraries (OpenBLAS, as NumPy's wheels
ship it); without one, nothing changes. The same rule sizes the optional PyTorch
kernels' thread pool (``ops/torch_cpu.py``): :func:`threads_for` gives the count a
kernel of that much work runs on, :func:`engine_threads` the count the engine may
use at most.

The engine's own matrix products (MatMul, Gemm, and the NumPy convolution's product of its kernel
by the columns) do not use the BLAS's threads at all: :func:`split_products` says when a product
runs as column or row blocks that this thread and one blocking helper thread take in turn, each
block a one-thread BLAS call (``ops/product_parts.py``), which keeps both cores busy on a quiet
machine and does not collapse on a busy one. Nor does it collapse beside PyTorch's kernels in one
run: OpenBLAS's workers go on spinning after a product, on the cores PyTorch's OpenMP threads then
need (MobileNetV2 at two threads, its first convolution on NumPy's kernel and the rest on oneDNN:
84-96 ms a batch of 8 with the BLAS's threads, 35-36 ms with the convolution's product in blocks).
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import threading
import time
from collections.abc import Callable, Iterator

__all__ = [
    "BLAS_ALONE_BELOW",
    "BUSY_MARGIN",
    "FIRST_SAMPLE_SECONDS",
    "GEMM_ALONE_AT_MOST",
    "MIN_THREADED_FLOPS",
    "SAMPLE_SECONDS",
    "STAY_BUSY_MARGIN",
    "blas_runs_alone",
    "blas_threads_for",
    "engine_threads",
    "machine_busy",
    "one_blas_thread",
    "others_cores",
    "product_guard",
    "quiet_blas_workers",
    "run_scope",
    "set_blas_threads",
    "split_products",
    "threads_for",
]

#: products with fewer floating-point operations than this run on one thread
MIN_THREADED_FLOPS = 2e7

#: seconds between two samples of the machine's CPU use (:func:`machine_busy`)
SAMPLE_SECONDS = 1.0
#: the machine turns busy when other processes keep more than the cores the engine leaves free plus this many
#: cores busy, and stays busy while they keep more than those plus :data:`STAY_BUSY_MARGIN` (a process that wants
#: a core gets about half of one beside an engine running its layers in parts on both: with one margin of half a
#: core BERT's runs went from busy to quiet and back every second, half of them on two-thread primitives whose
#: static halves waited on the shared core)
BUSY_MARGIN = 0.3
STAY_BUSY_MARGIN = 0.15

_LOCK = threading.Lock()
#: the last sample: when (monotonic), the machine's busy CPU seconds, this process's, the decision, the process
#: that took it, and whether the decision came from a measured interval (not the load average)
_load: dict[str, float | bool | None] = {
    "checked": -1e9, "machine": None, "own": 0.0, "busy": False, "pid": -1, "measured": False
}  # fmt: skip
#: the first decision measures the interval from the sample taken at import once this long has passed (rather than
#: trusting the load average, which lags a load that came or went by a minute)
FIRST_SAMPLE_SECONDS = 0.2


def _libraries() -> Iterator[ctypes.CDLL]:
    """NumPy's bundled OpenBLAS libraries that load."""
    import numpy as np

    folder = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    for path in sorted(glob.glob(os.path.join(folder, "*openblas*"))):
        try:
            yield ctypes.CDLL(path)
        except OSError:
            continue


def _find() -> tuple[Callable[[int], None], Callable[[], int]] | None:
    for library in _libraries():
        for prefix, suffix in (("scipy_openblas", "64_"), ("scipy_openblas", ""), ("openblas", "")):
            setter = getattr(library, f"{prefix}_set_num_threads{suffix}", None)
            getter = getattr(library, f"{prefix}_get_num_threads{suffix}", None)
            if setter is not None and getter is not None:
                setter.argtypes, getter.restype = [ctypes.c_int], ctypes.c_int
                return setter, getter
    return None


_BLAS = _find()
_CONFIGURED = _BLAS[1]() if _BLAS is not None else 1


def quiet_blas_workers() -> None:
    """Make every engine run from now on keep the BLAS on one thread (:func:`run_scope`); called where a PyTorch
    CPU kernel is bound. OpenBLAS's workers spin on their cores for a long time after each product that used
    them, and torch's OpenMP workers then get half a core: PP-OCRv4 det on two threads took 47 ms a run against
    23 on one (its deconvolution's products on two BLAS threads), 20.5 with this (docs/benchmarks.md). Products
    large enough to split still run on two threads, as blocks on the engine's helper thread
    (:func:`split_products`); :func:`engine_threads` is unchanged, and so is the BLAS between runs (the
    caller's own products)."""
    _QUIET["wanted"] = 1


class _QuietRuns:
    """One BLAS thread while any engine run is inside (counted: contexts may run in several threads)."""

    __slots__ = ()

    def __enter__(self) -> None:
        with _LOCK:
            _QUIET["runs"] += 1
            if _QUIET["runs"] == 1:
                assert _BLAS is not None
                _BLAS[0](1)

    def __exit__(self, *exc: object) -> None:
        with _LOCK:
            _QUIET["runs"] -= 1
            if _QUIET["runs"] == 0:
                assert _BLAS is not None
                _BLAS[0](_CONFIGURED)


#: whether PyTorch's CPU kernels are bound in this process, and how many engine runs are inside :func:`run_scope`
_QUIET: dict[str, int] = {"wanted": 0, "runs": 0}
_QUIET_RUNS = _QuietRuns()


def run_scope() -> contextlib.AbstractContextManager[None]:
    """What an engine run on the CPU enters: one BLAS thread for its duration where PyTorch's CPU kernels are
    bound in this process (:func:`quiet_blas_workers`), else nothing."""
    if _BLAS is None or _CONFIGURED <= 1 or not _QUIET["wanted"]:
        return _NOTHING
    return _QUIET_RUNS


def set_blas_threads(count: int) -> None:
    """Set the BLAS thread count (no effect without a known BLAS)."""
    if _BLAS is not None:
        _BLAS[0](max(1, int(count)))


def _machine_cpu_seconds(path: str = "/proc/stat") -> float | None:
    """The CPU seconds every core of the machine spent busy since boot (``/proc/stat``'s first line: user, nice,
    system, irq, softirq and steal time; not idle or I/O wait), or None where the file is not there or not
    in that form."""
    try:
        with open(path, "rb") as handle:
            words = handle.readline().split()
    except OSError:
        return None
    if len(words) < 9 or words[0] != b"cpu" or not all(w.isdigit() for w in words[1:9]):
        return None
    user, nice, system, _, _, irq, softirq, steal = (int(w) for w in words[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _own_cpu_seconds() -> float:
    """This process's CPU seconds (every thread's, user and system)."""
    times = os.times()
    return times.user + times.system


def others_cores(
    machine: float | None, own: float, last_machine: float | None, last_own: float, seconds: float
) -> float | None:
    """The cores other processes kept busy over ``seconds`` between two samples of the machine's busy CPU
    seconds (``machine``) and this process's (``own``); None where the machine's time is unknown."""
    if machine is None or last_machine is None or seconds <= 0:
        return None
    return max(0.0, (machine - last_machine) - (own - last_own)) / seconds


def _busy_by_load() -> bool:
    try:
        return os.getloadavg()[0] > (os.cpu_count() or 1) - 0.5
    except OSError:
        return False


def _sample() -> None:
    """Take the first sample (this module's import): the machine's and this process's CPU time, the load average's
    decision until a first interval is measured."""
    _load.update(
        checked=time.monotonic(),
        machine=_machine_cpu_seconds(),
        own=_own_cpu_seconds(),
        busy=_busy_by_load(),
        pid=os.getpid(),
        measured=False,
    )


def _machine_busy() -> bool:
    now = time.monotonic()
    if _load["pid"] != os.getpid():  # a forked process: the parent's sample counts the parent's CPU time
        _load.update(checked=-1e9, machine=None, pid=os.getpid(), measured=False)
    seconds = now - float(_load["checked"])  # type: ignore[arg-type]
    if seconds <= SAMPLE_SECONDS and (_load["measured"] or seconds < FIRST_SAMPLE_SECONDS):
        return bool(_load["busy"])
    machine, own = _machine_cpu_seconds(), _own_cpu_seconds()
    last_machine = _load["machine"]
    others = others_cores(machine, own, last_machine, float(_load["own"]), seconds)  # type: ignore[arg-type]
    if others is None:  # no /proc/stat, or the first sample
        busy = _busy_by_load()
    else:
        cores = os.cpu_count() or 1
        margin = STAY_BUSY_MARGIN if _load["busy"] else BUSY_MARGIN
        busy = others > cores - min(engine_threads(), cores) + margin
    _load.update(checked=now, machine=machine, own=own, busy=busy, measured=others is not None)
    return busy


def machine_busy() -> bool:
    """True when the machine has no core to spare: other processes kept more cores busy since the last sample
    (at most :data:`SAMPLE_SECONDS` old) than the engine leaves free, plus :data:`BUSY_MARGIN` of a core (once
    busy, plus :data:`STAY_BUSY_MARGIN`: :func:`others_cores`), the first interval measured from the module's
    import once :data:`FIRST_SAMPLE_SECONDS` have passed; sooner, or without ``/proc/stat``, when the one-minute
    load average is above the core count minus one half. Kernels then run on one thread."""
    return _machine_busy()


def engine_threads() -> int:
    """The most threads a kernel of the engine uses: the BLAS's configured count (``OPENBLAS_NUM_THREADS``,
    else the cores), or ``OMP_NUM_THREADS`` else the cores without a known BLAS."""
    if _BLAS is not None:
        return max(1, _CONFIGURED)
    try:
        return max(1, int(os.environ.get("OMP_NUM_THREADS", "")))
    except ValueError:
        return os.cpu_count() or 1


def threads_for(flops: float, least: float = MIN_THREADED_FLOPS) -> int:
    """Threads for a kernel of ``flops`` operations: :func:`engine_threads` when it has ``least`` or more
    (:data:`MIN_THREADED_FLOPS` for the BLAS) and a core is free, else one."""
    most = engine_threads()
    if most <= 1 or flops < least or _machine_busy():
        return 1
    return most


class _OneThread:
    """One BLAS thread for the enclosed products, the configured count restored after (under :data:`_LOCK`)."""

    __slots__ = ()

    def __enter__(self) -> None:
        _LOCK.acquire()
        assert _BLAS is not None
        _BLAS[0](1)

    def __exit__(self, *exc: object) -> None:
        try:
            assert _BLAS is not None
            _BLAS[0](1 if _QUIET["runs"] else _CONFIGURED)  # inside a quiet run: one thread still
        finally:
            _LOCK.release()


#: what the context managers below give when there is nothing to change (reusable: a product's call costs no
#: generator, 2-4 us a call for the small layers of the CNN exports)
_NOTHING = contextlib.nullcontext()
_ONE = _OneThread()


def one_blas_thread() -> contextlib.AbstractContextManager[None]:
    """Run the enclosed products with one BLAS thread each (no spinning workers); other threads' products
    wait for the setting to be restored (it is process-wide)."""
    if _BLAS is None or _CONFIGURED <= 1:
        return _NOTHING
    return _ONE


def blas_threads_for(flops: float) -> contextlib.AbstractContextManager[None]:
    """Run the enclosed product with one BLAS thread unless it is large and a core is free."""
    if _BLAS is None or _CONFIGURED <= 1 or threads_for(flops) > 1:
        return _NOTHING
    return _ONE


def split_products(flops: float) -> bool:
    """True when a product of ``flops`` operations should run as parts on two host threads, each with one
    BLAS thread (``ops/product_parts.py``): it is large, the engine may use two threads or more, and the
    BLAS's thread count can be set (so its own workers stay idle). The machine's load does not matter:
    the threads block when they wait and share out the parts as they go, so a busy core slows the product
    down no more than it slows a single thread."""
    return _BLAS is not None and engine_threads() >= 2 and (os.cpu_count() or 1) >= 2 and flops >= MIN_THREADED_FLOPS


#: OpenBLAS runs a product of fewer multiply-adds (M * N * K) than this on the calling thread alone, whatever its
#: thread count (its matrix-vector threshold, 2304 * GEMM_MULTITHREAD_THRESHOLD 4; its matrix-matrix one is higher)
BLAS_ALONE_BELOW = 9216
#: OpenBLAS's matrix-matrix threshold: a product of one matrix by another (both with more than one row and
#: column) of at most this many multiply-adds runs on the calling thread (65536 * GEMM_MULTITHREAD_THRESHOLD 4,
#: its default build)
GEMM_ALONE_AT_MOST = 262144
#: in OpenBLAS 0.3.31 (NumPy 2.4's) the thread count above that threshold is the multiply-adds over it, rounded
#: down, where that is below the core count: a product below twice the threshold still runs alone (measured:
#: 100 x 100 x 52 and 250 x 32 x 64 alone, 100 x 100 x 53 and 256 x 32 x 64 on two threads); earlier versions
#: are taken at the threshold
_ROUNDED_COUNT_FROM = (0, 3, 31)


def _version() -> tuple[int, ...]:
    """The BLAS's version from its configuration string ("OpenBLAS 0.3.31 ..."), or () where unknown."""
    for library in _libraries():
        for name in ("scipy_openblas_get_config64_", "scipy_openblas_get_config", "openblas_get_config"):
            getter = getattr(library, name, None)
            if getter is not None:
                getter.restype = ctypes.c_char_p
                words = (getter() or b"").decode(errors="replace").split()
                if len(words) > 1 and words[0] == "OpenBLAS":
                    parts = words[1].split(".")[:3]
                    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else ()
    return ()


_GEMM_ALONE = (
    2 * GEMM_ALONE_AT_MOST - 1 if _BLAS is not None and _version() >= _ROUNDED_COUNT_FROM else GEMM_ALONE_AT_MOST
)


def blas_runs_alone(rows: int, cols: int, inner: int, single: bool = False) -> bool:
    """True when a ``[rows, inner] @ [inner, cols]`` product runs on one BLAS thread without setting the count
    (its thread count is one, or the product is below :data:`BLAS_ALONE_BELOW`): :func:`blas_threads_for` and
    :func:`split_products` would change nothing, so a small kernel may call the BLAS directly. ``single``: the
    sizes are those of one matrix-matrix call (``rows`` not several products' rows stacked), which runs alone
    up to :data:`GEMM_ALONE_AT_MOST` (twice that, less one, from OpenBLAS 0.3.31) where both ``rows`` and
    ``cols`` exceed one."""
    if _BLAS is None or _CONFIGURED <= 1 or rows * cols * inner < BLAS_ALONE_BELOW:
        return True
    return single and rows > 1 and cols > 1 and rows * cols * inner <= _GEMM_ALONE


def product_guard(rows: int, cols: int, inner: int) -> contextlib.AbstractContextManager[None] | None:
    """The thread guard for one ``[rows, inner] @ [inner, cols]`` product, decided once (at bind): nothing where
    the BLAS runs it on one thread anyway (:func:`blas_runs_alone` with ``single``), one BLAS thread for a
    product under :data:`MIN_THREADED_FLOPS`, None for a larger one (:func:`blas_threads_for` decides at each
    call, by the machine's load)."""
    if blas_runs_alone(rows, cols, inner, single=True):
        return _NOTHING
    flops = 2.0 * rows * cols * inner
    return blas_threads_for(flops) if flops < MIN_THREADED_FLOPS else None


_sample()  # (the first interval is measured from the import)
