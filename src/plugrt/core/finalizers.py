"""Releases from ``__del__`` that never run plugin code inside the garbage collector.

CPython 3.10 and 3.11 can crash (a use-after-free in the context variables' HAMT, CPython
issue 148891) when a finalizer sets a context variable while the cyclic garbage collector runs
inside another ``ContextVar.set``. NumPy's ``errstate`` and plugrt's active device are context
variables, and releasing an engine or a context calls plugin code (``terminate``, ``destroy``,
``detach``) that may use them. So ``__del__`` of engines and contexts hands its release to
:func:`release_when_safe`: outside a collection it runs at once, as TensorRT frees objects when
their last reference goes; during a collection it waits in a queue that :func:`run_pending`
empties at the next safe point (the next build, engine load, context creation or run) and at
interpreter exit.
"""

from __future__ import annotations

import atexit
import gc
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["collecting", "pending_count", "release_when_safe", "run_pending"]

_lock = threading.Lock()
_pending: list[Callable[[], None]] = []
_collecting = False


def _track_collections(phase: str, info: dict[str, Any]) -> None:
    global _collecting
    _collecting = phase == "start"


gc.callbacks.append(_track_collections)


def collecting() -> bool:
    """True while the cyclic garbage collector runs (in any thread)."""
    return _collecting


def release_when_safe(release: Callable[[], None]) -> None:
    """Run ``release`` now, or, during a garbage collection, at the next :func:`run_pending`.

    Errors from ``release`` are swallowed, as they would be in ``__del__``.
    """
    if _collecting:
        with _lock:
            _pending.append(release)
        return
    _call_quietly(release)


def run_pending() -> None:
    """Run the releases queued during garbage collections (a no-op while one runs)."""
    if _collecting or not _pending:
        return
    with _lock:
        queued = list(_pending)
        _pending.clear()
    for release in queued:
        _call_quietly(release)


def pending_count() -> int:
    """How many releases wait for a safe point."""
    return len(_pending)


def _call_quietly(release: Callable[[], None]) -> None:
    try:
        release()
    except Exception:
        pass


atexit.register(run_pending)
