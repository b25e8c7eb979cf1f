"""The plugin under test inside a real engine: a one-layer network, its plan, and runs on padded buffers.

Most checks call the hooks directly on host buffers the checker owns. The GPU
stream check needs the whole path instead (device pointers, the CUDA backend,
the stream ``execute_async_v3`` receives), so this module builds a network
holding only the plugin, with the checker's input ranges and types, and runs
its plan on the CPU or on a CUDA device. Every IO buffer has 64 KiB of padding
on both sides, so a small overrun lands there rather than in other memory.
Device work needs CuPy; host buffers are pinned, so a plugin written for the
GPU may read them from device code when the CPU engine runs it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..builder.builder import Builder
from ..core.dims import volume
from ..core.errors import ExecutionError
from ..core.logger import Logger, Severity
from ..interfaces.registry import get_plugin_registry
from ..interfaces.v3 import IPluginV3
from ..network.tensor import TensorIOMode

__all__ = ["EngineRunner", "PaddedBuffer", "build_plan", "creator_registered", "quiet_logger"]

_PAD = 1 << 16
_H2D, _D2H = 1, 2


def quiet_logger() -> Logger:
    """A logger that only reports internal errors (build and load failures surface as exceptions)."""
    return Logger(Severity.INTERNAL_ERROR)


@contextlib.contextmanager
def creator_registered(creator: Any, namespace: str) -> Iterator[None]:
    """Register ``creator`` under ``namespace`` for the block, unless its key is taken already.

    A plan recreates its plugins through the registry; the checker also accepts
    creators that were never registered.
    """
    registry = get_plugin_registry()
    previous = getattr(creator, "plugin_namespace", "")
    added = False
    if creator is not None:
        try:
            added = bool(registry.register_creator(creator, namespace))
        except Exception:
            added = False
    try:
        yield
    finally:
        if added:
            registry.deregister_creator(creator)
            creator.plugin_namespace = previous


def build_plan(ctx: Any) -> bytes:
    """Plan bytes of a network holding only a fresh plugin, inputs ``input<i>``, outputs ``output<k>``."""
    builder = Builder(quiet_logger())
    network = builder.create_network(0)
    tensors = []
    for i, (bounds, dtype) in enumerate(zip(ctx.ranges, ctx.input_types)):
        dims = [bounds.min[a] if bounds.is_static(a) else -1 for a in range(bounds.rank)]
        tensors.append(network.add_input(f"input{i}", dtype, dims))
    plugin = ctx.fresh()
    try:
        if isinstance(plugin, IPluginV3):
            layer: Any = network.add_plugin_v3(tensors, [], plugin)
        else:
            layer = network.add_plugin_v2(tensors, plugin)
        for k in range(layer.num_outputs):
            output = layer.get_output(k)
            output.name = f"output{k}"
            network.mark_output(output)
        config = builder.create_builder_config()
        if any(not r.is_static(a) for r in ctx.ranges for a in range(r.rank)):
            profile = builder.create_optimization_profile()
            for i, bounds in enumerate(ctx.ranges):
                profile.set_shape(f"input{i}", bounds.min, bounds.opt, bounds.max)
            config.add_optimization_profile(profile)
        return bytes(builder.build_serialized_network(network, config))
    finally:
        with contextlib.suppress(Exception):
            ctx.driver.destroy(plugin)


class PaddedBuffer:
    """``nbytes`` of device memory (``device_memory``) or pinned host memory, padded on both sides."""

    def __init__(self, cp: Any, device_memory: bool, nbytes: int) -> None:
        self.cp, self.nbytes = cp, int(nbytes)
        total = self.nbytes + 2 * _PAD
        if device_memory:
            self._owner: Any = cp.empty(total, dtype=cp.uint8)
            self._host: np.ndarray | None = None
            base = int(self._owner.data.ptr)
        else:
            self._owner = cp.cuda.alloc_pinned_memory(total)
            self._host = np.frombuffer(self._owner, np.uint8, total)
            base = int(self._host.ctypes.data)
        self.ptr = base + _PAD

    def fill(self, byte: int) -> None:
        """Set every byte to ``byte``."""
        if self._host is not None:
            self._host[_PAD : _PAD + self.nbytes] = byte
        elif self.nbytes:
            self.cp.cuda.runtime.memset(self.ptr, byte, self.nbytes)

    def upload(self, array: np.ndarray) -> None:
        """Copy a host array (of exactly ``nbytes``) in."""
        data = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        if self._host is not None:
            self._host[_PAD : _PAD + data.size] = data
        elif data.size:
            self.cp.cuda.runtime.memcpy(self.ptr, data.ctypes.data, data.size, _H2D)

    def read(self, shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
        """The contents as a new host array."""
        out = np.empty(tuple(shape), dtype=dtype)
        if self._host is not None:
            out.reshape(-1).view(np.uint8)[...] = self._host[_PAD : _PAD + out.nbytes]
        elif out.nbytes:
            self.cp.cuda.runtime.memcpy(out.ctypes.data, self.ptr, out.nbytes, _D2H)
        return out


class EngineRunner:
    """One execution context of an engine, its input shapes set and padded IO buffers bound."""

    def __init__(self, engine: Any, shapes: Sequence[Sequence[int]], cp: Any) -> None:
        self.cp = cp
        self.context = engine.create_execution_context()
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        outputs = [n for n in names if engine.get_tensor_mode(n) == TensorIOMode.OUTPUT]
        self.inputs: list[tuple[PaddedBuffer, np.dtype]] = []
        for i, shape in enumerate(shapes):
            name = f"input{i}"
            if not self.context.set_input_shape(name, tuple(shape)):
                raise ExecutionError(f"the engine rejected shape {tuple(shape)} for {name}")
            dtype = np.dtype(engine.get_tensor_dtype(name).nptype())
            self.inputs.append((self._bind(name, volume(tuple(shape)) * dtype.itemsize, engine), dtype))
        self.shapes = [tuple(int(d) for d in self.context.get_tensor_shape(n)) for n in outputs]
        #: True when an output's shape is only known once the plugin ran (no buffers are bound then).
        self.data_dependent = any(d < 0 for shape in self.shapes for d in shape)
        self.outputs: list[tuple[PaddedBuffer, np.dtype, tuple[int, ...]]] = []
        if not self.data_dependent:
            for name, shape in zip(outputs, self.shapes):
                dtype = np.dtype(engine.get_tensor_dtype(name).nptype())
                self.outputs.append((self._bind(name, volume(shape) * dtype.itemsize, engine), dtype, shape))

    def _bind(self, name: str, nbytes: int, engine: Any) -> PaddedBuffer:
        buffer = PaddedBuffer(self.cp, not engine.backend.host_memory, nbytes)
        self.context.set_tensor_address(name, buffer.ptr)
        return buffer

    def load(self, inputs: Sequence[np.ndarray], poison: int) -> None:
        """Fresh copies of ``inputs``, outputs filled with the ``poison`` byte; waits until done."""
        for (buffer, dtype), array in zip(self.inputs, inputs):
            buffer.upload(np.asarray(array, dtype=dtype))
        for buffer, _, _ in self.outputs:
            buffer.fill(poison)
        self.cp.cuda.Device().synchronize()

    def run(self, stream: int) -> None:
        """``execute_async_v3(stream)``."""
        self.context.execute_async_v3(stream)

    def results(self) -> list[np.ndarray]:
        """Every output as a host array (after the device finished)."""
        self.cp.cuda.Device().synchronize()
        return [buffer.read(shape, dtype) for buffer, dtype, shape in self.outputs]
