"""What NVIDIA's samples do around their plugins, written once: build, (de)serialize, run.

The samples drive TensorRT through the plain Python API (or Polygraphy, which does the
same): a builder, a network, a config with an optimization profile, a serialized plan,
``Runtime.deserialize_cuda_engine``, a context, ``set_input_shape`` /
``set_tensor_address`` / ``execute_async_v3``, and an ``IOutputAllocator`` for outputs whose
shape depends on data. The plugins in these tests are the samples' plugins with their
CuPy/Torch/Triton kernels replaced by NumPy code of the same call convention.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import plugrt as trt

LOGGER = trt.Logger(trt.Logger.WARNING)


class HostOutputAllocator(trt.IOutputAllocator):
    """Grows one host buffer per output; remembers the last shape TensorRT reported."""

    def __init__(self) -> None:
        trt.IOutputAllocator.__init__(self)
        self.buffer = np.zeros(0, np.uint8)
        self.shape: tuple[int, ...] | None = None
        self.sizes: list[int] = []

    def reallocate_output(self, tensor_name: str, memory: int, size: int, alignment: int) -> int:
        self.sizes.append(size)
        if self.buffer.nbytes < size:
            self.buffer = np.zeros(size, np.uint8)
        return int(self.buffer.ctypes.data)

    def notify_shape(self, tensor_name: str, shape: trt.Dims) -> None:
        self.shape = tuple(shape)


def build_plan(
    builder: trt.Builder,
    network: trt.INetworkDefinition,
    profiles: Sequence[dict[str, tuple[Sequence[int], Sequence[int], Sequence[int]]]] = (),
    flags: Sequence[trt.BuilderFlag] = (),
    config: trt.IBuilderConfig | None = None,
) -> bytes:
    """``build_serialized_network`` with optional profiles ({input: (min, opt, max)}) and flags."""
    config = config or builder.create_builder_config()
    for flag in flags:
        config.set_flag(flag)
    for shapes in profiles:
        profile = builder.create_optimization_profile()
        for name, (lo, opt, hi) in shapes.items():
            profile.set_shape(name, lo, opt, hi)
        config.add_optimization_profile(profile)
    return bytes(builder.build_serialized_network(network, config))


def deserialize(plan: bytes) -> trt.ICudaEngine:
    """The engine of ``plan`` through a fresh Runtime (plugins revived through the registry)."""
    return trt.Runtime(LOGGER).deserialize_cuda_engine(plan)


def infer(
    context: trt.IExecutionContext,
    inputs: dict[str, np.ndarray],
    allocators: dict[str, HostOutputAllocator] | None = None,
) -> dict[str, np.ndarray]:
    """One inference with host arrays; data-dependent outputs come through ``allocators``."""
    engine = context.engine
    allocators = allocators if allocators is not None else {}
    keep: list[Any] = []
    for name, array in inputs.items():
        array = np.ascontiguousarray(array)
        keep.append(array)
        assert context.set_input_shape(name, array.shape)
        context.set_tensor_address(name, array.ctypes.data)
    outputs: dict[str, np.ndarray] = {}
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        if engine.get_tensor_mode(name) != trt.TensorIOMode.OUTPUT:
            continue
        shape = tuple(context.get_tensor_shape(name))
        if any(d < 0 for d in shape):
            if name not in allocators:
                allocators[name] = HostOutputAllocator()
                context.set_output_allocator(name, allocators[name])
            continue
        out = np.full(shape, 7, dtype=trt.nptype(engine.get_tensor_dtype(name)))
        context.set_tensor_address(name, out.ctypes.data)
        outputs[name] = out
    context.execute_async_v3(0)
    for name, allocator in allocators.items():
        assert allocator.shape is not None
        dtype = np.dtype(trt.nptype(engine.get_tensor_dtype(name)))
        count = int(np.prod(allocator.shape, dtype=np.int64))
        outputs[name] = allocator.buffer[: count * dtype.itemsize].view(dtype).reshape(allocator.shape).copy()
    return outputs
