"""Matrix products run on one BLAS thread unless they are large and the machine has a core to spare."""

from __future__ import annotations

import os

import numpy as np
import pytest

from plugrt.ops import blas_threads


def _threads() -> int:
    assert blas_threads._BLAS is not None
    return blas_threads._BLAS[1]()


@pytest.fixture
def two_threads(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    if blas_threads._BLAS is None:
        pytest.skip("NumPy's BLAS is not OpenBLAS")
    before = _threads()
    blas_threads.set_blas_threads(2)
    monkeypatch.setattr(blas_threads, "_CONFIGURED", 2)
    yield
    blas_threads.set_blas_threads(before)


def test_small_products_use_one_thread_and_the_setting_comes_back(two_threads: None) -> None:
    with blas_threads.blas_threads_for(1e3):
        assert _threads() == 1
        a = np.ones((4, 4), np.float32)
        np.testing.assert_array_equal(a @ a, np.full((4, 4), 4, np.float32))
    assert _threads() == 2


def test_large_products_keep_the_threads_only_on_a_quiet_machine(
    two_threads: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(blas_threads, "_machine_busy", lambda: False)
    with blas_threads.blas_threads_for(1e9):
        assert _threads() == 2
    monkeypatch.setattr(blas_threads, "_machine_busy", lambda: True)
    with blas_threads.blas_threads_for(1e9):
        assert _threads() == 1
    assert _threads() == 2


def test_an_error_inside_restores_the_setting(two_threads: None) -> None:
    with pytest.raises(ValueError, match="inside"), blas_threads.blas_threads_for(0):
        raise ValueError("inside")
    assert _threads() == 2


def test_a_product_the_blas_runs_alone_gets_no_guard(two_threads: None) -> None:
    """Decided at bind: a matrix-matrix product of at most GEMM_ALONE_AT_MOST multiply-adds runs on the calling
    thread whatever the count, so its guard changes nothing (the count stays 2 inside); a larger one gets one
    thread; a matrix-vector product keeps the lower threshold; a large one is decided per call (None)."""
    guard = blas_threads.product_guard(576, 8, 8)
    with guard:
        assert _threads() == 2
    assert blas_threads.product_guard(64, 64, 64) is blas_threads.product_guard(576, 8, 8)
    with blas_threads.product_guard(192, 32, 104):  # 638976 multiply-adds: OpenBLAS would take its threads
        assert _threads() == 1
    assert _threads() == 2
    with blas_threads.product_guard(1, 200, 100):  # matrix-vector, 20000 > BLAS_ALONE_BELOW
        assert _threads() == 1
    assert blas_threads.product_guard(1024, 1024, 1024) is None


def test_only_single_products_use_the_matrix_matrix_threshold(two_threads: None) -> None:
    """Rows of several products stacked (a batch of matrix-vector products) keep the lower threshold."""
    assert blas_threads.blas_runs_alone(100, 100, 20, single=True)
    assert not blas_threads.blas_runs_alone(100, 100, 20)
    assert not blas_threads.blas_runs_alone(1, 400, 100, single=True)
    assert blas_threads.blas_runs_alone(1, 90, 100, single=True)
    most = blas_threads._GEMM_ALONE
    assert most in (blas_threads.GEMM_ALONE_AT_MOST, 2 * blas_threads.GEMM_ALONE_AT_MOST - 1)
    assert blas_threads.blas_runs_alone(most // 4, 2, 2, single=True)  # at most `most` multiply-adds
    assert not blas_threads.blas_runs_alone(most // 4 + 1, 2, 2, single=True)


def test_the_blas_version_is_read_from_its_configuration() -> None:
    if blas_threads._BLAS is None:
        pytest.skip("NumPy's BLAS is not OpenBLAS")
    version = blas_threads._version()
    assert len(version) == 3 and version >= (0, 2, 0)


def test_without_threads_to_set_every_guard_is_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blas_threads, "_CONFIGURED", 1)
    assert blas_threads.product_guard(192, 32, 104) is blas_threads.product_guard(8, 8, 8)
    monkeypatch.setattr(blas_threads, "_BLAS", None)
    assert blas_threads.blas_runs_alone(10**4, 10**4, 10**4, single=True)


def test_the_cores_others_keep_busy_leave_this_process_out() -> None:
    """The machine's busy CPU seconds less this process's own, over the seconds between two samples."""
    assert blas_threads.others_cores(12.0, 5.0, 10.0, 4.0, 1.0) == pytest.approx(1.0)  # 2 s busy, 1 s ours
    assert blas_threads.others_cores(12.0, 6.0, 10.0, 4.0, 1.0) == 0.0  # all of it ours
    assert blas_threads.others_cores(12.0, 7.0, 10.0, 4.0, 1.0) == 0.0  # never below zero (tick rounding)
    assert blas_threads.others_cores(None, 5.0, 10.0, 4.0, 1.0) is None
    assert blas_threads.others_cores(12.0, 5.0, None, 4.0, 1.0) is None  # the first sample
    assert blas_threads.others_cores(12.0, 5.0, 10.0, 4.0, 0.0) is None


def test_the_machines_cpu_seconds_are_read_from_proc_stat(tmp_path) -> None:  # type: ignore[no-untyped-def]
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 20 30 5000 40 5 5 40 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
    tick = blas_threads.os.sysconf("SC_CLK_TCK")
    # user, nice, system, irq, softirq and steal; not idle or I/O wait
    assert blas_threads._machine_cpu_seconds(str(stat)) == pytest.approx(200 / tick)
    stat.write_text("intr 1 2 3\n")
    assert blas_threads._machine_cpu_seconds(str(stat)) is None
    stat.write_text("cpu  100 20\n")
    assert blas_threads._machine_cpu_seconds(str(stat)) is None
    assert blas_threads._machine_cpu_seconds(str(tmp_path / "missing")) is None


def _sampled(monkeypatch: pytest.MonkeyPatch, machine: list[float | None], own: list[float], load: float) -> list[bool]:
    """machine_busy's answers, one sample apart each, on a 2-core machine with an engine of two threads."""
    clock = iter(range(10, 100, 2))
    machines, owns = iter(machine), iter(own)
    monkeypatch.setattr(
        blas_threads,
        "_load",
        {"checked": -1e9, "machine": None, "own": 0.0, "busy": False, "pid": os.getpid(), "measured": False},
    )
    monkeypatch.setattr(blas_threads.time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(blas_threads, "_machine_cpu_seconds", lambda: next(machines))
    monkeypatch.setattr(blas_threads, "_own_cpu_seconds", lambda: next(owns))
    monkeypatch.setattr(blas_threads.os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(blas_threads.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(blas_threads, "engine_threads", lambda: 2)
    return [blas_threads.machine_busy() for _ in machine]


def test_a_busy_machine_is_one_whose_other_processes_take_a_core(monkeypatch: pytest.MonkeyPatch) -> None:
    """Decided from /proc/stat's busy time less this process's own (2 s between samples): the engine's own
    threads never make the machine busy (the load average counts them: load 1.9 here); another process on a
    core does; the first sample, and a machine without /proc/stat, fall back to the load average."""
    # first sample (load 1.9: busy by the load average), then 3.8 s busy of which 3.6 ours, then 2 s of others
    assert _sampled(monkeypatch, [100.0, 103.8, 107.8], [10.0, 13.6, 15.6], 1.9) == [True, False, True]
    assert _sampled(monkeypatch, [100.0, 102.5], [10.0, 12.0], 0.2) == [False, False]  # others 0.25 of a core
    assert _sampled(monkeypatch, [100.0, 102.9], [10.0, 12.0], 0.2) == [False, True]  # others 0.45 of a core
    assert _sampled(monkeypatch, [None, None], [10.0, 12.0], 0.2) == [False, False]
    assert _sampled(monkeypatch, [None, None], [10.0, 12.0], 1.6) == [True, True]


def test_a_busy_machine_stays_busy_until_others_take_less(monkeypatch: pytest.MonkeyPatch) -> None:
    """Busy from 0.3 of a core beyond what the engine leaves free, quiet again below 0.15: a process that wants a
    core gets about half of one while the engine runs its layers in parts, and must not flip it back to quiet."""
    # first sample by the load average (quiet), then others at 0.45, 0.2, 0.2, 0.1, 0.2 of a core (2 s apart)
    machine = [100.0, 102.9, 103.3, 103.7, 103.9, 104.3]
    own = [10.0, 12.0, 12.0, 12.0, 12.0, 12.0]
    assert _sampled(monkeypatch, machine, own, 0.2) == [False, True, True, True, False, False]
    assert blas_threads.STAY_BUSY_MARGIN < blas_threads.BUSY_MARGIN


def _from_import(monkeypatch: pytest.MonkeyPatch, after: float, machine: float, load: float) -> bool:
    """The first decision ``after`` seconds past the import's sample (machine 100 s, own 10 s, load ``load``), the
    machine's busy time then ``machine``, this process's 10 s (its own threads idle)."""
    clock = [50.0]
    monkeypatch.setattr(blas_threads.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(blas_threads, "_machine_cpu_seconds", lambda: 100.0)
    monkeypatch.setattr(blas_threads, "_own_cpu_seconds", lambda: 10.0)
    monkeypatch.setattr(blas_threads.os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(blas_threads.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(blas_threads, "engine_threads", lambda: 2)
    monkeypatch.setattr(blas_threads, "_load", dict(blas_threads._load))
    blas_threads._sample()
    clock[0] += after
    monkeypatch.setattr(blas_threads, "_machine_cpu_seconds", lambda: machine)
    return blas_threads.machine_busy()


def test_the_first_decision_measures_from_the_import(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process started right after a load went away (load average 1.9) is quiet once 0.2 s have passed since the
    import; one started beside a spinning process (load average 0.2, the load just came) is busy."""
    assert not _from_import(monkeypatch, 0.5, 100.01, 1.9)
    assert _from_import(monkeypatch, 0.5, 100.5, 0.2)  # others: a whole core
    assert _from_import(monkeypatch, 0.1, 100.0, 1.9)  # sooner: the load average decides


def test_a_forked_process_does_not_measure_from_its_parents_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    """The parent's sample counts the parent's CPU time (a forked process starts its own at 0): a child takes its
    own first sample, deciding by the load average until then."""
    monkeypatch.setattr(
        blas_threads,
        "_load",
        {"checked": 49.9, "machine": 100.0, "own": 500.0, "busy": False, "pid": os.getpid() + 1, "measured": True},
    )
    monkeypatch.setattr(blas_threads.time, "monotonic", lambda: 50.0)
    monkeypatch.setattr(blas_threads, "_machine_cpu_seconds", lambda: 100.1)
    monkeypatch.setattr(blas_threads, "_own_cpu_seconds", lambda: 0.1)  # (against the parent's 500: "others" 500)
    monkeypatch.setattr(blas_threads.os, "getloadavg", lambda: (0.1, 0.1, 0.1))
    assert not blas_threads.machine_busy()
    assert blas_threads._load["pid"] == os.getpid() and blas_threads._load["own"] == 0.1


def test_the_machine_is_sampled_at_most_once_a_second(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        blas_threads,
        "_load",
        {"checked": 5.0, "machine": 1.0, "own": 0.0, "busy": True, "pid": os.getpid(), "measured": True},
    )
    monkeypatch.setattr(blas_threads.time, "monotonic", lambda: 5.0 + blas_threads.SAMPLE_SECONDS / 2)
    monkeypatch.setattr(blas_threads, "_machine_cpu_seconds", lambda: pytest.fail("sampled again"))
    assert blas_threads.machine_busy()


def test_runs_keep_the_blas_on_one_thread_once_torch_kernels_are_bound(
    two_threads: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenBLAS's workers spin after a product that used them, on the cores torch's OpenMP workers need: where
    PyTorch's CPU kernels are bound, an engine run (the CPU backend's run scope) keeps the BLAS on one thread,
    counted across nested and concurrent runs; between runs the caller's setting is back."""
    from plugrt.backends.cpu import CpuBackend

    monkeypatch.setattr(blas_threads, "_QUIET", {"wanted": 0, "runs": 0})
    with CpuBackend().stream_scope(0):
        assert _threads() == 2  # no torch kernel bound: nothing changes
    blas_threads.quiet_blas_workers()
    with CpuBackend().stream_scope(0):
        assert _threads() == 1
        with blas_threads.blas_threads_for(1e3):  # a product's guard inside a run comes back to one thread
            assert _threads() == 1
        assert _threads() == 1
        with blas_threads.run_scope():  # a nested run (a loop's body, a second context)
            assert _threads() == 1
        assert _threads() == 1
    assert _threads() == 2


def test_a_run_that_fails_gives_the_threads_back(two_threads: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blas_threads, "_QUIET", {"wanted": 1, "runs": 0})
    with pytest.raises(ValueError, match="inside"), blas_threads.run_scope():
        raise ValueError("inside")
    assert _threads() == 2 and blas_threads._QUIET["runs"] == 0


def test_binding_a_torch_cpu_kernel_asks_for_quiet_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    import plugrt as trt

    monkeypatch.setattr(blas_threads, "_QUIET", {"wanted": 0, "runs": 0})
    monkeypatch.setenv("PLUGRT_TORCH", "always")
    builder = trt.Builder(trt.Logger(trt.Logger.ERROR))
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (2, 8))
    y = network.add_activation(x, trt.ActivationType.TANH).get_output(0)
    y.name = "y"
    network.mark_output(y)
    plan = builder.build_serialized_network(network, builder.create_builder_config())
    engine = trt.Runtime(trt.Logger(trt.Logger.ERROR)).deserialize_cuda_engine(plan)
    context = engine.create_execution_context()
    a, out = np.linspace(-2, 2, 16, dtype=np.float32).reshape(2, 8), np.empty((2, 8), np.float32)
    context.set_tensor_address("x", a.ctypes.data)
    context.set_tensor_address("y", out.ctypes.data)
    context.execute_async_v3(0)
    np.testing.assert_allclose(out, np.tanh(a), rtol=1e-6)
    assert blas_threads._QUIET["wanted"] == 1
