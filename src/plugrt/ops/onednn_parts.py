"""A layer in parts on a busy machine: one-thread oneDNN primitives over parts of its work, run by the calling
thread and the engine's helper together (``onednn_buffers.launcher``'s ``split``; made by
``onednn_conv_parts.py``, ``onednn_rnn.py``, ``onednn_matmul.py``).

The two threads take the parts as each is free, so the thread that has a core does most of the work. Where numba is
installed (``plugrt[numba]``) a compiled loop takes and runs them (``parts_numba_loops.py``, through
:func:`~.host_threads.taken_by_two`): no GIL, no condition variable between the threads, and the caller spins
for the helper's last part rather than sleeping. Elsewhere, or with ``PLUGRT_NUMBA`` off, each part is a Python
item of :func:`~.host_threads.pulled_by_two`. Both run every part exactly once, in the same primitives on the same
memories: the results are the same bits.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import onednn
from .depthwise_numba import compiled_module
from .host_threads import pulled_by_two, taken_by_two

__all__ = ["MAX_PARTS", "PART_FLOPS", "Parts", "part_count"]

#: a part has at least about this much work, in floating-point operations (~200 us on one core here: the helper
#: thread costs ~70 us to wake)
PART_FLOPS = 2e7
#: at most this many parts per layer (enough to even out a busy core; each is a primitive of its own)
MAX_PARTS = 8


def part_count(work: float) -> int:
    """How many parts a layer of ``work`` operations is split into on a busy machine: one per :data:`PART_FLOPS`,
    at most :data:`MAX_PARTS` (below two: none)."""
    return min(MAX_PARTS, int(work // PART_FLOPS))


class Parts:
    """One-thread primitives over parts of a layer, run by this thread and the helper together; the parts'
    memories lie at fixed offsets in the layer's (``relative``: memory, the layer's, byte offset), followed at each
    run wherever the layer's point (a staging copy in the running thread's buffer, a tensor taken from a slot)."""

    def __init__(
        self, lib: Any, primitives: Sequence[onednn.Primitive], relative: Sequence[tuple[Any, Any, int]]
    ) -> None:
        self.lib = lib
        self.primitives = list(primitives)
        self.relative = list(relative)
        self.parents = list({id(parent): parent for _, parent, _ in relative}.values())
        #: the compiled loop's run of the parts, where numba is there (else None: Python items)
        self.compiled = _Compiled.made(lib, self.primitives)

    def __len__(self) -> int:
        return len(self.primitives)

    def run(self) -> None:
        """Every part once, taken by this thread and the helper (the compiled loop, else
        :func:`~.host_threads.pulled_by_two`)."""
        lib = self.lib
        for parent in self.parents:
            parent.settle(lib)  # a staged tensor: this thread's buffer, where the layer's other steps run
        for memory, parent, offset in self.relative:
            memory.point(lib, parent.address + offset)
        if self.compiled is not None:
            self.compiled.run()
        else:
            pulled_by_two(len(self.primitives), self._run)

    def _run(self, item: int) -> None:
        self.primitives[item].run()


#: the address of libc's clock (None: none), looked up once
_CLOCK: list[int | None] = []
#: the clock the caller's spin is timed by
_MONOTONIC = getattr(time, "CLOCK_MONOTONIC", 1)


def _entries(lib: Any) -> tuple[int, int]:
    """The addresses of oneDNN's ``dnnl_primitive_execute`` and ``dnnl_memory_set_data_handle``."""
    return _address(lib.dll.dnnl_primitive_execute), _address(lib.dll.dnnl_memory_set_data_handle)


def _address(function: Any) -> int:
    """The address of a ctypes function (ValueError where it has none)."""
    address = ctypes.cast(function, ctypes.c_void_p).value
    if not address:
        raise ValueError(f"no address for {function!r}")
    return int(address)


def _clock() -> int | None:
    """The address of libc's ``clock_gettime`` (None where there is none)."""
    if not _CLOCK:
        try:
            _CLOCK.append(_address(ctypes.CDLL(None).clock_gettime))
        except (OSError, AttributeError, ValueError):
            _CLOCK.append(None)
    return _CLOCK[0]


class _Compiled:
    """The parts as a table the compiled loop runs from both threads: each thread points the parts' scratchpads at
    its own buffer and runs them on its own stream. The table holds the primitives' handles and argument arrays by
    address: the :class:`Parts` holding it keeps the primitives, which are bound once, when made."""

    def __init__(self, lib: Any, loops: Any, table: np.ndarray, scratch_bytes: int) -> None:
        self.lib = lib
        self.loops = loops
        self.table = table
        self.scratch_bytes = scratch_bytes
        self.execute, self.set_handle = _entries(lib)
        self.clock = _clock()

    @classmethod
    def made(cls, lib: Any, primitives: Sequence[onednn.Primitive]) -> _Compiled | None:
        """The compiled run of ``primitives``; None where numba or libc's clock is not there, or a primitive cannot
        be a row of the table (:meth:`~.onednn.Primitive.table_row`) or runs on more than one thread."""
        loops = compiled_module("parts_numba_loops")
        if loops is None or _clock() is None or any(p.threads != 1 for p in primitives):
            return None
        rows = [p.table_row() for p in primitives]
        if any(row is None for row in rows):
            return None
        table = np.array([row[:4] for row in rows if row is not None], np.uint64).reshape(-1, loops.TABLE_COLUMNS)
        scratch_bytes = max((row[4] for row in rows if row is not None), default=0)
        return cls(lib, loops, table, scratch_bytes)

    def run(self) -> None:
        """Every part once (:func:`~.host_threads.taken_by_two`); a failing part raises
        :class:`~.onednn.OneDnnError`."""
        loops = self.loops
        state = np.zeros(loops.STATE_SIZE, np.int64)
        now = np.zeros(2, np.int64)
        count = len(self.table)

        def take() -> None:
            lib = self.lib
            lib.use_threads(1)
            scratch = onednn.thread_buffer(onednn.SCRATCH_SLOT, self.scratch_bytes) if self.scratch_bytes else 0
            stream = int(lib.stream().value)
            loops.pull(self.execute, self.set_handle, state, self.table, scratch, stream)

        def finished(seconds: float) -> bool:
            return bool(loops.wait_done(self.clock, _MONOTONIC, state, count, int(seconds * 1e9), now))

        def stop() -> None:
            loops.leave(state, count)

        taken_by_two(take, finished, stop)
        onednn.check(int(state[loops.STATUS]), "execute (a part)")
