"""The ``stream-gpu`` check: on the GPU, ``enqueue`` does its work on the stream it is given.

A CUDA engine holding only the plugin runs on a non-blocking stream S that is
held behind an event E: E is recorded after a gate kernel on another stream,
which spins until the checker opens it (or, at the latest, after a second).
While S is held, the outputs are copied on a third stream: anything already
written there was launched outside S (the legacy default stream, a stream of
the plugin's own), so it would race with the work before the plugin on
TensorRT's stream. Then the gate opens, S finishes, and the outputs are compared
with the CPU engine's run of the same plan, else with the reference function,
else only checked for being written.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...backends.registry import gpu_backend
from ...core.errors import MissingBackendError
from ...engine.runtime import Runtime
from ..buffers import POISON_A, POISON_B, unwritten_mask
from ..context import CheckContext, compare_outputs
from ..engine_run import EngineRunner, build_plan, creator_registered, quiet_logger
from ..hooks import HookError
from ..report import CheckFailedError, CheckSkippedError

__all__ = ["check_stream_gpu"]

#: The longest the gate holds the stream (seconds), should the checker never open it.
GATE_LIMIT_S = 1.0
#: Device arithmetic differs from NumPy's in the last bits (FMA, reduction order): the least tolerance used.
GPU_TOLERANCE = 1e-4
_FIX = (
    "Fix: enqueue must launch on the `stream` it is given: `with cp.cuda.ExternalStream(stream):` (CuPy) or "
    "`with torch.cuda.stream(torch.cuda.ExternalStream(stream)):` (PyTorch), never the default stream "
    "(cp.cuda.Stream.null) or a stream of its own"
)
_GATE_SOURCE = r"""
extern "C" __global__ void plugrt_stream_gate(const volatile int* flag, unsigned long long limit_ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        if (*flag != 0) return;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < limit_ns);
}
"""


class StreamGate:
    """Holds streams behind an event that fires once :meth:`open` is called (or after ``limit_s``)."""

    def __init__(self, cp: Any, limit_s: float = GATE_LIMIT_S) -> None:
        self.cp = cp
        self.kernel = cp.RawKernel(_GATE_SOURCE, "plugrt_stream_gate")
        self.flag = cp.empty(1, dtype=cp.int32)
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.event = cp.cuda.Event(disable_timing=True)
        self.limit_ns = np.uint64(int(limit_s * 1e9))
        self._launch(1)  # compiles the kernel and checks that it runs
        self.stream.synchronize()

    def _launch(self, flag: int) -> None:
        self.cp.cuda.runtime.memsetAsync(self.flag.data.ptr, flag, 4, self.stream.ptr)
        with self.stream:
            self.kernel((1,), (1,), (self.flag, self.limit_ns))
        self.event.record(self.stream)

    def hold(self, stream: Any) -> None:
        """Make ``stream`` wait for the gate."""
        self._launch(0)
        stream.wait_event(self.event)

    @property
    def is_open(self) -> bool:
        """True once the gate kernel finished (opened, or ran out of time)."""
        return bool(self.event.done)

    def open(self, stream: Any) -> None:
        """Let the held streams go (the flag is written on ``stream``)."""
        self.cp.cuda.runtime.memsetAsync(self.flag.data.ptr, 1, 4, stream.ptr)


def _cupy() -> Any:
    return gpu_backend().xp


def _written(array: np.ndarray, byte: int) -> np.ndarray:
    """Elements whose bytes are not all ``byte``."""
    if array.size == 0:
        return np.zeros(array.shape, dtype=bool)
    raw = np.ascontiguousarray(array).view(np.uint8).reshape(-1, array.dtype.itemsize)
    return (~np.all(raw == byte, axis=1)).reshape(array.shape)


def _gated_run(cp: Any, runner: EngineRunner, gate: StreamGate) -> tuple[bool, list[np.ndarray]]:
    """Run on a held stream; (whether it was still held when the copies finished, the early copies)."""
    held_stream = cp.cuda.Stream(non_blocking=True)
    copy_stream = cp.cuda.Stream(non_blocking=True)
    snapshots = [cp.empty(max(b.nbytes, 1), dtype=cp.uint8) for b, _, _ in runner.outputs]
    cp.cuda.Device().synchronize()
    gate.hold(held_stream)
    try:
        runner.run(held_stream.ptr)
        cp.cuda.Stream.null.synchronize()  # work a plugin put on the legacy default stream
        time.sleep(0.02)  # and on streams of its own
        for snapshot, (buffer, _, _) in zip(snapshots, runner.outputs):
            if buffer.nbytes:
                cp.cuda.runtime.memcpyAsync(snapshot.data.ptr, buffer.ptr, buffer.nbytes, 3, copy_stream.ptr)
        copy_stream.synchronize()
        held = not gate.is_open
    finally:
        gate.open(copy_stream)
        held_stream.synchronize()
        cp.cuda.Device().synchronize()
    early = [
        cp.asnumpy(s[: b.nbytes]).view(dtype).reshape(shape) for s, (b, dtype, shape) in zip(snapshots, runner.outputs)
    ]
    return held, early


def _two_runs(runner: EngineRunner, inputs: Sequence[np.ndarray], stream: int) -> tuple[list[np.ndarray], ...]:
    """Two plain runs (poison B, then A): the outputs of both."""
    runner.load(inputs, POISON_B)
    runner.run(stream)
    first = runner.results()
    runner.load(inputs, POISON_A)
    runner.run(stream)
    return first, runner.results()


def _as_outputs(value: Any) -> list[np.ndarray]:
    if isinstance(value, (list, tuple)):
        return [np.asarray(v) for v in value]
    return [np.asarray(value)]


def _compare(
    ctx: CheckContext, gpu: list[np.ndarray], gpu_unwritten: list[np.ndarray], cpu: Any, cpu_unwritten: Any
) -> str | None:
    """Where the GPU outputs differ from the CPU engine's on elements both wrote, or miss some."""
    rtol, atol = _tolerances(ctx, gpu)
    for k, (g, g_un, c_un) in enumerate(zip(gpu, gpu_unwritten, cpu_unwritten)):
        missing = int(np.count_nonzero(g_un & ~c_un))
        if missing:
            return f"output {k}: {missing} of {g.size} elements the CPU engine writes were never written on the GPU"
    if any(g.shape != c.shape for g, c in zip(gpu, cpu)):
        return compare_outputs(cpu, gpu)
    skip = [g_un | c_un for g_un, c_un in zip(gpu_unwritten, cpu_unwritten)]
    expected = [np.where(m, np.zeros((), c.dtype), c) for m, c in zip(skip, cpu)]
    got = [np.where(m, np.zeros((), g.dtype), g) for m, g in zip(skip, gpu)]
    difference = compare_outputs(expected, got, rtol, atol)
    return f"{difference} (rtol {rtol:g}, atol {atol:g})" if difference else None


def _tolerances(ctx: CheckContext, outputs: list[np.ndarray]) -> tuple[float, float]:
    from ...core.types import DataType

    floats = {np.dtype(np.float16): DataType.HALF, np.dtype(np.float32): DataType.FLOAT}
    rtol, atol = ctx.tolerances([floats.get(o.dtype, DataType.INT32) for o in outputs])
    if ctx.rtol is None and rtol:
        rtol = max(rtol, GPU_TOLERANCE)
    if ctx.atol is None and atol:
        atol = max(atol, GPU_TOLERANCE)
    return rtol, atol


def _against_reference(
    ctx: CheckContext, reference: Callable[..., Any], inputs: list[np.ndarray], gpu: list[np.ndarray]
) -> str | None:
    try:
        expected = _as_outputs(reference(*inputs))
    except Exception as exc:
        return f"the reference function raised {type(exc).__name__}: {exc}"
    got = gpu[: len(expected)]
    rtol, atol = _tolerances(ctx, got)
    difference = compare_outputs([e.astype(g.dtype, copy=False) for e, g in zip(expected, got)], got, rtol, atol)
    return f"{difference} (rtol {rtol:g}, atol {atol:g})" if difference else None


def check_stream_gpu(ctx: CheckContext) -> str:
    """On a held non-default stream nothing is written early, and the results are right once it runs."""
    try:
        cp = _cupy()
    except MissingBackendError as exc:
        raise CheckSkippedError(
            f"needs an NVIDIA GPU with CuPy ({exc}); there it runs the plugin in a CUDA engine on a non-default "
            "stream held behind an event and verifies that nothing is written before the event fires"
        ) from None
    shape_set = next((s for s in ctx.shape_sets if s.label == "opt"), ctx.shape_sets[0])
    try:
        inputs = ctx.inputs_for(shape_set)
        identity = ctx.driver.raw_identity(ctx.first)
        with creator_registered(ctx.creator, identity[2]):
            plan = build_plan(ctx)
            gpu_engine = Runtime(quiet_logger(), device=gpu_backend().name).deserialize_cuda_engine(plan)
            cpu_engine = Runtime(quiet_logger()).deserialize_cuda_engine(plan)
    except HookError as exc:
        ctx.blame("stream-gpu", exc)
        raise
    except Exception as exc:
        raise CheckSkippedError(
            f"no engine holding the plugin could be built ({type(exc).__name__}: {exc}); the other checks say why"
        ) from None
    try:
        gpu = EngineRunner(gpu_engine, shape_set.shapes, cp)
        if gpu.data_dependent:
            raise CheckSkippedError(
                "the plugin has data-dependent output shapes: the engine reads the sizes back during the run, "
                "which waits for the stream, so the order of its work cannot be observed"
            )
        stream = cp.cuda.Stream(non_blocking=True)
        gpu.load(inputs, POISON_B)
        gpu.run(stream.ptr)
        stream.synchronize()
        first = gpu.results()
        gate = StreamGate(cp)
        gpu.load(inputs, POISON_A)
        held, early = _gated_run(cp, gpu, gate)
        second = gpu.results()
    except CheckSkippedError:
        raise
    except Exception as exc:
        raise CheckSkippedError(
            f"the plugin cannot run in a CUDA engine ({type(exc).__name__}: {exc}); enqueue gets device pointers "
            "there (trt.as_array views them as CuPy arrays), so NumPy on host memory cannot run it"
        ) from None
    if held:
        counts = [(k, int(np.count_nonzero(_written(e, POISON_A))), e.size) for k, e in enumerate(early)]
        wrote = [f"output {k}: {n} of {size} elements" for k, n, size in counts if n]
        if wrote:
            raise CheckFailedError(
                f"at {shape_set}, enqueue on a non-default stream held behind an event that had not fired wrote "
                f"{', '.join(wrote)} before the stream could run: its work ran on another stream and races with "
                f"the work queued before it. {_FIX}"
            )
    unwritten = [unwritten_mask(b, a) for a, b in zip(first, second)]
    try:
        cpu_first, cpu_second = _two_runs(EngineRunner(cpu_engine, shape_set.shapes, cp), inputs, 0)
        cpu_problem = ""
    except Exception as exc:
        cpu_problem = f"the CPU engine cannot run the plugin ({type(exc).__name__}: {exc})"
    if not cpu_problem:
        basis = "the CPU engine's run of the same plan"
        cpu_unwritten = [unwritten_mask(b, a) for a, b in zip(cpu_first, cpu_second)]
        difference = _compare(ctx, second, unwritten, cpu_second, cpu_unwritten)
    elif ctx.reference is not None:
        basis = f"the reference function ({cpu_problem})"
        difference = _against_reference(ctx, ctx.reference, inputs, second)
    else:
        basis = f"a complete write of every output ({cpu_problem}; give reference= to compare values)"
        missing = [f"output {k}: {int(np.count_nonzero(u))} of {u.size}" for k, u in enumerate(unwritten) if u.any()]
        difference = f"elements never written: {', '.join(missing)}" if missing else None
    if difference:
        raise CheckFailedError(
            f"at {shape_set}, once its held non-default stream ran, the CUDA engine's outputs disagree with {basis}: "
            f"{difference}. Either enqueue's work is not all ordered on its stream, or the device code computes "
            f"something else. {_FIX}; and make the device code match the host code"
        )
    checked = f"the outputs agree with {basis}"
    if not held:
        raise CheckSkippedError(
            f"{checked}, but execute_async_v3 returned only after the held stream was let go (enqueue waited for "
            "the stream: a .item()/float()/int() of a device value, or a synchronize), so the order of its work "
            "cannot be observed"
        )
    return f"at {shape_set}, nothing was written before the held non-default stream ran, and {checked}"
