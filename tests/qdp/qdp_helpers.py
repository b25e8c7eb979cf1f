"""Building and running one-plugin networks of decorator-API plugins on the CPU."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

import plugrt as trt
from plugrt.plugin import _lib

LOGGER = trt.Logger(trt.Logger.ERROR)


def network_with(
    make: Callable[[trt.INetworkDefinition, Any], Any],
    inputs: dict[str, tuple[trt.DataType, Sequence[int]]],
    flags: int = 0,
) -> tuple[trt.Builder, trt.INetworkDefinition]:
    """A network with ``inputs`` whose layers ``make(network, tensors)`` adds; it returns the outputs to mark."""
    builder = trt.Builder(LOGGER)
    network = builder.create_network(flags)
    tensors = {name: network.add_input(name, dtype, shape) for name, (dtype, shape) in inputs.items()}
    outputs = make(network, tensors)
    for name, tensor in outputs.items():
        tensor.name = name
        network.mark_output(tensor)
    return builder, network


def build(
    builder: trt.Builder,
    network: trt.INetworkDefinition,
    profile: dict[str, tuple[Sequence[int], Sequence[int], Sequence[int]]] | None = None,
    flags: Sequence[trt.BuilderFlag] = (),
    preview: Sequence[trt.PreviewFeature] = (),
) -> bytes:
    """The plan of ``network`` (with one profile when given)."""
    config = builder.create_builder_config()
    for flag in flags:
        config.set_flag(flag)
    for feature in preview:
        config.set_preview_feature(feature, True)
    if profile:
        p = builder.create_optimization_profile()
        for name, (lo, opt, hi) in profile.items():
            p.set_shape(name, lo, opt, hi)
        config.add_optimization_profile(p)
    return bytes(builder.build_serialized_network(network, config))


class Allocator(trt.IOutputAllocator):
    """Places a data-dependent output and remembers its shape."""

    def __init__(self) -> None:
        super().__init__()
        self.buffer = np.zeros(0, np.uint8)
        self.shape: tuple[int, ...] = ()

    def reallocate_output(self, tensor_name: str, memory: int, size: int, alignment: int) -> int:
        if self.buffer.nbytes < size:
            self.buffer = np.zeros(size, np.uint8)
        return int(self.buffer.ctypes.data)

    def notify_shape(self, tensor_name: str, shape: trt.Dims) -> None:
        self.shape = tuple(shape)


def run(plan: bytes, inputs: dict[str, np.ndarray], data_dependent: Sequence[str] = ()) -> dict[str, np.ndarray]:
    """Deserialize ``plan`` on the CPU, run it once and return every output."""
    engine = trt.Runtime(LOGGER).deserialize_cuda_engine(plan)
    context = engine.create_execution_context()
    for name, array in inputs.items():
        context.set_input_shape(name, array.shape)
        context.set_tensor_address(name, array.ctypes.data)
    outputs: dict[str, np.ndarray] = {}
    allocators: dict[str, tuple[Allocator, np.dtype]] = {}
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        if engine.get_tensor_mode(name) != trt.TensorIOMode.OUTPUT:
            continue
        dtype = np.dtype(trt.nptype(engine.get_tensor_dtype(name)))
        if name in data_dependent:
            allocators[name] = (Allocator(), dtype)
            context.set_output_allocator(name, allocators[name][0])
        else:
            outputs[name] = np.full(tuple(context.get_tensor_shape(name)), 7, dtype)
            context.set_tensor_address(name, outputs[name].ctypes.data)
    context.execute_async_v3(0)
    for name, (allocator, dtype) in allocators.items():
        count = int(np.prod(allocator.shape, dtype=np.int64))
        outputs[name] = allocator.buffer[: count * dtype.itemsize].view(dtype).reshape(allocator.shape).copy()
    return outputs


@contextmanager
def defined(*plugin_ids: str) -> Iterator[None]:
    """Forget the named definitions (and their creators) when the block ends."""
    try:
        yield
    finally:
        for plugin_id in plugin_ids:
            _lib.forget(plugin_id)
