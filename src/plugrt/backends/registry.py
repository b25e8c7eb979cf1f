"""Backends found by device name ('cpu' or 'cuda'), one object per device, and the active one.

The active backend is the one of the engine (or build) currently calling plugin hooks:
engines make theirs active around every plugin call (:func:`using_backend`), so a
plugin's ``trt.as_array`` views its buffers in that backend's memory.
"""

from __future__ import annotations

import contextvars
import threading
from typing import Any

import numpy as np

from ..core.errors import TypeMismatchError
from .base import Backend

__all__ = [
    "DEFAULT_DEVICE",
    "DEVICES",
    "active_backend",
    "active_device",
    "backend_class",
    "backend_for",
    "check_device",
    "get_backend",
    "gpu_backend",
    "using_backend",
]

DEVICES = ("cpu", "cuda")
#: where engines run and builds time tactics unless told otherwise
DEFAULT_DEVICE = "cpu"
_GPU_DEVICE = "cuda"
_BACKENDS: dict[str, Backend] = {}
_LOCK = threading.Lock()
_ACTIVE: contextvars.ContextVar[Backend | None] = contextvars.ContextVar("plugrt_backend", default=None)


def check_device(device: Any, who: str) -> str:
    """``device`` when it names a backend, else a TypeMismatchError naming ``who`` and the choices."""
    if device not in DEVICES:
        choices = " or ".join(repr(d) for d in DEVICES)
        raise TypeMismatchError(f"{who}: device must be {choices}, got {device!r}")
    return str(device)


def backend_class(device: str) -> type[Backend]:
    """The class of ``device``'s backend: what it can do (``host_memory``, ``gpu``) without making one."""
    if device == "cpu":
        from .cpu import CpuBackend

        return CpuBackend
    if device == _GPU_DEVICE:
        from .cuda import CudaBackend

        return CudaBackend
    raise TypeMismatchError(f"unknown device {device!r}; choose one of {DEVICES}")


def get_backend(device: str) -> Backend:
    """The backend of ``device``; 'cuda' raises MissingBackendError without CuPy or a GPU."""
    backend = _BACKENDS.get(device)
    if backend is not None:
        return backend
    made = backend_class(device)
    with _LOCK:
        if device not in _BACKENDS:
            _BACKENDS[device] = made()
        return _BACKENDS[device]


def gpu_backend() -> Backend:
    """The backend that runs compiled CUDA kernels (MissingBackendError without CuPy or a GPU)."""
    return get_backend(_GPU_DEVICE)


def backend_for(xp: Any) -> Backend:
    """The backend whose array module is ``xp`` (kernels are given ``xp``; this finds the rest)."""
    if xp is np:
        return get_backend("cpu")
    for backend in list(_BACKENDS.values()):
        if backend.xp is xp:
            return backend
    raise TypeMismatchError(f"no backend has the array module {getattr(xp, '__name__', xp)!r}")


def active_backend() -> Backend:
    """The backend of the engine currently calling plugin hooks (the CPU's unless one is active)."""
    backend = _ACTIVE.get()
    return backend if backend is not None else get_backend(DEFAULT_DEVICE)


def active_device() -> str:
    """The device of the engine currently calling plugin hooks ('cpu' unless set)."""
    return active_backend().name


class using_backend:  # noqa: N801 - used as a function: ``with using_backend(backend):``
    """Make ``backend`` the active backend inside the block (engines do this around plugin calls).

    A class rather than a generator: every run enters it, and a generator's context
    manager costs a microsecond more.
    """

    __slots__ = ("_token", "backend")

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def __enter__(self) -> None:
        self._token = _ACTIVE.set(self.backend)

    def __exit__(self, *exc: object) -> None:
        _ACTIVE.reset(self._token)
