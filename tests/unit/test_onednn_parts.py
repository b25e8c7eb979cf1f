"""A layer in parts on a busy machine (``ops/onednn_parts.py``): the compiled loop that two threads take the parts
with (``ops/parts_numba_loops.py``, ``host_threads.taken_by_two``) against the Python items, the failures it
reports, and what it declines. The layers themselves are tested in ``test_onednn_conv_parts.py``,
``test_onednn_matmul.py`` and ``test_onednn_rnn.py``."""

from __future__ import annotations

import ctypes
import threading
import time

import numpy as np
import pytest

from onednn_support import NEEDS_NUMBA, ONEDNN_TESTS, BusyMachine
from plugrt.ops import depthwise_numba, host_threads, onednn, onednn_parts
from plugrt.ops.onednn_matmul import product_onednn

RNG = np.random.default_rng(11)


def _random(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _loops():  # type: ignore[no-untyped-def]
    loops = depthwise_numba.compiled_module("parts_numba_loops")
    assert loops is not None
    return loops


#: execute(primitive, stream, nargs, args) and set_handle(memory, address) as the compiled loop calls them
_EXECUTE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int, ctypes.c_size_t)
_SET_HANDLE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_size_t, ctypes.c_size_t)


class _Recorder:
    """Stand-ins for oneDNN's entry points, in Python: each part's run recorded (by thread), a status by part."""

    def __init__(self, statuses: dict[int, int] | None = None, delay: float = 0.0) -> None:
        self.runs: list[tuple[int, int, int, int]] = []  # (part, stream, nargs, args)
        self.handles: list[tuple[int, int]] = []
        self.statuses = statuses or {}
        self.lock = threading.Lock()

        def execute(primitive: int, stream: int, nargs: int, args: int) -> int:
            time.sleep(delay)
            with self.lock:
                self.runs.append((primitive, stream, nargs, args))
            return self.statuses.get(primitive, 0)

        def set_handle(memory: int, address: int) -> int:
            with self.lock:
                self.handles.append((memory, address))
            return 0

        self.functions = (_EXECUTE(execute), _SET_HANDLE(set_handle))  # (kept alive: the loop calls their addresses)
        self.execute, self.set_handle = (_address(f) for f in self.functions)


def _address(function: object) -> int:
    address = ctypes.cast(function, ctypes.c_void_p).value
    assert address
    return address


def _table(count: int, scratch: bool = False) -> np.ndarray:
    """Parts 0..count-1: 'primitive' i, args 100 + i, nargs 3, scratchpad memory 1000 + i (or none)."""
    return np.array([[i, 100 + i, 3, 1000 + i if scratch else 0] for i in range(count)], np.uint64)


# --- the compiled loop ---------------------------------------------------------------------------------------------


@NEEDS_NUMBA
def test_two_threads_run_every_part_once() -> None:
    loops, recorder = _loops(), _Recorder(delay=0.001)
    state, table = np.zeros(loops.STATE_SIZE, np.int64), _table(12, scratch=True)
    helper = threading.Thread(target=loops.pull, args=(recorder.execute, recorder.set_handle, state, table, 7, 70))
    helper.start()
    loops.pull(recorder.execute, recorder.set_handle, state, table, 5, 50)
    helper.join()
    assert sorted(run[0] for run in recorder.runs) == list(range(12))
    assert {run[1] for run in recorder.runs} <= {50, 70} and all(run[2:] == (3, 100 + run[0]) for run in recorder.runs)
    # each part's scratchpad was pointed at the buffer of the thread that ran it, on that thread's stream
    scratch_of = {memory - 1000: address for memory, address in recorder.handles}
    assert all(scratch_of[part] == {50: 5, 70: 7}[stream] for part, stream, _, _ in recorder.runs)
    assert state[loops.DONE] == 12 and state[loops.STATUS] == 0
    now = np.zeros(2, np.int64)
    assert loops.wait_done(onednn_parts._clock(), onednn_parts._MONOTONIC, state, 12, 0, now)


@NEEDS_NUMBA
def test_a_failing_part_stops_the_rest_and_keeps_its_status() -> None:
    loops, recorder = _loops(), _Recorder(statuses={3: 2, 5: 7})
    state, table = np.zeros(loops.STATE_SIZE, np.int64), _table(8)
    loops.pull(recorder.execute, recorder.set_handle, state, table, 0, 0)
    assert [run[0] for run in recorder.runs] == [0, 1, 2, 3]  # none after the failure
    assert state[loops.STATUS] == 2 and state[loops.DONE] == 8  # the parts after it are counted done, not run
    assert recorder.handles == []  # no scratchpad: nothing pointed


@NEEDS_NUMBA
def test_leave_counts_the_parts_not_taken_done() -> None:
    loops = _loops()
    state = np.zeros(loops.STATE_SIZE, np.int64)
    state[loops.NEXT] = state[loops.DONE] = 3  # three taken and done
    loops.leave(state, 10)
    assert state[loops.DONE] == 10 and state[loops.NEXT] >= 10
    recorder = _Recorder()
    loops.pull(recorder.execute, recorder.set_handle, state, _table(10), 0, 0)
    assert recorder.runs == []  # nothing left to take


@NEEDS_NUMBA
def test_waiting_for_a_part_still_running_gives_up_after_its_time() -> None:
    loops = _loops()
    state = np.zeros(loops.STATE_SIZE, np.int64)
    state[loops.NEXT], state[loops.DONE] = 4, 3  # one part taken and not done
    now, clock = np.zeros(2, np.int64), onednn_parts._clock()
    start = time.perf_counter()
    assert not loops.wait_done(clock, onednn_parts._MONOTONIC, state, 4, 3_000_000, now)
    assert 0.003 <= time.perf_counter() - start < 1.0
    state[loops.DONE] = 4
    assert loops.wait_done(clock, onednn_parts._MONOTONIC, state, 4, 0, now)


# --- taken_by_two ---------------------------------------------------------------------------------------------------


def _two_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host_threads, "_two_threads_allowed", lambda: True)


def test_the_caller_waits_for_the_helpers_part_after_spinning(monkeypatch: pytest.MonkeyPatch) -> None:
    """The helper holds its part longer than the caller spins: the caller blocks until the helper's take returns."""
    _two_threads(monkeypatch)
    monkeypatch.setattr(host_threads, "SPIN_SECONDS", 0.001)
    helper_done = threading.Event()
    spun: list[float] = []

    def take() -> None:
        if host_threads.on_helper():
            time.sleep(0.05)
            helper_done.set()

    def finished(seconds: float) -> bool:
        spun.append(seconds)
        return helper_done.is_set()

    host_threads.taken_by_two(take, finished, lambda: None)
    assert helper_done.is_set() and spun == [0.001]


def test_an_error_on_the_helper_is_raised_on_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    _two_threads(monkeypatch)
    returned = threading.Event()

    def take() -> None:
        if host_threads.on_helper():
            raise MemoryError("the helper's buffer")
        returned.wait(5.0)  # (the helper has failed by now: it set the event below)

    def finished(seconds: float) -> bool:
        return False  # wait for the helper's take to return

    real = host_threads._Taking.help

    def help_and_tell(self: host_threads._Taking, apart: int | None) -> None:
        real(self, apart)
        returned.set()

    monkeypatch.setattr(host_threads._Taking, "help", help_and_tell)
    with pytest.raises(MemoryError, match="the helper's buffer"):
        host_threads.taken_by_two(take, finished, lambda: None)


def test_an_error_on_the_caller_leaves_the_rest_untaken(monkeypatch: pytest.MonkeyPatch) -> None:
    _two_threads(monkeypatch)
    stopped: list[bool] = []

    def take() -> None:
        if not host_threads.on_helper():
            raise ValueError("the caller's stream")

    with pytest.raises(ValueError, match="the caller's stream"):
        host_threads.taken_by_two(take, lambda seconds: True, lambda: stopped.append(True))
    assert stopped == [True]


def test_one_thread_takes_everything_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host_threads, "_two_threads_allowed", lambda: False)
    threads: list[bool] = []
    host_threads.taken_by_two(lambda: threads.append(host_threads.on_helper()), lambda s: pytest.fail(), lambda: None)
    assert threads == [False]


# --- parts of a real layer ------------------------------------------------------------------------------------------


@NEEDS_NUMBA
def test_a_failing_part_raises_a_onednn_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A part whose execution fails (its status from oneDNN) raises OneDnnError naming the call."""
    machine = BusyMachine(monkeypatch, compiled=True)
    real_entries = onednn_parts._entries
    failing = _EXECUTE(lambda primitive, stream, nargs, args: 5)  # oneDNN's "runtime error"

    def entries(lib):  # type: ignore[no-untyped-def]
        return _address(failing), real_entries(lib)[1]

    monkeypatch.setattr(onednn_parts, "_entries", entries)
    a, weight = _random(64, 96), _random(96, 80)
    out = np.empty((64, 80), np.float32)
    kernel = product_onednn(a, weight, False, None, out)
    assert kernel is not None
    machine.busy = True
    with pytest.raises(onednn.OneDnnError, match=r"execute \(a part\) failed: runtime error"):
        kernel()


@pytest.mark.parametrize("switch", ["0", "off"])
def test_numba_turned_off_runs_the_parts_as_python_items(monkeypatch: pytest.MonkeyPatch, switch: str) -> None:
    monkeypatch.setenv(depthwise_numba.ENV_SWITCH, switch)
    lib = onednn.library()
    assert lib is not None
    assert onednn_parts._Compiled.made(lib, []) is None


pytestmark = ONEDNN_TESTS
