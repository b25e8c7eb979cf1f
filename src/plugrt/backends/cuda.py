"""The CUDA backend: device memory and streams through CuPy (imported only when used).

``execute_async_v3(stream)`` takes a real CUDA stream handle (an integer, as
``cupy.cuda.Stream().ptr`` or ``torch.cuda.current_stream().cuda_stream``); kernels
of standard layers launch on it through CuPy, plugins receive it unchanged, and
nothing synchronises inside a run except for data-dependent sizes, which must
be read back to size what follows.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..core.errors import ExecutionError, MissingBackendError
from ..core.types import DataType
from .base import Backend
from .cuda_matmul import matmul_into, torch_for_graphs, torch_on_stream, torch_stream
from .tf32 import tf32_scope

__all__ = ["CudaBackend", "CudaGraph", "CudaModule", "cupy_stream", "import_cupy", "load_ptx_kernel"]


_CUPY: list[Any] = []


def import_cupy() -> Any:
    """CuPy, or :class:`MissingBackendError` saying what to install (checked once, then cached)."""
    if _CUPY:
        return _CUPY[0]
    try:
        import cupy
    except ImportError as exc:
        raise MissingBackendError(
            "the 'cuda' device needs CuPy; install it with pip install 'plugrt[cuda]' (or the cupy build for your CUDA)"
        ) from exc
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise MissingBackendError("the 'cuda' device needs an NVIDIA GPU; CuPy sees none")
    except cupy.cuda.runtime.CUDARuntimeError as exc:
        raise MissingBackendError(f"the 'cuda' device is not usable: {exc}") from exc
    _CUPY.append(cupy)
    return cupy


class _StreamHandle:
    """A raw stream handle offered through the CUDA stream protocol."""

    def __init__(self, handle: int) -> None:
        self.handle = handle

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.handle)


_STREAMS: dict[int, Any] = {}


def cupy_stream(handle: int) -> Any:
    """CuPy's stream object for a raw CUDA stream handle (0: the legacy default stream).

    Use it as a context manager to make CuPy launch on that stream. The wrapper never
    owns the stream; wrappers are cached per handle.
    """
    cp = import_cupy()
    if not handle:
        return cp.cuda.Stream.null
    stream = _STREAMS.get(handle)
    if stream is None:
        from_external = getattr(cp.cuda.Stream, "from_external", None)
        stream = from_external(_StreamHandle(handle)) if from_external is not None else cp.cuda.ExternalStream(handle)
        if len(_STREAMS) >= 256:
            _STREAMS.clear()
        _STREAMS[handle] = stream
    return stream


class CudaModule:
    """CUDA C++ source compiled with NVRTC on first use; its kernels looked up by name and cached.

    A plain name (``"nms_scan"``) comes from one module compiled from the whole source; a
    template instantiation (``"softmax_rows<float, 4>"``) is compiled on its own as a name
    expression. Kernels are CuPy ``RawKernel`` objects: call them with ``(grid, block, args)``
    on CuPy's current stream (or ``stream=cupy_stream(handle)``).
    """

    def __init__(self, source: str, options: tuple[str, ...] = ("--std=c++14",)) -> None:
        self.source, self.options = source, options
        self._lock = threading.Lock()
        self._module: Any = None
        self._functions: dict[str, Any] = {}

    def function(self, name: str) -> Any:
        """The kernel ``name`` (compiling on first use; MissingBackendError without CuPy or a GPU)."""
        found = self._functions.get(name)
        if found is not None:
            return found
        with self._lock:
            if name not in self._functions:
                cp = import_cupy()
                if "<" in name:
                    module = cp.RawModule(code=self.source, options=self.options, name_expressions=[name])
                else:
                    if self._module is None:
                        self._module = cp.RawModule(code=self.source, options=self.options)
                    module = self._module
                self._functions[name] = module.get_function(name)
            return self._functions[name]


def load_ptx_kernel(ptx: bytes, name: str) -> Callable[..., None]:
    """Kernel ``name`` of PTX text: ``kernel(grid, block, args, shared_mem, stream)`` launches it on
    the raw stream handle ``stream``."""
    module = import_cupy().cuda.function.Module()
    module.load(ptx)
    function = module.get_function(name)

    def launch(grid: tuple[int, ...], block: tuple[int, ...], args: tuple[Any, ...], shared_mem: int, stream: int) -> None:
        function(grid, block, args, shared_mem=int(shared_mem), stream=cupy_stream(stream))

    return launch


class CudaGraph:
    """A CUDA graph captured from a run, with the memory pool its temporaries came from."""

    def __init__(self, graph: Any, pool: Any) -> None:
        self.graph, self.pool = graph, pool

    def launch(self, stream: int) -> None:
        """Replay on ``stream``."""
        self.graph.launch(cupy_stream(stream))


class TorchGraph:
    """A run captured through PyTorch's graph API (so that its allocator hands the PyTorch kernels of the
    run memory the graph owns, kept until the graph goes), with CuPy's temporaries in ``pool``."""

    def __init__(self, graph: Any, pool: Any, torch: Any) -> None:
        self.graph, self.pool, self.torch = graph, pool, torch

    def launch(self, stream: int) -> None:
        """Replay on ``stream``."""
        with torch_on_stream(self.torch, stream):
            self.graph.replay()


class CudaBackend(Backend):
    """Device arenas and CuPy as the array module."""

    name = "cuda"
    host_memory = False
    gpu = True
    fast_types = frozenset({DataType.HALF})  # (CuPy has no bfloat16 arrays)

    def __init__(self) -> None:
        self.cupy = import_cupy()
        self.xp = self.cupy

    def allocate(self, nbytes: int) -> Any:
        """A zeroed device buffer of ``nbytes`` (at least one byte)."""
        return self.cupy.zeros(max(int(nbytes), 1), dtype=self.cupy.uint8)

    def _view(self, address: int, shape: tuple[int, ...], dtype: np.dtype, nbytes: int, owner: Any) -> Any:
        cp = self.cupy
        memory = cp.cuda.UnownedMemory(address, nbytes, owner)
        return cp.ndarray(shape, dtype=dtype, memptr=cp.cuda.MemoryPointer(memory, 0))

    def address_of(self, array: Any) -> int:
        """The device address of an array's first element."""
        return int(array.data.ptr) if array.size else 0

    def to_host(self, array: Any, out: np.ndarray | None = None) -> np.ndarray:
        """A host copy of a device array on CuPy's current stream (into ``out`` when given)."""
        if out is None:
            copied: np.ndarray = self.cupy.asnumpy(array)
            return copied
        array.get(out=out)
        return out

    def copy_from_host(self, view: Any, values: np.ndarray) -> None:
        """Upload ``values`` into the device array ``view`` (on the current stream)."""
        view.set(np.ascontiguousarray(values, dtype=view.dtype).reshape(view.shape))  # (0-d stays 0-d)

    def create_stream(self) -> tuple[Any, int]:
        """A new non-blocking CUDA stream: (owner, raw handle); the handle lives as long as the owner."""
        stream = self.cupy.cuda.Stream(non_blocking=True)
        return stream, int(stream.ptr)

    def current_stream(self) -> int:
        """The raw handle of CuPy's current stream."""
        return int(self.cupy.cuda.get_current_stream().ptr)

    @contextlib.contextmanager
    def stream_scope(self, stream: int) -> Iterator[None]:
        """Make CuPy launch on ``stream`` (0 means the legacy default stream), and PyTorch too where it is
        installed with CUDA (its kernels are operator tactics, ``ops/torch_cpu.py``)."""
        torch = torch_for_graphs()
        if torch is None:
            with cupy_stream(stream):
                yield
            return
        with cupy_stream(stream), torch_on_stream(torch, stream):
            yield

    def math_scope(self, tf32: bool) -> contextlib.AbstractContextManager[None]:
        """PyTorch's cuBLAS and cuDNN kernels may use TF32 inside the block exactly when ``tf32`` (``backends/tf32.py``)."""
        return tf32_scope(torch_for_graphs(), tf32)

    def synchronize(self, stream: int) -> None:
        """Wait for the work queued on ``stream``."""
        cupy_stream(stream).synchronize()

    def capture(self, run: Callable[[], None], stream: int, warm: bool = True) -> CudaGraph | TorchGraph:
        """Run ``run()`` once on ``stream`` (kernels compile, caches fill; skipped when ``warm`` is False: the
        caller just ran it), then capture what it launches into a CUDA graph.

        Temporaries allocated while capturing come from a memory pool owned by the graph, so
        replays never touch memory someone else was given since. The legacy default stream
        cannot be captured.
        """
        if not stream:
            raise ExecutionError("CUDA graph capture needs a non-default stream; pass a stream handle other than 0")
        if warm:
            run()
        cp = self.cupy
        pool = cp.cuda.MemoryPool()
        torch = torch_for_graphs()
        if torch is not None:  # PyTorch kernels in the run: its allocator must give them graph-owned memory too
            torch_graph = torch.cuda.CUDAGraph()
            with cp.cuda.using_allocator(pool.malloc):
                with torch.cuda.graph(torch_graph, stream=torch_stream(torch, stream), capture_error_mode="relaxed"):
                    run()
            return TorchGraph(torch_graph, pool, torch)
        cuda_stream = cupy_stream(stream)
        with cp.cuda.using_allocator(pool.malloc):
            cuda_stream.begin_capture()
            try:
                run()
            finally:
                graph = cuda_stream.end_capture()
        return CudaGraph(graph, pool)

    def capturing(self, stream: int) -> bool:
        """Whether ``stream`` is being captured now (a caller's own graph around a run, for instance)."""
        if not stream:
            return False
        probe = getattr(self.cupy.cuda.runtime, "streamIsCapturing", None)
        if probe is None:  # (older CuPy: the stream object's query)
            return bool(cupy_stream(stream).is_capturing())
        return bool(probe(stream))  # cudaStreamCaptureStatusNone is 0; active and invalidated captures are not

    def matmul_into(self, a: Any, b: Any, out: Any, bias: Any = None) -> None:
        """The product on CuPy's current stream, capturable when PyTorch is installed."""
        matmul_into(self.cupy, a, b, out, bias)

    def special_function(self, name: str) -> Callable[..., Any] | None:
        """``cupyx.scipy.special.<name>``, or None where CuPy lacks it."""
        try:
            import cupyx.scipy.special
        except ImportError:
            return None
        found: Callable[..., Any] | None = getattr(cupyx.scipy.special, name, None)
        return found

    def dlpack_device(self) -> tuple[int, int]:
        """(kDLCUDA, the current device)."""
        return (2, int(self.cupy.cuda.runtime.getDevice()))
