"""One execution context used by two threads at once is refused with a clear error (TensorRT's rule:
one context per thread; an engine may be shared)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import plugrt as trt
from plugrt.examples import circ_pad_v2

from testing_plugins import build, fields

ENTERED, RELEASE = threading.Event(), threading.Event()


class Blocking(circ_pad_v2.CircPadPlugin):
    """CircPad whose enqueue waits until the test lets it go."""

    def __init__(self) -> None:
        super().__init__()
        self.plugin_type = "BlockingPad_hardening"

    def enqueue(self, *args: Any) -> int:
        ENTERED.set()
        assert RELEASE.wait(10)
        return super().enqueue(*args)

    def clone(self) -> Blocking:
        copy = Blocking()
        copy.pads = list(self.pads)
        return copy


class BlockingCreator(circ_pad_v2.CircPadPluginCreator):
    def __init__(self) -> None:
        super().__init__()
        self.name = "BlockingPad_hardening"

    def create_plugin(self, name: str, fc: trt.PluginFieldCollection) -> Blocking:
        plugin = Blocking()
        plugin.pads = circ_pad_v2.CircPadPlugin(fc).pads
        return plugin

    def deserialize_plugin(self, name: str, data: bytes) -> Blocking:
        plugin = Blocking()
        plugin.pads = circ_pad_v2.CircPadPluginCreator.deserialize_plugin(self, name, data).pads
        return plugin


@pytest.fixture(scope="module")
def engine() -> Iterator[trt.ICudaEngine]:
    logger = trt.Logger(trt.Logger.ERROR)
    registry = trt.get_plugin_registry()
    creator = BlockingCreator()
    registry.register_creator(creator, "")
    try:
        builder = trt.Builder(logger)
        network = builder.create_network(0)
        x = network.add_input("x", trt.float32, (-1, 2, 2))
        pad = network.add_plugin_v2([x], creator.create_plugin("pad", fields(pads=[1, 1])))
        pad.get_output(0).name = "y"
        network.mark_output(pad.get_output(0))
        plan = build(network, builder, [{"x": ((1, 2, 2), (1, 2, 2), (4, 2, 2))}])
        yield trt.Runtime(logger).deserialize_cuda_engine(plan)
    finally:
        registry.deregister_creator(creator)


CALLS = {
    "set_input_shape": lambda c, x, y: c.set_input_shape("x", (2, 2, 2)),
    "set_tensor_address": lambda c, x, y: c.set_tensor_address("x", x.ctypes.data),
    "get_tensor_shape": lambda c, x, y: c.get_tensor_shape("y"),
    "set_optimization_profile_async": lambda c, x, y: c.set_optimization_profile_async(0, 0),
    "set_output_allocator": lambda c, x, y: c.set_output_allocator("y", None),
    "execute_async_v3": lambda c, x, y: c.execute_async_v3(0),
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_second_thread_using_a_running_context_is_refused(engine: trt.ICudaEngine, call: str) -> None:
    ENTERED.clear()
    RELEASE.clear()
    context = engine.create_execution_context()
    x = np.arange(4, dtype=np.float32).reshape(1, 2, 2)
    y = np.zeros((1, 2, 4), np.float32)
    assert context.set_input_shape("x", x.shape)
    context.set_tensor_address("x", x.ctypes.data)
    context.set_tensor_address("y", y.ctypes.data)
    runner = threading.Thread(target=context.execute_async_v3, args=(0,))
    runner.start()
    try:
        assert ENTERED.wait(10)
        with pytest.raises(trt.ExecutionError, match=rf"{call}: this execution context is already running in another "
                                                     r"thread \(in execute_async_v3\).*one context per thread"):
            CALLS[call](context, x, y)
        other = engine.create_execution_context()  # other contexts of the engine are free
        assert other.set_input_shape("x", (3, 2, 2))
    finally:
        RELEASE.set()
        runner.join(10)
    assert not runner.is_alive()
    np.testing.assert_array_equal(y, np.pad(x, [(0, 0), (0, 0), (1, 1)], mode="wrap"))
    assert context.set_input_shape("x", (1, 2, 2))  # free again once the run is over
