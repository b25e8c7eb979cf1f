"""The plugin under test inside a real engine: a one-layer network, its plan, and runs on padded buffers.

Most checks run the plugin's node on guarded host buffers the checker owns (``session.py``). The GPU
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
from ..core.logger import Logger, Severity
from ..engine.host_run import HostRun
from ..interfaces.registry import get_plugin_registry
from ..interfaces.v3 import IPluginV3

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

    def upload(self, array: np.ndarray, stream: int = 0) -> None:
        """Copy a host array (of exactly ``nbytes``) in; done when this returns, whatever ``stream``."""
        data = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        if self._host is not None:
            self._host[_PAD : _PAD + data.size] = data
        elif data.size:
            self.cp.cuda.runtime.memcpy(self.ptr, data.ctypes.data, data.size, _H2D)

    def download(self, out: np.ndarray, stream: int = 0) -> None:
        """Copy the contents into the host array ``out`` (call once the device finished)."""
        if self._host is not None:
            out.reshape(-1).view(np.uint8)[...] = self._host[_PAD : _PAD + out.nbytes]
        elif out.nbytes:
            self.cp.cuda.runtime.memcpy(out.ctypes.data, self.ptr, out.nbytes, _D2H)


class EngineRunner:
    """The engine run (:class:`~plugrt.engine.host_run.HostRun`) at the checker's input shapes, on padded buffers."""

    def __init__(self, engine: Any, shapes: Sequence[Sequence[int]], cp: Any) -> None:
        self.cp = cp
        device_memory = not engine.backend.host_memory
        self.host_run = HostRun(
            engine, lambda shape, dtype: PaddedBuffer(cp, device_memory, volume(shape) * dtype.itemsize)
        )
        self.host_run.set_shapes({f"input{i}": shape for i, shape in enumerate(shapes)})
        names = self.host_run.output_names
        self.shapes = [self.host_run.shape(n) for n in names]
        #: True when an output's shape is only known once the plugin ran (no buffers are bound then).
        self.data_dependent = bool(self.host_run.data_dependent)
        self.outputs: list[tuple[PaddedBuffer, np.dtype, tuple[int, ...]]] = []
        if not self.data_dependent:
            self.host_run.allocate()
            buffers: Any = self.host_run.buffers
            self.outputs = [(buffers[n], self.host_run.dtype(n), shape) for n, shape in zip(names, self.shapes)]

    def load(self, inputs: Sequence[np.ndarray], poison: int) -> None:
        """Fresh copies of ``inputs``, outputs filled with the ``poison`` byte; waits until done."""
        run = self.host_run
        run.upload({f"input{i}": np.asarray(a, dtype=run.dtype(f"input{i}")) for i, a in enumerate(inputs)})
        for buffer, _, _ in self.outputs:
            buffer.fill(poison)
        self.cp.cuda.Device().synchronize()

    def run(self, stream: int) -> None:
        """``execute_async_v3(stream)``."""
        self.host_run.execute(stream)

    def results(self) -> list[np.ndarray]:
        """Every output as a host array (after the device finished)."""
        self.cp.cuda.Device().synchronize()
        return list(self.host_run.results().values())
