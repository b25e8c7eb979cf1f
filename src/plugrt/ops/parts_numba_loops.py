"""The compiled loops that run a layer's parts from two threads without the GIL (imported only where numba is
installed; :class:`plugrt.ops.onednn_buffers.Parts`).

A layer in parts is a table of oneDNN primitives, one row a part: the primitive, its argument array, their count
and the memory of its scratchpad (0: none). Each thread calls :func:`pull`, which takes the next part with an atomic
add on a shared counter and executes it, until none is left; the calling thread then waits in :func:`wait_done`,
spinning, until every part taken is done. Neither needs the GIL: in Python the two threads hand the GIL and a
condition variable back and forth at every part, and a thread that sleeps on a busy machine gives its core to the
other process and waits for a slice to get it back (0.9 ms median on a 2-core VM, docs/benchmarks.md).

The oneDNN entry points and the clock come in as arguments, their addresses as integers (called through
an intrinsic), and the table too, so the compiled code holds no address and numba's on-disk cache can keep it,
and a call's dispatch converts only integers and arrays.
"""

from __future__ import annotations

import platform
from typing import Any

from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

__all__ = ["DONE", "NEXT", "STATE_SIZE", "STATUS", "TABLE_COLUMNS", "leave", "pull", "wait_done"]

#: the shared state of one run, an int64 array: the next part to take, parts done, the first failing status
NEXT, DONE, STATUS = 0, 1, 2
STATE_SIZE = 3
#: the table's columns: primitive handle, address of its argument array, argument count, scratchpad memory (or 0)
TABLE_COLUMNS = 4

#: x86's spin-wait hint (elsewhere the loop spins on the atomic load alone)
_PAUSE = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")


def _fetch_add_typed(typingctx: Any, address: Any, value: Any) -> Any:
    """``old = *address; *address += value`` atomically (sequentially consistent) on an int64 at ``address``."""
    signature = types.int64(types.uintp, types.int64)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        pointer = builder.inttoptr(args[0], ir.IntType(64).as_pointer())
        return builder.atomic_rmw("add", pointer, args[1], "seq_cst")

    return signature, codegen


_fetch_add: Any = intrinsic(_fetch_add_typed)


def _load_typed(typingctx: Any, address: Any) -> Any:
    """The int64 at ``address``, loaded atomically (acquire): never hoisted out of a loop."""
    signature = types.int64(types.uintp)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        pointer = builder.inttoptr(args[0], ir.IntType(64).as_pointer())
        return builder.load_atomic(pointer, "acquire", 8)

    return signature, codegen


_load: Any = intrinsic(_load_typed)


def _set_once_typed(typingctx: Any, address: Any, value: Any) -> Any:
    """Store ``value`` in the int64 at ``address`` where it holds 0 (an atomic compare-and-exchange)."""
    signature = types.void(types.uintp, types.int64)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        pointer = builder.inttoptr(args[0], ir.IntType(64).as_pointer())
        builder.cmpxchg(pointer, ir.Constant(ir.IntType(64), 0), args[1], "seq_cst", "seq_cst")
        return context.get_dummy_value()

    return signature, codegen


_set_once: Any = intrinsic(_set_once_typed)


def _called(builder: Any, args: Any, kinds: list[Any]) -> Any:
    """The call of ``int f(...)`` at address ``args[0]`` with ``args[1:]``, each cut to its kind."""
    target = builder.inttoptr(args[0], ir.FunctionType(ir.IntType(32), kinds).as_pointer())
    values = [builder.trunc(v, kind) if kind.width < 64 else v for v, kind in zip(args[1:], kinds)]
    return builder.call(target, values)


def _call2_typed(typingctx: Any, function: Any, first: Any, second: Any) -> Any:
    """``int f(a, b)`` at address ``function``, both arguments 64-bit integers: its result."""
    signature = types.int32(types.uintp, types.uint64, types.uint64)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return _called(builder, args, [ir.IntType(64)] * 2)

    return signature, codegen


def _call4_typed(typingctx: Any, function: Any, first: Any, second: Any, third: Any, fourth: Any) -> Any:
    """``int f(a, b, int c, d)`` at address ``function`` (oneDNN's execute: primitive, stream, argument count, the
    arguments), the others 64-bit integers: its result."""
    signature = types.int32(types.uintp, types.uint64, types.uint64, types.uint64, types.uint64)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return _called(builder, args, [ir.IntType(64), ir.IntType(64), ir.IntType(32), ir.IntType(64)])

    return signature, codegen


_call2: Any = intrinsic(_call2_typed)
_call4: Any = intrinsic(_call4_typed)


def _pause_typed(typingctx: Any) -> Any:
    """The CPU's spin-wait hint (x86 ``pause``)."""
    signature = types.void()

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        if _PAUSE:
            module = builder.module
            name = "llvm.x86.sse2.pause"
            function = module.globals.get(name) or ir.Function(module, ir.FunctionType(ir.VoidType(), []), name=name)
            builder.call(function, [])
        return context.get_dummy_value()

    return signature, codegen


_pause: Any = intrinsic(_pause_typed)


@njit(cache=True, nogil=True)
def pull(execute: int, set_handle: int, state: Any, table: Any, scratch: int, stream: int) -> None:  # pragma: no cover
    """Take parts of ``table`` (``[count, TABLE_COLUMNS]`` uint64) one at a time and execute each on ``stream``,
    its scratchpad at ``scratch`` (this thread's buffer), until none is left; ``execute`` and ``set_handle`` are
    the addresses of oneDNN's ``dnnl_primitive_execute`` and ``dnnl_memory_set_data_handle``. The first failing status is kept in
    ``state[STATUS]``; parts taken after it are skipped (counted done, not executed)."""
    count = table.shape[0]
    base = state.ctypes.data
    while True:
        item = _fetch_add(base + 8 * NEXT, 1)
        if item >= count:
            return
        if _load(base + 8 * STATUS) == 0:
            if table[item, 3] != 0:
                _call2(set_handle, table[item, 3], scratch)
            status = _call4(execute, table[item, 0], stream, table[item, 2], table[item, 1])
            if status != 0:
                _set_once(base + 8 * STATUS, status)
        _fetch_add(base + 8 * DONE, 1)


@njit(cache=True, nogil=True)
def wait_done(clock: int, clock_id: int, state: Any, count: int, limit_ns: int, now: Any) -> bool:  # pragma: no cover
    """Spin until every part taken from ``state`` (of ``count``) is done, at most ``limit_ns`` nanoseconds by
    ``clock`` (the address of ``clock_gettime``, called as ``clock_gettime(clock_id, now)``, ``now`` an int64
    ``[2]`` array); True when they are."""
    base = state.ctypes.data
    _call2(clock, clock_id, now.ctypes.data)
    start = now[0] * 1_000_000_000 + now[1]
    spins = 0
    while True:
        taken = min(_load(base + 8 * NEXT), count)
        if _load(base + 8 * DONE) >= taken:
            return True
        _pause()
        spins += 1
        if spins % 64 == 0:
            _call2(clock, clock_id, now.ctypes.data)
            if now[0] * 1_000_000_000 + now[1] - start > limit_ns:
                return False


@njit(cache=True, nogil=True)
def leave(state: Any, count: int) -> None:  # pragma: no cover
    """Leave the parts not yet taken from ``state`` (of ``count``) untaken, counted done."""
    base = state.ctypes.data
    first = _fetch_add(base + 8 * NEXT, count)
    if first < count:
        _fetch_add(base + 8 * DONE, count - first)
