"""The backend boundary: everything that depends on where an engine's memory lives.

A :class:`Backend` owns one device's memory and streams: it allocates arenas and
buffers, turns an address into an array of its array module (:meth:`Backend.view`,
the one way plugrt makes an array from an address), gives the address of an array,
makes streams current for its array module, waits for them and captures a run into a
replayable graph where the device has graphs. Code above ``backends/`` asks a backend
what it can do (``gpu``, ``host_memory``) instead of testing device names.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar, Protocol

import numpy as np

from ..core.dims import volume
from ..core.errors import ExecutionError
from ..core.layouts import storage_shape
from ..core.types import DataType, TensorFormat, nptype

__all__ = ["ALIGNMENT", "Backend", "Graph", "storage_of"]

#: The byte boundary every arena, activation, workspace array and output allocation starts on
#: (what TensorRT and cudaMalloc guarantee).
ALIGNMENT = 256


class Graph(Protocol):
    """A captured run: replaying it does the captured work again on a stream."""

    def launch(self, stream: int) -> None:
        """Replay on ``stream``."""


def storage_of(shape_or_desc: Any, dtype: Any = None) -> tuple[tuple[int, ...], np.dtype]:
    """The stored shape and NumPy element type of a view.

    ``shape_or_desc`` is a shape (then ``dtype`` is required) or a tensor description with
    ``dims``, ``type`` and ``format`` (a ``PluginTensorDesc``): its storage shape (the
    logical dims for LINEAR; see :mod:`plugrt.core.layouts`), in ``dtype`` when given
    (a ``DataType`` or NumPy type), else in its own type.
    """
    dims = getattr(shape_or_desc, "dims", None)
    if dims is None:
        if dtype is None:
            raise ExecutionError(f"a view of shape {tuple(shape_or_desc)} needs an element type")
        shape = tuple(int(d) for d in shape_or_desc)
    else:
        fmt = getattr(shape_or_desc, "format", TensorFormat.LINEAR)
        shape = storage_shape(tuple(int(d) for d in dims), fmt)
        if dtype is None:
            dtype = DataType(shape_or_desc.type)
    element = nptype(dtype) if isinstance(dtype, DataType) else dtype
    return shape, np.dtype(element)


class Backend(ABC):
    """One device's memory, array module and streams (found by name: ``get_backend(name)``)."""

    #: the device name ('cpu', 'cuda'): what ``Runtime(device=...)`` and ``Builder(device=...)`` take
    name: ClassVar[str]
    #: True when buffers are host memory NumPy can read in place
    host_memory: ClassVar[bool]
    #: True when buffers are GPU memory and compiled CUDA kernels (NVRTC, PTX) run on them
    gpu: ClassVar[bool]
    #: reduced float types this backend computes faster than FLOAT (what BuilderFlag.FP16/BF16 may pick)
    fast_types: ClassVar[frozenset[DataType]] = frozenset()
    #: the byte boundary arenas and allocations start on
    ALIGNMENT: ClassVar[int] = ALIGNMENT
    #: the array module kernels use (NumPy, CuPy)
    xp: Any

    # --- memory ----------------------------------------------------------------------------
    @abstractmethod
    def allocate(self, nbytes: int) -> Any:
        """A zeroed uint8 array of ``nbytes`` (at least one byte) in this backend's memory."""

    def allocate_arena(self, nbytes: int) -> tuple[Any, int]:
        """An ALIGNMENT-aligned block of ``nbytes``: (owner array, aligned base address)."""
        try:
            raw = self.allocate(nbytes + self.ALIGNMENT)
        except MemoryError:
            raise ExecutionError(f"cannot allocate an activation arena of {nbytes} bytes on {self.name}") from None
        base = self.address_of(raw)
        shift = (-base) % self.ALIGNMENT
        return raw[shift : shift + nbytes], base + shift

    def view(self, address: int, shape_or_desc: Any, dtype: Any = None, owner: Any = None) -> Any:
        """A zero-copy array over ``address``: of ``shape`` and ``dtype``, or of a tensor description's
        storage shape and type (``dtype`` overrides the type).

        ``owner`` (an array the memory belongs to) is kept alive as long as the view; without it
        ``address`` must stay valid while the view is used. A view of no elements never reads the
        address; any other needs a positive integer address.
        """
        shape, element = storage_of(shape_or_desc, dtype)
        nbytes = volume(shape) * element.itemsize
        if nbytes == 0:
            return self.xp.empty(shape, dtype=element)
        if isinstance(address, bool) or not isinstance(address, (int, np.integer)) or address <= 0:
            raise ExecutionError(f"cannot view {nbytes} bytes at address {address!r}: not a valid {self.name} address")
        return self._view(int(address), shape, element, nbytes, owner)

    @abstractmethod
    def _view(self, address: int, shape: tuple[int, ...], dtype: np.dtype, nbytes: int, owner: Any) -> Any:
        """The view of a checked, non-empty region."""

    @abstractmethod
    def address_of(self, array: Any) -> int:
        """The address of an array's first element (0 for an empty array)."""

    @abstractmethod
    def to_host(self, array: Any, out: np.ndarray | None = None) -> np.ndarray:
        """A NumPy array with ``array``'s values, copied on the current stream into ``out`` when given
        (else a new array, or the array itself when it is host memory)."""

    @abstractmethod
    def copy_from_host(self, view: Any, values: np.ndarray) -> None:
        """Fill ``view`` (an array of this backend) with host ``values``."""

    # --- streams ---------------------------------------------------------------------------
    @abstractmethod
    def create_stream(self) -> tuple[Any, int]:
        """A new stream: (owner, raw handle); the handle lives as long as the owner."""

    @abstractmethod
    def current_stream(self) -> int:
        """The raw handle of the stream the array module launches on now."""

    @abstractmethod
    def stream_scope(self, stream: int) -> contextlib.AbstractContextManager[None]:
        """Make the array module launch on ``stream`` inside the block."""

    def math_scope(self, tf32: bool) -> contextlib.AbstractContextManager[None]:
        """Inside the block FLOAT products and convolutions may use TF32 exactly when ``tf32`` (``BuilderFlag.TF32``;
        a device without TF32 changes nothing: the default)."""
        return contextlib.nullcontext()

    @abstractmethod
    def synchronize(self, stream: int) -> None:
        """Wait for the work queued on ``stream``."""

    def capture(self, run: Callable[[], None], stream: int, warm: bool = True) -> Graph:
        """Run ``run()`` once on ``stream`` (unless ``warm`` is False: the caller just ran it), then record
        what it launches into a replayable graph (only where ``gpu``: the device has graphs)."""
        raise ExecutionError(f"the {self.name} backend has no graphs to capture a run into")

    def capturing(self, stream: int) -> bool:
        """Whether ``stream`` is being captured into a graph now (by anyone); False where there are no graphs."""
        return False

    # --- kernels ---------------------------------------------------------------------------
    @abstractmethod
    def matmul_into(self, a: Any, b: Any, out: Any, bias: Any = None) -> None:
        """``out[...] = a @ b`` (NumPy broadcasting), plus ``bias`` broadcast over the last axis;
        ``out`` is C-contiguous."""

    @abstractmethod
    def special_function(self, name: str) -> Callable[..., Any] | None:
        """The array module's ``scipy.special`` function ``name`` (a ufunc with ``out=``), or None
        when that library is not installed."""

    @abstractmethod
    def dlpack_device(self) -> tuple[int, int]:
        """DLPack's (device type, device id) of this backend's memory."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"
