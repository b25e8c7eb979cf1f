"""Allocation limits: no tensor and no activation arena larger than a cap.

A 300-byte ONNX model can ask for a ``1e6 x 1e6`` ``Expand``; a hand-edited plan
can ask for a terabyte arena. Both are refused before any memory is taken: the
builder checks every tensor at each profile's largest shapes and every
profile's arena, the runtime checks a loaded plan again, and each failure is
an :class:`~plugrt.AllocationLimitError` naming the tensor and its size.

The cap is :func:`get_allocation_limit` bytes: by default
:data:`DEFAULT_ALLOCATION_LIMIT` (2 GiB), or the environment variable
``PLUGRT_ALLOCATION_LIMIT`` (bytes, read when plugrt is imported), or what
:func:`set_allocation_limit` set. A build also honours the builder config's
``MemoryPoolType.WORKSPACE`` limit for plugin workspaces (checked by the builder).

>>> import plugrt
>>> previous = plugrt.get_allocation_limit()
>>> plugrt.set_allocation_limit(8 << 30)   # allow tensors and arenas up to 8 GiB
>>> plugrt.set_allocation_limit(previous)
"""

from __future__ import annotations

import os
import threading

from ..core.errors import AllocationLimitError, TypeMismatchError
from .plan import EnginePlan, profile_envs, tensor_max_bytes

__all__ = ["DEFAULT_ALLOCATION_LIMIT", "check_allocation", "check_plan_allocations", "get_allocation_limit",
           "set_allocation_limit"]

#: The default cap on one tensor and on one context's activation arena, in bytes.
DEFAULT_ALLOCATION_LIMIT = 2 << 30
_ENV = "PLUGRT_ALLOCATION_LIMIT"
_lock = threading.Lock()


def _from_environment() -> int:
    text = os.environ.get(_ENV, "").strip()
    if not text:
        return DEFAULT_ALLOCATION_LIMIT
    try:
        value = int(text)
    except ValueError:
        raise TypeMismatchError(f"{_ENV} must be a number of bytes, got {text!r}") from None
    if value <= 0:
        raise TypeMismatchError(f"{_ENV} must be a positive number of bytes, got {text!r}")
    return value


_limit = _from_environment()


def get_allocation_limit() -> int:
    """The largest tensor or activation arena (bytes) plugrt builds, loads or allocates."""
    return _limit


def set_allocation_limit(nbytes: int) -> None:
    """Set the cap on one tensor and one context's activation arena (bytes, > 0) for this process."""
    global _limit
    if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes <= 0:
        raise TypeMismatchError(f"set_allocation_limit takes a positive int of bytes, got {nbytes!r}")
    with _lock:
        _limit = nbytes


def _size(nbytes: int) -> str:
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift:
            return f"{nbytes / (1 << shift):.1f} {unit}"
    return f"{nbytes} bytes"


def check_allocation(what: str, nbytes: int, limit: int | None = None) -> None:
    """Raise :class:`AllocationLimitError` when ``what`` needs more than ``limit`` (default: the cap) bytes."""
    cap = get_allocation_limit() if limit is None else limit
    if nbytes > cap:
        raise AllocationLimitError(
            f"{what} needs {nbytes} bytes ({_size(nbytes)}), more than the allocation limit of {cap} bytes "
            f"({_size(cap)}); raise it with plugrt.set_allocation_limit or {_ENV} if this is intended"
        )


def check_plan_allocations(plan: EnginePlan, stage: str) -> None:
    """Check every tensor at each profile's largest shapes, and every profile's arena, against the cap.

    ``stage`` says who asks ('build' or 'plan') for the message.
    """
    for p, profile in enumerate(plan.profiles):
        low, _, high = profile_envs(plan, p)
        for tensor in plan.tensors:
            nbytes = tensor_max_bytes(tensor, low, high)
            check_allocation(f"{stage}: tensor {tensor.name!r} at profile {p}'s largest shapes", nbytes)
        check_allocation(f"{stage}: the activation arena of profile {p}", profile.arena_size)
