"""The PyTorch tactic's mechanism: the switch, the builder's choice by timing, the plan record, the inspector,
the fallback to NumPy where torch is absent or off, threads. Tests that need torch skip without it."""

from __future__ import annotations

import time

import numpy as np
import pytest
from onnx import TensorProto, helper

import plugrt
from plugrt.core.errors import PlanFormatError
from plugrt.core.logger import ILogger, Severity
from plugrt.engine.inspector import describe_layer
from plugrt.engine.plan import EnginePlan
from plugrt.ops import blas_threads, torch_cpu
from plugrt.ops.activation import ActivationOperator

try:
    import torch
except ImportError:  # the tests that need it skip
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch (pip install 'plugrt[torch]')")


@pytest.fixture(autouse=True)
def _torch_s_own_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests pin the tactic with PyTorch's kernels: its kernels that call oneDNN directly, which come first
    where the library is there, are turned off (tests/unit/test_onednn_*.py pin those)."""
    monkeypatch.setenv("PLUGRT_ONEDNN", "0")


class Collect(ILogger):
    def __init__(self) -> None:
        super().__init__(Severity.VERBOSE)
        self.messages: list[tuple[Severity, str]] = []

    def log(self, severity, msg):  # type: ignore[no-untyped-def]
        self.messages.append((severity, msg))


def _sigmoid_model(n: int = 4096):
    node = helper.make_node("Sigmoid", ["x"], ["y"])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, n])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _x(n: int = 4096) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((2, n)).astype(np.float32)


def test_switch_values(monkeypatch):
    for value, on, always in (("0", False, False), ("off", False, False), ("No", False, False), ("1", True, False)):
        monkeypatch.setenv("PLUGRT_TORCH", value)
        assert (torch_cpu.enabled(), torch_cpu.forced()) == (on, always)
    monkeypatch.setenv("PLUGRT_TORCH", "always")
    assert torch_cpu.enabled() and torch_cpu.forced()
    monkeypatch.delenv("PLUGRT_TORCH")
    assert torch_cpu.enabled() and not torch_cpu.forced()


def test_tactic_names():
    assert [torch_cpu.tactic_name(t) for t in (0, 1, 9)] == ["numpy", "torch", "tactic 9"]


def test_switched_off_build_offers_numpy_only(monkeypatch):
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    engine = plugrt.compile(_sigmoid_model(), device="cpu")
    assert [layer.tactic for layer in engine.engine.plan.layers] == [0]
    assert "tactic" not in describe_layer(engine.engine.plan, 0)


def test_without_torch_every_operator_offers_numpy_only(monkeypatch):
    monkeypatch.setitem(torch_cpu._STATE, "tried", True)
    monkeypatch.setitem(torch_cpu._STATE, "module", None)
    monkeypatch.setenv("PLUGRT_TORCH", "always")
    assert not torch_cpu.available()
    op = ActivationOperator({"type": "SIGMOID"})
    assert op.tactics([plugrt.DataType.FLOAT], [(4,)], [False]) == [0]
    engine = plugrt.compile(_sigmoid_model(), device="cpu")
    assert [layer.tactic for layer in engine.engine.plan.layers] == [0]


@needs_torch
def test_tactic_is_recorded_serialized_and_inspected(monkeypatch):
    monkeypatch.setenv("PLUGRT_TORCH", "always")
    engine = plugrt.compile(_sigmoid_model(), device="cpu")
    plan = EnginePlan.from_bytes(engine.serialize())
    assert [layer.tactic for layer in plan.layers] == [torch_cpu.TORCH_TACTIC]
    info = describe_layer(plan, 0)
    assert (info["tactic"], info["tactic_name"]) == (1, "torch")
    line = plugrt.Runtime(plugrt.Logger()).deserialize_cuda_engine(engine.serialize())
    text = line.create_engine_inspector().get_layer_information(0, plugrt.LayerInformationFormat.JSON)
    assert '"tactic_name": "torch"' in text


@needs_torch
@pytest.mark.parametrize("why", ["switched off", "torch absent"])
def test_torch_plan_runs_with_numpy_where_torch_is_unavailable(monkeypatch, why):
    monkeypatch.setenv("PLUGRT_TORCH", "always")
    data = plugrt.compile(_sigmoid_model(), device="cpu").serialize()
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    reference = plugrt.compile(_sigmoid_model(), device="cpu")({"x": _x()})["y"]
    if why == "torch absent":
        monkeypatch.setenv("PLUGRT_TORCH", "1")
        monkeypatch.setitem(torch_cpu._STATE, "tried", True)
        monkeypatch.setitem(torch_cpu._STATE, "module", None)
    logger = Collect()
    engine = plugrt.Runtime(logger).deserialize_cuda_engine(data)
    warnings = [m for s, m in logger.messages if s == Severity.WARNING]
    assert len(warnings) == 1 and "chose the torch tactic" in warnings[0] and "run with NumPy" in warnings[0]
    assert ("PLUGRT_TORCH turns it off" if why == "switched off" else "torch is not installed") in warnings[0]
    context = engine.create_execution_context()
    x, y = _x(), np.empty((2, 4096), np.float32)
    context.set_tensor_address("x", x.ctypes.data)
    context.set_tensor_address("y", y.ctypes.data)
    assert context.execute_async_v3(0)
    np.testing.assert_array_equal(y, reference)  # the NumPy kernel itself


@pytest.mark.parametrize("tactic, offered", [(7, r"0 \(numpy\) and 1 \(torch\)"), (-1, r"0 \(numpy\) and 1")])
def test_an_unknown_operator_tactic_in_a_plan_is_refused_at_load(monkeypatch, tactic, offered):
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    plan = EnginePlan.from_bytes(plugrt.compile(_sigmoid_model(), device="cpu").serialize())
    plan.layers[0].tactic = tactic
    with pytest.raises(
        PlanFormatError,
        match=rf"layer 'Sigmoid_y/sigmoid#1' \(activation\) has tactic {tactic}; its operator has tactics {offered}",
    ):
        plugrt.Runtime(plugrt.Logger()).deserialize_cuda_engine(plan.to_bytes())


def test_a_tactic_for_an_operator_without_alternatives_is_refused_at_load(monkeypatch):
    node = helper.make_node("Transpose", ["x"], ["y"], perm=[1, 0])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    plan = EnginePlan.from_bytes(plugrt.compile(model, device="cpu").serialize())
    plan.layers[0].tactic = 1
    kind = plan.layers[0].kind
    with pytest.raises(PlanFormatError, match=rf"\({kind}\) has tactic 1; its operator has tactics 0 only"):
        plugrt.Runtime(plugrt.Logger()).deserialize_cuda_engine(plan.to_bytes())


@needs_torch
@pytest.mark.parametrize("slow", ["torch", "numpy"])
def test_the_build_keeps_the_faster_kernel(monkeypatch, slow):
    monkeypatch.setenv("PLUGRT_TORCH", "1")
    monkeypatch.setattr(blas_threads, "_machine_busy", lambda: False)  # wall-clock timing: the sleep counts
    numpy_run, torch_kernel = ActivationOperator.run, ActivationOperator.torch_kernel

    def slow_numpy(self, inputs, outputs, xp=np):  # type: ignore[no-untyped-def]
        time.sleep(0.003)
        numpy_run(self, inputs, outputs, xp)

    def slow_torch(self, inputs, outputs):  # type: ignore[no-untyped-def]
        kernel = torch_kernel(self, inputs, outputs)

        def run() -> None:
            time.sleep(0.003)
            kernel()

        return run

    if slow == "numpy":
        monkeypatch.setattr(ActivationOperator, "run", slow_numpy)
    else:
        monkeypatch.setattr(ActivationOperator, "torch_kernel", slow_torch)
    logger = Collect()
    builder = plugrt.Builder(logger)
    network = builder.create_network(0)
    plugrt.OnnxParser(network, logger).parse(_sigmoid_model().SerializeToString())
    plan = EnginePlan.from_bytes(builder.build_serialized_network(network, builder.create_builder_config()))
    assert [layer.tactic for layer in plan.layers] == [1 if slow == "numpy" else 0]
    assert any("tactic" in m for s, m in logger.messages if s == Severity.VERBOSE)


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


@needs_torch
@pytest.mark.parametrize("busy", [False, True], ids=["quiet", "busy"])
def test_a_busy_machine_times_tactics_by_cpu_time(monkeypatch, busy):
    """NumPy waits 8 ms (as a run another process preempts does), torch computes for 2 ms: on a quiet machine
    the wall clock keeps torch; on a busy one the CPU time keeps NumPy, whose run did less work."""
    monkeypatch.setenv("PLUGRT_TORCH", "1")
    monkeypatch.setattr(blas_threads, "_machine_busy", lambda: busy)
    numpy_run, torch_kernel = ActivationOperator.run, ActivationOperator.torch_kernel

    def waiting_numpy(self, inputs, outputs, xp=np):  # type: ignore[no-untyped-def]
        time.sleep(0.008)
        numpy_run(self, inputs, outputs, xp)

    def working_torch(self, inputs, outputs):  # type: ignore[no-untyped-def]
        kernel = torch_kernel(self, inputs, outputs)

        def run() -> None:
            _spin(0.002)
            kernel()

        return run

    monkeypatch.setattr(ActivationOperator, "run", waiting_numpy)
    monkeypatch.setattr(ActivationOperator, "torch_kernel", working_torch)
    engine = plugrt.compile(_sigmoid_model(), device="cpu")
    assert [layer.tactic for layer in engine.engine.plan.layers] == [0 if busy else 1]


@needs_torch
def test_torch_threads_follow_the_engines_rule(monkeypatch):
    monkeypatch.setattr(blas_threads, "engine_threads", lambda: 2)
    monkeypatch.setattr(blas_threads, "_machine_busy", lambda: False)
    monkeypatch.setitem(torch_cpu._STATE, "threads", 0)
    before = torch.get_num_threads()
    try:
        torch_cpu.use_threads(torch_cpu.MIN_OPENMP_FLOPS)
        assert torch.get_num_threads() == 2
        torch_cpu.use_threads(torch_cpu.MIN_OPENMP_FLOPS / 10)  # small work: one thread
        assert torch.get_num_threads() == 1
        # torch's own threads from less work than the BLAS's (its workers start regions at once)
        assert torch_cpu.MIN_OPENMP_FLOPS < blas_threads.MIN_THREADED_FLOPS
        torch_cpu.use_threads(blas_threads.MIN_THREADED_FLOPS / 2)
        assert torch.get_num_threads() == 2 and blas_threads.threads_for(blas_threads.MIN_THREADED_FLOPS / 2) == 1
        monkeypatch.setattr(blas_threads, "_machine_busy", lambda: True)  # a busy machine: one thread
        torch_cpu.use_threads(1e12)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
        torch_cpu._STATE["threads"] = 0


def test_threads_for_and_engine_threads(monkeypatch):
    monkeypatch.setattr(blas_threads, "engine_threads", lambda: 3)
    monkeypatch.setattr(blas_threads, "_machine_busy", lambda: False)
    assert blas_threads.threads_for(blas_threads.MIN_THREADED_FLOPS) == 3
    assert blas_threads.threads_for(1.0) == 1
    monkeypatch.setattr(blas_threads, "_machine_busy", lambda: True)
    assert blas_threads.threads_for(1e12) == 1


def test_engine_threads_without_a_known_blas(monkeypatch):
    monkeypatch.setattr(blas_threads, "_BLAS", None)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert blas_threads.engine_threads() == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "many")
    assert blas_threads.engine_threads() >= 1


@needs_torch
def test_layers_of_one_configuration_are_timed_once(monkeypatch):
    from plugrt.builder import tactics

    monkeypatch.setenv("PLUGRT_TORCH", "1")
    timed = []
    fastest = tactics._fastest

    def spy(op, layer, state, env, offered, backend):  # type: ignore[no-untyped-def]
        timed.append(layer.name)
        return fastest(op, layer, state, env, offered, backend)

    monkeypatch.setattr(tactics, "_fastest", spy)
    nodes = [helper.make_node("Sigmoid", ["x"], ["a"]), helper.make_node("Sigmoid", ["a"], ["b"])]
    nodes.append(helper.make_node("Tanh", ["b"], ["y"]))
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4096])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4096])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    monkeypatch.setenv("PLUGRT_DISABLE_PASSES", "all")  # three layers, not one fused chain
    engine = plugrt.compile(model, device="cpu")
    assert len(engine.engine.plan.layers) == 3 and len(timed) == 2
    first, second = engine.engine.plan.layers[:2]
    assert first.tactic == second.tactic


def test_torch_is_imported_with_a_short_openmp_spin(monkeypatch: pytest.MonkeyPatch) -> None:
    """plugrt's import of torch sets GNU OpenMP's spin count for it (read once, as torch loads libgomp) and leaves
    the environment as it was; a caller's GOMP_SPINCOUNT or OMP_WAIT_POLICY, or torch already loaded, stands."""
    import os

    from plugrt.ops.torch_cpu import OPENMP_SPIN_COUNT, openmp_spin

    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    with openmp_spin(False):
        assert os.environ["GOMP_SPINCOUNT"] == str(OPENMP_SPIN_COUNT)
    assert "GOMP_SPINCOUNT" not in os.environ
    with openmp_spin(True):  # torch (and its OpenMP) loaded already: nothing to set
        assert "GOMP_SPINCOUNT" not in os.environ
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    with openmp_spin(False):
        assert "GOMP_SPINCOUNT" not in os.environ
    monkeypatch.delenv("OMP_WAIT_POLICY")
    monkeypatch.setenv("GOMP_SPINCOUNT", "5")
    with openmp_spin(False):
        assert os.environ["GOMP_SPINCOUNT"] == "5"
    assert os.environ["GOMP_SPINCOUNT"] == "5"


@needs_torch
def test_switched_off_the_tactic_never_imports_torch(tmp_path):
    """``PLUGRT_TORCH=0``: building and running products (by a constant and by another input) and a softmax imports
    no torch, though it is installed (an operator's support check must not import it)."""
    import subprocess
    import sys

    from onnx import numpy_helper, save

    w = numpy_helper.from_array(np.random.default_rng(1).standard_normal((8, 8)).astype(np.float32), "w")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("MatMul", ["m", "x2"], ["p"]),
        helper.make_node("Softmax", ["p"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in (("x", [4, 8]), ("x2", [8, 4]))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [w],
    )
    path = tmp_path / "m.onnx"
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    script = (
        "import sys, numpy as np, plugrt\n"
        "m = plugrt.compile(sys.argv[1])\n"
        "m(x=np.ones((4, 8), np.float32), x2=np.ones((8, 4), np.float32))\n"
        "print('torch' in sys.modules)\n"
    )
    env = {**__import__("os").environ, "PLUGRT_TORCH": "0"}
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "False"
