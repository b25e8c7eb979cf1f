"""``IExecutionContext``: input shapes, tensor addresses, and running the engine."""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import numpy as np

from ..backends.base import ALIGNMENT
from ..backends.registry import using_backend
from ..core.context_manager import DeprecatedContextManager
from ..core.dims import Dims
from ..core.errors import ExecutionError, PlugrtError, ShapeError, TypeMismatchError
from ..core.finalizers import release_when_safe, run_pending
from ..core.logger import Severity
from ..network.tensor import TensorIOMode
from ..nodes.shape_checks import check_at_points
from ..ops.elementwise import quiet
from .executor import Executor
from .output_allocator import IOutputAllocator
from .profiler import IProfiler

__all__ = ["IExecutionContext"]

_T = TypeVar("_T", bound=Callable[..., Any])


def _exclusive(method: _T) -> _T:
    """Run ``method`` holding the context's lock; a second thread using the context meanwhile gets an error.

    TensorRT's rule is one context per thread (an engine may be shared): this
    makes breaking it a clear :class:`~plugrt.ExecutionError` instead of wrong
    results or writes past a buffer.
    """
    name = method.__name__

    @functools.wraps(method)
    def guarded(self: IExecutionContext, *args: Any, **kwargs: Any) -> Any:
        if self._owner == threading.get_ident():  # a callback during this thread's own call (an output allocator)
            return method(self, *args, **kwargs)
        if not self._lock.acquire(blocking=False):
            busy = self._busy
            raise ExecutionError(
                f"{name}: this execution context is already running in another thread (in {busy}); use a context "
                "from one thread at a time: create one context per thread (they may share the engine)"
            )
        self._busy, self._owner = name, threading.get_ident()
        try:
            return method(self, *args, **kwargs)
        finally:
            self._busy, self._owner = "", 0
            self._lock.release()

    return cast(_T, guarded)


class IExecutionContext(DeprecatedContextManager):
    """Runs an engine: set input shapes and tensor addresses, then ``execute_async_v3``.

    Each context has its own activation memory and plugin clones, so several
    contexts of one engine may run at the same time in different threads. One
    context must not be used by two threads at once.

    >>> # context.set_input_shape("x", (2, 8)); context.set_tensor_address("x", x.ctypes.data)
    >>> # context.set_tensor_address("y", y.ctypes.data); context.execute_async_v3(0)
    """

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.name = ""
        self.debug_sync = False
        self._lock = threading.Lock()
        self._busy = ""
        self._owner = 0
        plan = engine.plan
        self._inputs = [i for i in plan.io if plan.tensors[i].role == "input"]
        self._outputs = [i for i in plan.io if plan.tensors[i].role == "output"]
        self._input_shapes: dict[str, tuple[int, ...]] = {}
        for i in self._inputs:
            declared = plan.io_shapes[plan.tensors[i].name]
            if declared.is_static():
                self._input_shapes[plan.tensors[i].name] = tuple(declared)
        self._addresses: dict[str, int] = {}
        self._allocators: dict[str, IOutputAllocator] = {}
        self._dirty = True
        #: the executor's shapes are those of the shapes set now (inferred since the last change)
        self._inferred = False
        self._bound_addresses: dict[str, int] | None = None
        #: the last run's shapes and addresses hold (nothing set since): a run skips the checks of _prepare
        self._ready = False
        self._executor = Executor(engine, engine.backend)
        self._profile = 0
        #: Replay runs as a CUDA graph (plugrt extension; CUDA engines, non-default streams): None (the default)
        #: replays from the second run with the same shapes and addresses where the plan allows it (no plugins,
        #: control flow or data-dependent shapes; no profiler or output allocator set), True always (an error
        #: where it cannot), False never: every run launches its layers.
        self.use_cuda_graph: bool | None = None
        self._replayed = False
        #: An IProfiler receiving each layer's time (synchronises per layer on the GPU).
        self.profiler: IProfiler | None = None

    # --- shapes --------------------------------------------------------------------------
    @_exclusive
    def set_input_shape(self, name: str, shape: Sequence[int]) -> bool:
        """Set an input's shape; False (with the reason logged) if it is outside the profile."""
        index = self.engine.tensor_index(name)
        if self.engine.get_tensor_mode(name) != TensorIOMode.INPUT:
            raise ExecutionError(f"set_input_shape: {name!r} is an output; only inputs take shapes")
        try:
            given = tuple(shape)
        except TypeError:
            given = None
        if given is None or not all(isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_)) for d in given):
            raise TypeMismatchError(
                f"set_input_shape({name!r}): shape must be a sequence of ints, got {shape!r}"
                + ("" if given is None else f" (element types {[type(d).__name__ for d in given]})")
            )
        dims = tuple(int(d) for d in given)
        lo, _, hi = self.engine.plan.profiles[self._profile].shapes[self.engine.plan.tensors[index].name]
        problem = None
        if len(dims) != len(lo):
            problem = f"rank {len(dims)} differs from the engine's rank {len(lo)}"
        else:
            bad = [k for k, (d, a, b) in enumerate(zip(dims, lo, hi)) if not a <= d <= b]
            if bad:
                problem = (
                    f"axis {bad[0]} is outside the profile's range [{lo[bad[0]]}, {hi[bad[0]]}] (min {lo}, max {hi})"
                )
        if problem is not None:
            self.engine.logger.emit(
                Severity.ERROR,
                f"set_input_shape({name!r}, {dims}) rejected for optimization profile {self._profile}: {problem}",
            )
            return False
        if self._input_shapes.get(name) != dims:
            self._input_shapes[name] = dims
            self._dirty, self._inferred = True, False
        return True

    @_exclusive
    def get_tensor_shape(self, name: str) -> Dims:
        """Current shape of an IO tensor (-1 where not yet known)."""
        index = self.engine.tensor_index(name)
        if name in self._input_shapes:
            return Dims(self._input_shapes[name])
        if self._refresh_shapes():
            shape = self._executor.shapes[index]
            if shape is not None:
                return Dims(shape)
        return self.engine.get_tensor_shape(name)

    def _refresh_shapes(self) -> bool:
        if self.infer_shapes():
            return False
        if not self._inferred:
            self._infer()
        return True

    def _infer(self) -> None:
        self._inferred = False  # until the checks passed
        self._executor.infer(self._input_shapes)
        check_at_points(self.engine.shape_checks, [("the input", self._executor.env)], ShapeError)
        self._inferred = True

    def infer_shapes(self) -> list[str]:
        """Names of inputs whose shape is still missing (empty when all are set)."""
        return [
            self.engine.plan.tensors[i].name
            for i in self._inputs
            if self.engine.plan.tensors[i].name not in self._input_shapes
        ]

    @property
    def all_binding_shapes_specified(self) -> bool:
        """True when every input shape is set."""
        return not self.infer_shapes()

    # --- addresses -------------------------------------------------------------------------
    @_exclusive
    def set_tensor_address(self, name: str, memory: int) -> bool:
        """Where IO tensor ``name`` lives: an integer address (``array.ctypes.data`` on the CPU)."""
        self.engine.tensor_index(name)
        if not isinstance(memory, (int, np.integer)) or isinstance(memory, bool):
            raise TypeMismatchError(
                f"set_tensor_address({name!r}): memory must be an integer address, got {type(memory).__name__}"
            )
        if self._addresses.get(name) != int(memory):
            self._addresses[name] = int(memory)
            self._ready = False
        return True

    def get_tensor_address(self, name: str) -> int:
        """The address set for ``name`` (0 when none)."""
        self.engine.tensor_index(name)
        return self._addresses.get(name, 0)

    @_exclusive
    def set_output_allocator(self, name: str, output_allocator: IOutputAllocator | None) -> bool:
        """Use ``output_allocator`` to place output ``name`` (needed for data-dependent shapes)."""
        if self.engine.get_tensor_mode(name) != TensorIOMode.OUTPUT:
            self.engine.tensor_index(name)
            raise ExecutionError(f"set_output_allocator: {name!r} is not an output")
        self._ready = False
        if output_allocator is None:
            self._allocators.pop(name, None)
        elif not isinstance(output_allocator, IOutputAllocator):
            raise TypeMismatchError(
                f"set_output_allocator takes an IOutputAllocator, got {type(output_allocator).__name__}"
            )
        else:
            self._allocators[name] = output_allocator
        return True

    def get_output_allocator(self, name: str) -> IOutputAllocator | None:
        """The allocator set for ``name``."""
        return self._allocators.get(name)

    # --- profiles ------------------------------------------------------------------------
    @property
    def active_optimization_profile(self) -> int:
        """Index of the profile in use."""
        return self._profile

    @_exclusive
    def set_optimization_profile_async(self, profile_index: int, stream_handle: int) -> bool:
        """Switch profile (input shapes must be set again)."""
        if not 0 <= profile_index < self.engine.num_optimization_profiles:
            raise ExecutionError(
                f"profile index {profile_index} is out of range; the engine has {self.engine.num_optimization_profiles}"
            )
        if profile_index != self._profile:
            self._profile = profile_index
            self._executor.set_profile(profile_index)
            self._input_shapes = {
                k: v for k, v in self._input_shapes.items() if self.engine.plan.io_shapes[k].is_static()
            }
            self._dirty, self._inferred = True, False
        return True

    # --- running -------------------------------------------------------------------------
    @_exclusive
    def execute_async_v3(self, stream_handle: int = 0) -> bool:
        """Run the engine on ``stream_handle``. On the CPU the work is done when this returns.

        Errors raise :class:`~plugrt.ExecutionError` naming the layer (and plugin);
        the context stays usable.
        """
        run_pending()
        if not isinstance(stream_handle, (int, np.integer)):
            raise TypeMismatchError(
                f"execute_async_v3: stream_handle must be an int, got {type(stream_handle).__name__}"
            )
        stream = int(stream_handle)
        try:
            backend = self.engine.backend
            with (
                using_backend(backend),
                backend.stream_scope(stream),
                backend.math_scope(self.engine.plan.tf32),
                quiet(backend.xp),
            ):
                self._prepare(stream)
                self._replayed = False
                if self.use_cuda_graph and backend.gpu:
                    self._replayed = self._executor.run_graph(stream)
                elif self.use_cuda_graph is None and backend.gpu and self.profiler is None and not self._allocators:
                    self._replayed = self._executor.run_auto(stream)
                else:
                    self._executor.run(stream, self.profiler)
                if self._allocators:
                    self._deliver_data_dependent_outputs(stream)
        except PlugrtError:
            raise
        except Exception as exc:  # a safety net: running never surfaces anything but PlugrtError
            raise ExecutionError(f"execute_async_v3 failed: {type(exc).__name__}: {exc}") from exc
        return True

    @property
    def replayed_graph(self) -> bool:
        """Whether the last :meth:`execute_async_v3` ran as a replay of a captured CUDA graph (plugrt
        extension; see ``use_cuda_graph``)."""
        return self._replayed

    def execute_nested(self, stream_handle: int) -> None:
        """Run from inside a run of another engine on the same backend (a control-flow operator's subgraph,
        launched once per iteration): the caller's backend, stream and error state hold, so they are not set
        again. Errors raise :class:`~plugrt.ExecutionError` naming the layer, as in :meth:`execute_async_v3`."""
        self._prepare(stream_handle)
        self._executor.run(stream_handle, self.profiler)
        self._deliver_data_dependent_outputs(stream_handle)

    def nested_launcher(self, stream_handle: int) -> Callable[[], None]:
        """:meth:`execute_nested` as a call without arguments, for a caller that runs this context many times
        with nothing set in between (a loop's body): the checks of a run are done now, once, and where the
        run is a flat list of prepared launches (no data-dependent shapes, output allocators or profiler)
        the call runs that list and nothing else. Valid until shapes, addresses or allocators are set."""
        self._prepare(stream_handle)
        direct = self._executor.static_launcher(stream_handle)
        if direct is None or self._allocators or self.profiler is not None:
            return functools.partial(self.execute_nested, stream_handle)
        return direct

    def execute_v2(self, bindings: Sequence[int]) -> bool:
        """Run synchronously with ``bindings``: one address per IO tensor, in IO order."""
        if len(bindings) != self.engine.num_io_tensors:
            raise ExecutionError(
                f"execute_v2 needs {self.engine.num_io_tensors} bindings (one per IO tensor), got {len(bindings)}"
            )
        for i, address in enumerate(bindings):
            self.set_tensor_address(self.engine.get_tensor_name(i), address)
        return self.execute_async_v3(0)

    def _prepare(self, stream: int) -> None:
        if self._ready and not self._dirty:  # the same shapes and addresses as the last run: bound as it is
            return
        missing = self.infer_shapes()
        if missing:
            raise ExecutionError(f"input shape(s) of {missing} are not set; call set_input_shape first")
        if not self._inferred:
            self._infer()
        plan = self.engine.plan
        executor = self._executor
        addresses: dict[str, int] = {}
        for index in self._inputs + self._outputs:
            name = plan.tensors[index].name
            # a data-dependent shape seen in the previous run is not this run's
            shape = executor.known_shape(index)
            if shape is None:
                if name not in self._allocators:
                    raise ExecutionError(
                        f"output {name!r} has a data-dependent shape; set an IOutputAllocator with set_output_allocator"
                    )
                continue
            nbytes = math.prod(shape) * plan.tensors[index].dtype.itemsize
            if name in self._allocators and plan.tensors[index].role == "output":
                current = self._addresses.get(name, 0)
                address = self._allocators[name].reallocate_output_async(name, current, nbytes, ALIGNMENT, stream)
                self._addresses[name] = int(address or 0)
                self._allocators[name].notify_shape(name, Dims(shape))
            address = self._addresses.get(name, 0)
            if nbytes and not address:
                raise ExecutionError(
                    f"tensor {name!r} has no address; call set_tensor_address({name!r}, ptr) before running"
                )
            addresses[name] = address
        if self._dirty or addresses != self._bound_addresses:
            backend = self.engine.backend
            arrays = {}
            pointers = {}
            moved = self._bound_addresses is not None and not self._dirty and set(addresses) == set(self._bound_addresses)
            for index in self._inputs + self._outputs:
                name = plan.tensors[index].name
                if name in addresses:
                    if moved and self._bound_addresses is not None and self._bound_addresses[name] == addresses[name]:
                        continue  # the same shapes, the same address: bound as it is
                    shape = executor.shapes[index]
                    assert shape is not None
                    arrays[index] = backend.view(addresses[name], shape, plan.tensors[index].dtype.nptype())
                    pointers[index] = addresses[name]
            if moved:  # only I/O addresses moved: the layers that read or write those tensors are bound again
                executor.move_io(arrays, pointers)
            else:
                executor.bind(arrays, pointers)
            self._bound_addresses = addresses
            self._dirty = False
        self._ready = not self._allocators  # output allocators are asked at every run

    def _deliver_data_dependent_outputs(self, stream: int) -> None:
        if not self._allocators:
            return
        plan = self.engine.plan
        for index in self._outputs:
            name = plan.tensors[index].name
            if name not in self._allocators or name in (self._bound_addresses or {}):
                continue
            shape = self._executor.shapes[index]
            staged = self._executor.arrays[index]
            if shape is None or staged is None:
                raise ExecutionError(f"output {name!r}: its data-dependent shape was never resolved")
            nbytes = int(staged.nbytes)
            allocator = self._allocators[name]
            address = int(
                allocator.reallocate_output_async(name, self._addresses.get(name, 0), nbytes, ALIGNMENT, stream) or 0
            )
            if nbytes and not address:
                raise ExecutionError(f"output allocator for {name!r} returned no memory for {nbytes} bytes")
            self._addresses[name] = address
            if nbytes:
                self.engine.backend.view(address, shape, staged.dtype)[...] = staged
            allocator.notify_shape(name, Dims(shape))

    def __del__(self) -> None:
        release_when_safe(self._release)

    def _release(self) -> None:
        with using_backend(self.engine.backend):
            self._executor.release()
