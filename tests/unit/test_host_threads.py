"""Large elementwise and tap-sum kernels split between two threads, with the single thread's results."""

from __future__ import annotations

import os
import signal
import threading

import numpy as np
import pytest

from plugrt.ops import conv, host_threads
from plugrt.ops.conv import ConvolutionOperator, pack_conv_kernel
from plugrt.ops.fast_math import erf_into, gelu_erf_into


@pytest.fixture
def split(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host_threads, "MIN_PARALLEL_ELEMENTS", 0)


def _parts(count: int, elements: int) -> list[tuple[int, int, int, str]]:
    seen: list[tuple[int, int, int, str]] = []
    host_threads.in_two_parts(
        count, elements, lambda part, a, b: seen.append((part, a, b, threading.current_thread().name))
    )
    return sorted(seen)


def test_work_is_split_in_two_disjoint_parts_only_when_large(split: None, monkeypatch: pytest.MonkeyPatch) -> None:
    (first, second) = _parts(5, 10)
    assert first[:3] == (0, 0, 3) and second[:3] == (1, 3, 5)
    assert second[3].startswith("plugrt-kernel") and first[3] == threading.current_thread().name
    assert [p[:3] for p in _parts(1, 10)] == [(0, 0, 1)]  # one item
    monkeypatch.setattr(host_threads, "MIN_PARALLEL_ELEMENTS", 11)
    assert [p[:3] for p in _parts(5, 10)] == [(0, 0, 5)]  # too little work


def test_a_busy_machine_takes_runs_of_items_as_each_thread_is_free(
    split: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Busy: up to ``BUSY_RUNS`` disjoint runs covering every item, part 0 on this thread and 1 on the helper."""
    monkeypatch.setattr(host_threads, "machine_busy", lambda: True)
    gate = threading.Event()
    seen: list[tuple[int, int, int, str]] = []

    def work(part: int, start: int, stop: int) -> None:
        seen.append((part, start, stop, threading.current_thread().name))
        if part == 0 and not gate.wait(5):  # the caller's first run waits until the helper has taken one
            raise AssertionError("the helper took no run")
        if part == 1:
            gate.set()

    host_threads.in_two_parts(20, 10, work)
    runs = sorted(seen, key=lambda r: r[1])
    assert len(runs) == host_threads.BUSY_RUNS
    assert [r[1] for r in runs] == [0, *(r[2] for r in runs[:-1])] and runs[-1][2] == 20  # disjoint, all items
    assert {r[0] for r in runs} == {0, 1}
    for part, _, _, name in runs:
        assert (part == 1) == name.startswith("plugrt-kernel")
    seen.clear()
    host_threads.in_two_parts(3, 10, lambda part, a, b: seen.append((part, a, b, "")))  # fewer items than runs
    assert sorted(r[1:3] for r in seen) == [(0, 1), (1, 2), (2, 3)]


def test_an_error_in_a_busy_run_reaches_the_caller(split: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host_threads, "machine_busy", lambda: True)

    def work(part: int, start: int, stop: int) -> None:
        if start == 10:
            raise ValueError(f"items {start}..{stop} failed")

    with pytest.raises(ValueError, match=r"items 10\.\.12 failed"):
        host_threads.in_two_parts(20, 10, work)


def test_an_engine_of_one_thread_never_uses_the_helper(split: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """``OPENBLAS_NUM_THREADS=1`` (or ``OMP_NUM_THREADS=1``): the halves, and the items pulled by two, all run here."""
    monkeypatch.setattr(host_threads, "engine_threads", lambda: 1)
    assert [p[:3] for p in _parts(5, 10)] == [(0, 0, 5)] and _parts(5, 10)[0][3] == threading.current_thread().name
    names: list[str] = []
    host_threads.pulled_by_two(6, lambda item: names.append(threading.current_thread().name))
    assert names == [threading.current_thread().name] * 6
    monkeypatch.setattr(host_threads, "engine_threads", lambda: 2)
    (_, second) = _parts(5, 10)
    assert second[3].startswith("plugrt-kernel")


def test_an_error_in_the_helper_reaches_the_caller(split: None) -> None:
    def work(part: int, start: int, stop: int) -> None:
        if part == 1:
            raise ValueError(f"items {start}..{stop} failed")

    with pytest.raises(ValueError, match=r"items 2\.\.4 failed"):
        host_threads.in_two_parts(4, 10, work)


def test_the_helper_does_not_wait_on_itself(split: None) -> None:
    inner: list[list[tuple[int, int, int, str]]] = []

    def work(part: int, start: int, stop: int) -> None:
        if part == 1:
            inner.append(_parts(4, 10))  # nested from the helper: one part, inline

    host_threads.in_two_parts(2, 10, work)
    assert [p[:3] for p in inner[0]] == [(0, 0, 4)]


def test_split_kernels_match_the_single_thread(split: None, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(100_003) * 3).astype(np.float32)
    kernel = rng.standard_normal((16, 1, 3, 3)).astype(np.float32)
    images = rng.standard_normal((2, 16, 40, 40)).astype(np.float32)
    monkeypatch.setattr(conv, "TAPS_MIN_COLUMN_BYTES", 0)
    results = []
    for smallest in (0, 1 << 40):
        monkeypatch.setattr(host_threads, "MIN_PARALLEL_ELEMENTS", smallest)
        erf, gelu, conv_out = np.empty_like(x), np.empty_like(x), np.empty_like(images)
        erf_into(x, erf)
        gelu_erf_into(x, gelu)
        op = ConvolutionOperator(
            {"num_output_maps": 16, "kernel_shape": [3, 3], "group": 16, "pads": [1, 1, 1, 1]},
            {"kernel": pack_conv_kernel(kernel, 16)},
        )
        op.run([images], [conv_out])
        assert op._depthwise is not None and op._depthwise.block < op._depthwise.rows
        results.append((erf, gelu, conv_out))
    for split_result, single in zip(*results):
        np.testing.assert_array_equal(split_result, single)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_gets_its_own_helper(split: None) -> None:
    assert len(_parts(2, 10)) == 2  # the parent's helper exists
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        signal.alarm(30)  # a child waiting on the parent's (absent) helper thread dies instead of hanging
        try:
            os.write(write, str(len(_parts(2, 10))).encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    assert os.read(read, 8) == b"2"
    os.close(read)
