"""An engine run over arrays: one execution context with a buffer bound to every IO tensor.

``plugrt.compile``, ``plugrt exec`` and the checker's engine runs all drive an
engine through :class:`HostRun`: input shapes set (a shape outside the profile
is a :class:`ShapeError` naming its range), outputs sized from the context, a
buffer per IO tensor (the caller's array in place, an array of the engine's
backend, or any :class:`IOBuffer` a factory makes), outputs whose shape depends
on data placed through an :class:`IOutputAllocator`, and copies between host
arrays and the buffers.

>>> run = HostRun(engine)                                   # doctest: +SKIP
>>> run.set_shapes({"x": (2, 4)}); run.allocate()           # doctest: +SKIP
>>> run.upload({"x": x}); run.execute(); run.results()["y"]  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from ..backends.base import Backend
from ..core.dims import Dims
from ..core.errors import ExecutionError, ShapeError
from ..network.tensor import TensorIOMode
from .output_allocator import IOutputAllocator

__all__ = ["ArrayBuffer", "HostRun", "IOBuffer"]


class IOBuffer(Protocol):
    """Memory for one IO tensor: its address, its size and copies from and to host arrays."""

    ptr: int
    nbytes: int

    def upload(self, array: np.ndarray, stream: int = 0) -> None:
        """Copy a host array (of exactly ``nbytes``) in, ordered on ``stream``."""

    def download(self, out: np.ndarray, stream: int = 0) -> None:
        """Copy the contents into the host array ``out``; done when this returns."""


class ArrayBuffer:
    """An array of the engine's backend (NumPy on the CPU, CuPy on the GPU) as an :class:`IOBuffer`."""

    def __init__(self, backend: Backend, array: Any) -> None:
        self.backend, self.array = backend, array
        self.ptr = int(backend.address_of(array))
        self.nbytes = int(array.nbytes)

    @classmethod
    def empty(cls, backend: Backend, shape: Sequence[int], dtype: np.dtype) -> ArrayBuffer:
        """A new uninitialised array of ``shape`` and ``dtype``."""
        return cls(backend, backend.xp.empty(tuple(shape), dtype=dtype))

    def upload(self, array: np.ndarray, stream: int = 0) -> None:
        """Copy a host array in, ordered on ``stream``."""
        with self.backend.stream_scope(stream):
            self.backend.copy_from_host(self.array, np.asarray(array).reshape(self.array.shape))

    def download(self, out: np.ndarray, stream: int = 0) -> None:
        """Copy the contents into the host array ``out`` (of the same shape and dtype), after ``stream``'s work."""
        with self.backend.stream_scope(stream):
            self.backend.to_host(self.array, out=out)


class _Allocator(IOutputAllocator):
    """Places an output whose shape depends on data in an array it owns (grown as needed)."""

    def __init__(self, backend: Backend) -> None:
        super().__init__()
        self.backend = backend
        self.buffer = backend.xp.zeros(0, dtype=np.uint8)
        self.shape: tuple[int, ...] = ()

    def reallocate_output(self, tensor_name: str, memory: int, size: int, alignment: int) -> int:
        if self.buffer.nbytes < max(size, 1):
            self.buffer = self.backend.xp.zeros(max(size, 1), dtype=np.uint8)
        return int(self.backend.address_of(self.buffer))

    def notify_shape(self, tensor_name: str, shape: Dims) -> None:
        self.shape = tuple(shape)

    def array(self, dtype: np.dtype) -> Any:
        """A copy of the output the last run wrote (a backend array)."""
        count = int(np.prod(self.shape, dtype=np.int64))
        return self.buffer[: count * dtype.itemsize].view(dtype).reshape(self.shape).copy()


BufferFactory = Callable[[tuple[int, ...], np.dtype], IOBuffer]


class HostRun:
    """One execution context of ``engine`` and the buffers bound to its IO tensors.

    ``buffers`` makes the buffers :meth:`allocate` binds (default: arrays of the
    engine's backend, :class:`ArrayBuffer`); ``profile_hint`` ends the message of
    a shape outside the profile (what the caller can do about it).
    """

    def __init__(self, engine: Any, buffers: BufferFactory | None = None, profile_hint: str = "") -> None:
        self.engine = engine
        self.profile_hint = profile_hint
        self.backend = engine.backend
        self.context = engine.create_execution_context()
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        self.input_names = [n for n in names if engine.get_tensor_mode(n) == TensorIOMode.INPUT]
        self.output_names = [n for n in names if n not in self.input_names]
        self._make = buffers  # None: arrays of the backend (no closure over self: runs free by reference count)
        #: the buffer bound to each IO tensor (outputs placed by an allocator have none)
        self.buffers: dict[str, IOBuffer] = {}
        self._allocators: dict[str, _Allocator] = {}

    def dtype(self, name: str) -> np.dtype:
        """The NumPy type of IO tensor ``name`` in the engine."""
        return np.dtype(self.engine.get_tensor_dtype(name).nptype())

    def shape(self, name: str) -> tuple[int, ...]:
        """The current shape of IO tensor ``name`` (-1 where only the run tells)."""
        return tuple(int(d) for d in self.context.get_tensor_shape(name))

    @property
    def data_dependent(self) -> list[str]:
        """Outputs whose shape is known only once the engine ran, at the shapes set now."""
        return [n for n in self.output_names if any(d < 0 for d in self.shape(n))]

    def set_shapes(self, shapes: Mapping[str, Sequence[int]]) -> None:
        """Set each input's shape; one outside the engine's profile raises :class:`ShapeError` naming its range."""
        for name, shape in shapes.items():
            shape = tuple(int(d) for d in shape)
            if not self.context.set_input_shape(name, shape):
                low, _, high = self.engine.get_tensor_profile_shape(name, self.context.active_optimization_profile)
                raise ShapeError(
                    f"input {name!r} has shape {shape}, outside the engine's profile (min {tuple(low)}, max {tuple(high)})"
                    + (f"; {self.profile_hint}" if self.profile_hint else "")
                )

    def bind(self, name: str, buffer: IOBuffer) -> IOBuffer:
        """Bind ``buffer`` to IO tensor ``name`` (kept alive until replaced)."""
        self.context.set_tensor_address(name, buffer.ptr)
        self.buffers[name] = buffer
        return buffer

    def bind_arrays(self, arrays: Mapping[str, Any]) -> None:
        """Run on these arrays in place (an input's shape set from its array); host arrays are copied to a device."""
        self.set_shapes({n: a.shape for n, a in arrays.items() if n in self.input_names})
        for name, array in arrays.items():
            self.bind(name, ArrayBuffer(self.backend, self.backend.xp.asarray(array)))

    def allocate(self, names: Iterable[str] | None = None) -> None:
        """A new buffer for each IO tensor in ``names`` (default all) at its current shape.

        An output whose shape depends on data gets an :class:`IOutputAllocator` instead, once.
        """
        for name in self.input_names + self.output_names if names is None else names:
            if name in self._allocators:
                continue
            shape = self.shape(name)
            if any(d < 0 for d in shape):
                self._allocators[name] = _Allocator(self.backend)
                self.context.set_output_allocator(name, self._allocators[name])
            else:
                dtype = self.dtype(name)
                self.buffers.pop(name, None)  # freed first: its memory may come back, the address unchanged
                made = self._make(shape, dtype) if self._make else ArrayBuffer.empty(self.backend, shape, dtype)
                self.bind(name, made)

    def has_allocator(self, name: str) -> bool:
        """Whether output ``name`` is placed by an :class:`IOutputAllocator` (its shape depended on data)."""
        return name in self._allocators

    def allocated_output(self, name: str) -> Any:
        """A copy of what the last run wrote to output ``name`` through its allocator (a backend array)."""
        return self._allocators[name].array(self.dtype(name))

    def upload(self, arrays: Mapping[str, np.ndarray], stream: int = 0) -> None:
        """Copy host arrays into the inputs' buffers, ordered on ``stream``."""
        for name, array in arrays.items():
            self.buffers[name].upload(array, stream)

    def execute(self, stream: int = 0) -> None:
        """``execute_async_v3(stream)``."""
        self.context.execute_async_v3(stream)

    def results(self, stream: int = 0, into: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """Every output as a host array (into the arrays of ``into`` where given), after ``stream``'s work."""
        out: dict[str, np.ndarray] = {}
        for name in self.output_names:
            if name in self._allocators:
                out[name] = self.backend.to_host(self._allocators[name].array(self.dtype(name)))
                continue
            target = into[name] if into is not None and name in into else np.empty(self.shape(name), self.dtype(name))
            self.buffers[name].download(target, stream)
            out[name] = target
        return out

    def output_arrays(self) -> dict[str, Any]:
        """Every output as an array of the engine's backend (outputs bound to an :class:`ArrayBuffer`).

        Raises :class:`ExecutionError` naming an output bound to another kind of buffer, or to none.
        """
        out: dict[str, Any] = {}
        for name in self.output_names:
            if name in self._allocators:
                out[name] = self.allocated_output(name)
            else:
                buffer = self.buffers.get(name)
                if not isinstance(buffer, ArrayBuffer):
                    what = "no buffer" if buffer is None else f"a buffer of type {type(buffer).__name__}"
                    raise ExecutionError(
                        f"output {name!r} is bound to {what}, not an array; use results() for host copies"
                    )
                out[name] = buffer.array
        return out
