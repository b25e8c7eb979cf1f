"""CUDA graphs of a context's runs (``engine/graph_runs.py``), on host memory with make-believe graphs: a
capture records the run, a replay calls it again, so the executor's choices show in the backend's log."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import plugrt as trt
from plugrt.backends.base import Backend
from plugrt.backends.cpu import CpuBackend
from plugrt.backends.registry import get_backend
from plugrt.examples import circ_pad_v2

from testing_plugins import fields


class ReplayGraph:
    def __init__(self, run: Callable[[], None], log: list[str]) -> None:
        self.run, self.log = run, log

    def launch(self, stream: int) -> None:
        self.log.append(f"launch {stream}")
        self.run()


class GraphBackend(CpuBackend):
    """Host memory with make-believe graphs; ``capturing`` and ``fail`` play a caller's capture and a run that
    cannot be captured."""

    gpu = True

    def __init__(self) -> None:
        self.log: list[str] = []
        self.capturing_streams: set[int] = set()
        self.fail = False

    def capture(self, run: Callable[[], None], stream: int, warm: bool = True) -> ReplayGraph:
        if warm:
            self.log.append(f"warm {stream}")
            run()
        if self.fail:
            raise RuntimeError("operation not permitted when stream is capturing")
        self.log.append(f"capture {stream}")
        return ReplayGraph(run, self.log)

    def capturing(self, stream: int) -> bool:
        return stream in self.capturing_streams


class Logged(trt.ILogger):
    def __init__(self) -> None:
        trt.ILogger.__init__(self)
        self.lines: list[str] = []

    def log(self, severity: Any, msg: str) -> None:
        self.lines.append(msg)


def _engine(backend: Backend, plugin: bool = False, logger: trt.ILogger | None = None) -> Any:
    logger = logger or trt.Logger(trt.Logger.ERROR)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (-1, 4))
    y = network.add_activation(x, trt.ActivationType.RELU).get_output(0)
    if plugin:
        pad = circ_pad_v2.register().create_plugin("pad", fields(pads=[1, 1]))
        layer = network.add_plugin_v2([y], pad)
        layer.name = "pad"
        y = layer.get_output(0)
    network.mark_output(y)
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    profile.set_shape("x", (1, 4), (2, 4), (4, 4))
    config.add_optimization_profile(profile)
    runtime = trt.Runtime(logger)
    runtime.backend = backend
    engine = runtime.deserialize_cuda_engine(builder.build_serialized_network(network, config))
    assert engine.backend is backend
    return engine


def _bound(engine: Any, rows: int = 1) -> tuple[Any, np.ndarray, np.ndarray]:
    context = engine.create_execution_context()
    x = np.arange(-2 * rows, 2 * rows, dtype=np.float32).reshape(rows, 4)
    context.set_input_shape("x", x.shape)
    y = np.zeros(tuple(context.get_tensor_shape(engine.get_tensor_name(1))), np.float32)
    context.set_tensor_address("x", x.ctypes.data)
    context.set_tensor_address(engine.get_tensor_name(1), y.ctypes.data)
    return context, x, y


def _runs(context: Any, stream: int, count: int) -> list[bool]:
    replayed = []
    for _ in range(count):
        assert context.execute_async_v3(stream)
        replayed.append(context.replayed_graph)
    return replayed


def test_use_cuda_graph_true_captures_once_and_replays_until_something_changes() -> None:
    backend = GraphBackend()
    context, _, y = _bound(_engine(backend))
    context.use_cuda_graph = True
    assert _runs(context, 7, 3) == [False, True, True]
    assert y.tolist() == [[0, 0, 0, 1]]
    assert backend.log == ["warm 7", "capture 7", "launch 7", "launch 7"]
    x2, y2 = np.ones((2, 4), np.float32), np.zeros((2, 4), np.float32)
    context.set_input_shape("x", x2.shape)
    context.set_tensor_address("x", x2.ctypes.data)
    context.set_tensor_address(context.engine.get_tensor_name(1), y2.ctypes.data)
    context.execute_async_v3(7)
    assert backend.log[-2:] == ["warm 7", "capture 7"] and y2.tolist() == [[1.0] * 4] * 2


def test_by_default_the_second_run_captures_itself_and_later_runs_replay() -> None:
    backend = GraphBackend()
    context, x, y = _bound(_engine(backend))
    assert context.use_cuda_graph is None
    assert _runs(context, 7, 4) == [False, False, True, True]
    # the first two runs eager (no warm-up run inside the capture: the second run was it), then replays
    assert backend.log == ["capture 7", "launch 7", "launch 7"]
    x[...] = 5  # new data at the same address: the replay reads it
    context.execute_async_v3(7)
    assert context.replayed_graph and y.tolist() == [[5.0] * 4]


def test_a_change_of_shapes_addresses_or_stream_runs_eagerly_again_before_capturing() -> None:
    backend = GraphBackend()
    context, _, y = _bound(_engine(backend))
    _runs(context, 7, 3)
    y2 = np.zeros_like(y)
    context.set_tensor_address(context.engine.get_tensor_name(1), y2.ctypes.data)
    assert _runs(context, 7, 3) == [False, False, True]
    assert y2.tolist() == [[0, 0, 0, 1]]
    assert _runs(context, 9, 3) == [False, False, True]  # another stream: its own capture
    assert backend.log[-3:] == ["launch 7", "capture 9", "launch 9"]
    x3, y3 = np.full((3, 4), -1, np.float32), np.ones((3, 4), np.float32)
    context.set_input_shape("x", x3.shape)
    context.set_tensor_address("x", x3.ctypes.data)
    context.set_tensor_address(context.engine.get_tensor_name(1), y3.ctypes.data)
    assert _runs(context, 9, 1) == [False] and y3.tolist() == [[0.0] * 4] * 3


def test_alternating_streams_never_capture() -> None:
    backend = GraphBackend()
    context, _, y = _bound(_engine(backend))
    for _ in range(3):
        assert _runs(context, 7, 1) + _runs(context, 9, 1) == [False, False]
    assert backend.log == [] and y.tolist() == [[0, 0, 0, 1]]


@pytest.mark.parametrize("case", ["never", "default stream", "caller capturing", "profiler"])
def test_runs_stay_eager(case: str) -> None:
    backend = GraphBackend()
    context, _, y = _bound(_engine(backend))
    stream = 0 if case == "default stream" else 7
    if case == "never":
        context.use_cuda_graph = False
    if case == "caller capturing":
        backend.capturing_streams.add(7)
    if case == "profiler":

        class Times(trt.IProfiler):
            def report_layer_time(self, layer_name: str, ms: float) -> None:
                pass

        context.profiler = Times()
    assert _runs(context, stream, 4) == [False] * 4
    assert backend.log == [] and y.tolist() == [[0, 0, 0, 1]]


def test_a_plan_with_a_plugin_is_not_replayed_without_being_asked() -> None:
    backend = GraphBackend()
    context, _, y = _bound(_engine(backend, plugin=True))
    assert _runs(context, 7, 3) == [False] * 3 and backend.log == []
    assert y.tolist() == [[1, 0, 0, 0, 1, 0]]
    assert context._executor.graphs.refusal(context.engine.plan) == "layer 'pad' is a plugin"
    context.use_cuda_graph = True  # asked: captured
    assert _runs(context, 7, 2) == [False, True] and backend.log[:2] == ["warm 7", "capture 7"]


def test_a_failed_capture_is_logged_once_and_later_runs_stay_eager() -> None:
    backend = GraphBackend()
    backend.fail = True
    logger = Logged()
    context, _, y = _bound(_engine(backend, logger=logger), rows=2)
    assert _runs(context, 7, 4) == [False] * 4
    assert y.tolist() == [[0, 0, 0, 0], [0, 1, 2, 3]]  # each run's results are its eager run's
    warnings = [line for line in logger.lines if "CUDA graph" in line]
    assert len(warnings) == 1 and "operation not permitted when stream is capturing" in warnings[0]
    assert "use_cuda_graph = False" in warnings[0]
    backend.fail = False
    assert _runs(context, 7, 2) == [False, False] and backend.log == []


def test_graphs_are_not_used_on_a_backend_without_them() -> None:
    context, _, y = _bound(_engine(get_backend("cpu")))
    for mode in (True, None):
        context.use_cuda_graph = mode  # an eager run on the CPU
        assert _runs(context, 0, 3) == [False] * 3 and y.tolist() == [[0, 0, 0, 1]]


def _if_engine(backend: Backend) -> Any:
    """y = Relu(x) if c else Neg(x): both branches of x's shape, the branch chosen by data at each run."""
    from onnx import TensorProto, helper

    def branch(op: str, out: str) -> Any:
        return helper.make_graph(
            [helper.make_node(op, ["x"], [out])], op, [], [helper.make_tensor_value_info(out, TensorProto.FLOAT, [4])]
        )

    node = helper.make_node("If", ["c"], ["y"], then_branch=branch("Relu", "a"), else_branch=branch("Neg", "b"))
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, []), helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    logger = trt.Logger(trt.Logger.ERROR)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    assert trt.OnnxParser(network, logger).parse(model.SerializeToString())
    runtime = trt.Runtime(logger)
    runtime.backend = backend
    return runtime.deserialize_cuda_engine(builder.build_serialized_network(network, builder.create_builder_config()))


def test_control_flow_chooses_its_branch_at_every_run_instead_of_being_replayed() -> None:
    backend = GraphBackend()
    engine = _if_engine(backend)
    context = engine.create_execution_context()
    c, x, y = np.array(True), np.array([-1, 2, -3, 4], np.float32), np.zeros(4, np.float32)
    for name, array in (("c", c), ("x", x), ("y", y)):
        context.set_tensor_address(name, array.ctypes.data)
    for flag in (True, False, True, False):
        c[...] = flag
        assert context.execute_async_v3(7) and not context.replayed_graph
        assert y.tolist() == ([0, 2, 0, 4] if flag else [1, -2, 3, -4])
    assert backend.log == [] and "control flow (if)" in (context._executor.graphs.refusal(context.engine.plan) or "")
