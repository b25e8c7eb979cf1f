"""One engine, many execution contexts, many threads.

Each context owns its activation memory and its plugin clones, so contexts of one
engine may run at the same time in different threads; every output must match a
NumPy reference computed independently.
"""

from __future__ import annotations

import gc
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import plugrt as trt
from plugrt.examples import circ_pad_v2, circ_pad_v3

from testing_plugins import build, fields, run

V2_PADS = [1, 2, 0, 1]  # last dim: 1 before, 2 after; second-to-last: 0 before, 1 after
V3_PADS = [2, 0]  # last dim: 2 before
PROFILE = ((1, 2, 2), (2, 4, 5), (4, 6, 9))
THREADS = 4
RUNS = 50


def reference(x: np.ndarray) -> np.ndarray:
    """CircPad V2 then CircPad V3, with NumPy only."""
    first = np.pad(x, [(0, 0), (0, 1), (1, 2)], mode="wrap")
    return np.pad(first, [(0, 0), (0, 0), (2, 0)], mode="wrap")


def _pad_engine(v2_creator: Any = None, v3_creator: Any = None) -> trt.ICudaEngine:
    logger = trt.Logger(trt.Logger.ERROR)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (-1, -1, -1))
    v2_creator = v2_creator or circ_pad_v2.register()
    v3_creator = v3_creator or circ_pad_v3.register()
    first = network.add_plugin_v2([x], v2_creator.create_plugin("pad2", fields(pads=V2_PADS)))
    first.name = "pad_v2"
    second = network.add_plugin_v3([first.get_output(0)], [], v3_creator.create_plugin("pad3", fields(pads=V3_PADS), trt.TensorRTPhase.BUILD))
    second.name = "pad_v3"
    second.get_output(0).name = "y"
    network.mark_output(second.get_output(0))
    plan = build(network, builder, [{"x": PROFILE}])
    return trt.Runtime(logger).deserialize_cuda_engine(plan)


@pytest.fixture(scope="module")
def engine() -> trt.ICudaEngine:
    return _pad_engine()


def _random_shape(rng: np.random.Generator) -> tuple[int, ...]:
    lo, _, hi = PROFILE
    return tuple(int(rng.integers(a, b + 1)) for a, b in zip(lo, hi))


def _run_threads(target: Callable[[int], None], count: int) -> list[BaseException]:
    errors: list[BaseException] = []

    def wrapped(index: int) -> None:
        try:
            target(index)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=wrapped, args=(i,), name=f"worker-{i}") for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a worker thread hung"
    return errors


def test_reference_matches_a_single_run(engine: trt.ICudaEngine) -> None:
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    out = run(engine.create_execution_context(), {"x": x})["y"]
    assert out.shape == (2, 4, 9)
    np.testing.assert_array_equal(out, reference(x))


def test_four_contexts_in_four_threads(engine: trt.ICudaEngine) -> None:
    contexts = [engine.create_execution_context() for _ in range(THREADS)]
    barrier = threading.Barrier(THREADS)
    shapes_seen: list[set[tuple[int, ...]]] = [set() for _ in range(THREADS)]

    def worker(index: int) -> None:
        rng = np.random.default_rng(1000 + index)
        context = contexts[index]
        barrier.wait()
        for _ in range(RUNS):
            shape = _random_shape(rng)
            shapes_seen[index].add(shape)
            x = rng.standard_normal(shape).astype(np.float32)
            out = run(context, {"x": x})["y"]
            np.testing.assert_array_equal(out, reference(x), err_msg=f"thread {index} shape {shape}")

    errors = _run_threads(worker, THREADS)
    assert not errors, errors
    assert all(len(seen) > 10 for seen in shapes_seen)  # shapes really changed between runs


def test_contexts_reuse_bound_buffers_across_threads(engine: trt.ICudaEngine) -> None:
    """Each thread keeps its input/output buffers bound and only refills them (the fast path)."""
    shape = (3, 4, 5)
    barrier = threading.Barrier(THREADS)

    def worker(index: int) -> None:
        rng = np.random.default_rng(index)
        context = engine.create_execution_context()
        x = np.empty(shape, np.float32)
        y = np.empty(reference(x).shape, np.float32)
        assert context.set_input_shape("x", shape)
        context.set_tensor_address("x", x.ctypes.data)
        context.set_tensor_address("y", y.ctypes.data)
        barrier.wait()
        for _ in range(RUNS):
            x[...] = rng.standard_normal(shape)
            context.execute_async_v3(0)
            np.testing.assert_array_equal(y, reference(x))

    errors = _run_threads(worker, THREADS)
    assert not errors, errors


def test_two_contexts_created_concurrently(engine: trt.ICudaEngine) -> None:
    for round_ in range(10):
        barrier = threading.Barrier(2)
        made: list[Any] = [None, None]

        def create(index: int) -> None:
            barrier.wait()
            made[index] = engine.create_execution_context()

        with trt.trace_plugin_calls() as trace:
            errors = _run_threads(create, 2)
        assert not errors, errors
        assert made[0] is not None and made[1] is not None and made[0] is not made[1]
        # the two creations may interleave: compare counts, not order
        assert Counter(trace.methods("pad_v2", "context")) == {"clone": 2, "attach_to_context": 2}
        v3_calls = [m for m in trace.methods("pad_v3", "context") if m != "get_capability_interface"]
        assert v3_calls == ["attach_to_context"] * 2
        rng = np.random.default_rng(round_)
        inputs = [rng.standard_normal(_random_shape(rng)).astype(np.float32) for _ in range(2)]

        def use(index: int) -> None:
            np.testing.assert_array_equal(run(made[index], {"x": inputs[index]})["y"], reference(inputs[index]))

        errors = _run_threads(use, 2)
        assert not errors, errors


def test_each_context_gets_its_own_plugin_clones() -> None:
    engine = _pad_engine()
    gc.collect()  # contexts of earlier tests must not be torn down inside the trace
    with trt.trace_plugin_calls() as trace:
        contexts = [engine.create_execution_context() for _ in range(THREADS)]
        for context in contexts:
            run(context, {"x": np.ones((1, 2, 2), np.float32)})
        del contexts, context
        gc.collect()
    v2 = trace.methods("pad_v2")
    v3 = trace.methods("pad_v3")
    assert v2.count("clone") == THREADS
    assert v2.count("attach_to_context") == THREADS
    assert v3.count("attach_to_context") == THREADS
    assert v2.count("configure_plugin") == THREADS  # one shape change per context, on its own clone
    assert v3.count("on_shape_change") == THREADS
    assert v2.count("enqueue") == v3.count("enqueue") == THREADS
    # teardown of the contexts releases exactly their clones; the engine's plugins stay
    assert v2.count("detach_from_context") == THREADS
    assert v2.count("destroy") == THREADS
    assert "terminate" not in v2


# --- plugins that notice when an instance is shared -------------------------------------------


class _Usage:
    """Which threads each plugin instance ran on, and state mismatches seen."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.threads: dict[int, set[int]] = {}
        self.problems: list[str] = []

    def note(self, plugin: Any, expected: tuple[int, ...], got: tuple[int, ...]) -> None:
        with self.lock:
            self.threads.setdefault(id(plugin), set()).add(threading.get_ident())
            if expected != got:
                self.problems.append(f"{type(plugin).__name__} configured for {expected} but enqueued with {got}")


USAGE = _Usage()


class TrackedPadV2(circ_pad_v2.CircPadPlugin):
    """Checks in enqueue that the shape given to configure_plugin is still its own."""

    def __init__(self, fc: trt.PluginFieldCollection | None = None) -> None:
        super().__init__(fc)
        self.plugin_type = "TrackedPadV2_concurrency"

    def enqueue(self, input_desc: Any, output_desc: Any, inputs: Any, outputs: Any, workspace: int, stream: int) -> int:
        expected = tuple(self.input_shape)
        threading.Event().wait(0.0005)  # let another thread's configure_plugin run if the instance were shared
        USAGE.note(self, expected, tuple(input_desc[0].dims))
        return super().enqueue(input_desc, output_desc, inputs, outputs, workspace, stream)

    def clone(self) -> TrackedPadV2:
        copy = TrackedPadV2()
        copy.pads, copy.input_shape = list(self.pads), self.input_shape
        return copy


class TrackedPadV2Creator(circ_pad_v2.CircPadPluginCreator):
    def __init__(self) -> None:
        super().__init__()
        self.name = "TrackedPadV2_concurrency"

    def create_plugin(self, name: str, fc: trt.PluginFieldCollection) -> TrackedPadV2:
        return TrackedPadV2(fc)

    def deserialize_plugin(self, name: str, data: bytes) -> TrackedPadV2:
        plugin = TrackedPadV2()
        plugin.pads = circ_pad_v2.CircPadPluginCreator.deserialize_plugin(self, name, data).pads
        return plugin


class TrackedPadV3(circ_pad_v3.CircPadPluginV3):
    """Remembers the shape from on_shape_change and checks it in enqueue."""

    def __init__(self, fc: trt.PluginFieldCollection | None = None) -> None:
        super().__init__(fc)
        self.plugin_name = "TrackedPadV3_concurrency"
        self.shape: tuple[int, ...] = ()

    def on_shape_change(self, inp: list[trt.PluginTensorDesc], out: list[trt.PluginTensorDesc]) -> None:
        super().on_shape_change(inp, out)
        self.shape = tuple(inp[0].dims)

    def enqueue(self, input_desc: Any, output_desc: Any, inputs: Any, outputs: Any, workspace: int, stream: int) -> None:
        expected = self.shape
        threading.Event().wait(0.0005)
        USAGE.note(self, expected, tuple(input_desc[0].dims))
        super().enqueue(input_desc, output_desc, inputs, outputs, workspace, stream)

    def clone(self) -> TrackedPadV3:
        copy = TrackedPadV3()
        copy.pads, copy.widths, copy.shape = list(self.pads), list(self.widths), self.shape
        return copy


class TrackedPadV3Creator(circ_pad_v3.CircPadPluginV3Creator):
    def __init__(self) -> None:
        super().__init__()
        self.name = "TrackedPadV3_concurrency"

    def create_plugin(self, name: str, fc: trt.PluginFieldCollection, phase: trt.TensorRTPhase) -> TrackedPadV3:
        return TrackedPadV3(fc)


@pytest.fixture(scope="module")
def tracked_engine() -> Any:
    registry = trt.get_plugin_registry()
    creators = [TrackedPadV2Creator(), TrackedPadV3Creator()]
    for creator in creators:
        registry.register_creator(creator, "")
    try:
        yield _pad_engine(*creators)
    finally:
        for creator in creators:
            registry.deregister_creator(creator)


def test_no_plugin_instance_is_shared_between_threads(tracked_engine: trt.ICudaEngine) -> None:
    USAGE.threads.clear()
    USAGE.problems.clear()
    contexts = [tracked_engine.create_execution_context() for _ in range(THREADS)]
    barrier = threading.Barrier(THREADS)

    def worker(index: int) -> None:
        rng = np.random.default_rng(2000 + index)
        barrier.wait()
        for _ in range(RUNS // 2):
            x = rng.standard_normal(_random_shape(rng)).astype(np.float32)
            np.testing.assert_array_equal(run(contexts[index], {"x": x})["y"], reference(x))

    errors = _run_threads(worker, THREADS)
    assert not errors, errors
    assert not USAGE.problems, USAGE.problems[:5]
    assert len(USAGE.threads) == 2 * THREADS  # one V2 and one V3 instance per context
    assert all(len(threads) == 1 for threads in USAGE.threads.values())


def test_one_context_in_two_threads_at_once_is_refused(engine: trt.ICudaEngine) -> None:
    entered, release = threading.Event(), threading.Event()

    class Blocking(circ_pad_v2.CircPadPlugin):
        def __init__(self) -> None:
            super().__init__()
            self.plugin_type = "BlockingPad_concurrency"

        def enqueue(self, *args: Any) -> int:
            entered.set()
            assert release.wait(10)
            return super().enqueue(*args)

        def clone(self) -> Blocking:
            copy = Blocking()
            copy.pads = list(self.pads)
            return copy

    class BlockingCreator(circ_pad_v2.CircPadPluginCreator):
        def __init__(self) -> None:
            super().__init__()
            self.name = "BlockingPad_concurrency"

        def create_plugin(self, name: str, fc: trt.PluginFieldCollection) -> Blocking:
            plugin = Blocking()
            plugin.pads = circ_pad_v2.CircPadPlugin(fc).pads
            return plugin

        def deserialize_plugin(self, name: str, data: bytes) -> Blocking:
            plugin = Blocking()
            plugin.pads = circ_pad_v2.CircPadPluginCreator.deserialize_plugin(self, name, data).pads
            return plugin

    registry = trt.get_plugin_registry()
    creator = BlockingCreator()
    registry.register_creator(creator, "")
    try:
        blocking_engine = _pad_engine(v2_creator=creator)
    finally:
        registry.deregister_creator(creator)
    context = blocking_engine.create_execution_context()
    x = np.ones((1, 2, 2), np.float32)
    y = np.zeros(reference(x).shape, np.float32)
    assert context.set_input_shape("x", x.shape)
    context.set_tensor_address("x", x.ctypes.data)
    context.set_tensor_address("y", y.ctypes.data)
    first = threading.Thread(target=context.execute_async_v3, args=(0,))
    first.start()
    try:
        assert entered.wait(10)
        with pytest.raises(trt.ExecutionError, match="already running in another thread"):
            context.execute_async_v3(0)
        # another context of the same engine is not blocked by the lock of the first
        other = blocking_engine.create_execution_context()
        assert other.set_input_shape("x", x.shape)
    finally:
        release.set()
        first.join(10)
    assert not first.is_alive()
    np.testing.assert_array_equal(y, reference(x))
    context.execute_async_v3(0)  # free again
