"""Calls of an engine on host arrays, with the work that does not depend on data done once per shape.

``plugrt.compile``'s callable runs an engine many times, most often with the
same input shapes as the call before. :class:`HostCall` keeps what those
shapes decide (the shapes set on the context, the buffers bound to it, the
output shapes) and redoes it only when a call brings other shapes:

- an IO tensor of at most :data:`STAGE_BYTES` is *staged*: bound once to an
  array of its own, an input copied in at each call and an output copied out
  into a new array. A small copy costs less than what a new address costs: the
  layers that read or write the tensor bound again (tens of microseconds on a
  model with control flow, whose bind is its branch's);
- a larger input is bound in place (the caller's array), a larger output to a
  new array at each call: a copy would cost more than binding again;
- an output whose shape depends on data is placed by an output allocator and
  copied out.

Every call returns new output arrays: the arrays of an earlier call stay the
caller's, never written again. Between calls, nothing else sets the context's
shapes or addresses (it is the caller's own context).

>>> call = HostCall(HostRun(engine))             # doctest: +SKIP
>>> y, = call([x])                               # doctest: +SKIP
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .host_run import ArrayBuffer, HostRun

__all__ = ["STAGE_BYTES", "HostCall"]

#: IO tensors up to this size are copied through arrays bound once: a 256 KiB copy took 2.6 us here, while a new
#: address for MobileNetV2's 250 KB output bound its last three layers again and rebuilt the run's launches, ~0.3 ms
#: a call (at 64 KiB, the limit before, its calls took 0.26-0.47 ms longer; one thread, docs/benchmarks.md)
STAGE_BYTES = 1 << 18


class HostCall:
    """Runs the engine of ``run`` (a CPU engine) on input arrays in ``run.input_names`` order.

    The arrays must have the engine's types and, where bound in place, be C-contiguous;
    a shape outside the profile raises :class:`~plugrt.ShapeError` (from
    :meth:`HostRun.set_shapes`).
    """

    def __init__(self, run: HostRun) -> None:
        self.run = run
        self.context = run.context
        #: the input shapes the bindings below are for (None: nothing bound yet)
        self.shapes: tuple[tuple[int, ...], ...] | None = None
        #: inputs copied into their staged array: (position, array); the others bound in place: (position, name)
        self._copied_in: list[tuple[int, np.ndarray]] = []
        self._in_place: list[tuple[int, str]] = []
        #: per output, what makes the caller's array after a run: a staged array's ``copy``, or the output
        #: allocator's copy (a data-dependent shape); None for an output bound to a new array at each call
        self._take: list[Callable[[], np.ndarray] | None] = []
        #: outputs bound to a new array at each call: (position, name, shape, type)
        self._fresh: list[tuple[int, str, tuple[int, ...], np.dtype]] = []
        self._addresses: dict[str, int] = {}
        #: the arrays bound in place by the last call, kept alive as long as the context holds their addresses
        self._held: list[np.ndarray] = []

    def __call__(self, arrays: Sequence[np.ndarray], stream: int = 0) -> list[np.ndarray]:
        """The outputs (new arrays, in ``run.output_names`` order) of a run on ``arrays``."""
        shapes = tuple([a.shape for a in arrays])
        if shapes != self.shapes:
            self._bind(shapes)
        for k, staged in self._copied_in:
            np.copyto(staged, arrays[k], casting="unsafe")
        if self._in_place or self._fresh:
            held = [arrays[k] for k, _ in self._in_place]
            for (_, name), array in zip(self._in_place, held):
                self._address(name, array)
            results: list[Any] = [None] * len(self._take)  # every one set below
            for k, name, shape, dtype in self._fresh:
                results[k] = out = np.empty(shape, dtype)
                self._address(name, out)
                held.append(out)
            self._held = held
            self.context.execute_async_v3(stream)
            for k, take in enumerate(self._take):
                if take is not None:
                    results[k] = take()
            return results
        self.context.execute_async_v3(stream)  # every tensor staged: the outputs are copies of the staged arrays
        return [take() for take in self._take]  # type: ignore[misc]

    def _address(self, name: str, array: np.ndarray) -> None:
        address = array.ctypes.data if array.size else 0
        if self._addresses.get(name) != address:
            self.context.set_tensor_address(name, address)
            self._addresses[name] = address

    def _bind(self, shapes: tuple[tuple[int, ...], ...]) -> None:
        """Shapes set, staged arrays bound and output kinds found for ``shapes`` (checked by the context)."""
        run = self.run
        self.shapes = None  # until every step below succeeded
        self._held = []
        run.set_shapes(dict(zip(run.input_names, shapes)))
        self._addresses = {}
        self._copied_in, self._in_place = [], []
        for k, (name, shape) in enumerate(zip(run.input_names, shapes)):
            staged = self._stage(name, shape, run.dtype(name))
            if staged is None:
                self._in_place.append((k, name))
            else:
                self._copied_in.append((k, staged))
        self._take, self._fresh = [], []
        for k, name in enumerate(run.output_names):
            shape = run.shape(name)
            if any(d < 0 for d in shape) or run.has_allocator(name):
                run.allocate([name])  # an output allocator, set once
                self._take.append(functools.partial(run.allocated_output, name))
                continue
            dtype = run.dtype(name)
            staged = self._stage(name, shape, dtype)
            self._take.append(None if staged is None else staged.copy)
            if staged is None:
                self._fresh.append((k, name, shape, dtype))
        self.shapes = shapes

    def _stage(self, name: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray | None:
        """An array bound once to ``name`` when the tensor is small enough to be copied at each call."""
        if math.prod(shape) * dtype.itemsize > STAGE_BYTES:
            return None
        buffer = self.run.bind(name, ArrayBuffer.empty(self.run.backend, shape, dtype))
        self._addresses[name] = buffer.ptr
        return buffer.array  # type: ignore[no-any-return, attr-defined]
