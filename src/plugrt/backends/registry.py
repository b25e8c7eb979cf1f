"""Backend lookup by device name ('cpu' or 'cuda'); one backend object per device."""

from __future__ import annotations

import threading
from typing import Any

from ..core.errors import TypeMismatchError

__all__ = ["DEVICES", "get_backend"]

DEVICES = ("cpu", "cuda")
_BACKENDS: dict[str, Any] = {}
_LOCK = threading.Lock()


def get_backend(device: str) -> Any:
    """The backend of ``device``; 'cuda' raises MissingBackendError without CuPy or a GPU."""
    if device not in DEVICES:
        raise TypeMismatchError(f"unknown device {device!r}; choose one of {DEVICES}")
    with _LOCK:
        if device not in _BACKENDS:
            if device == "cpu":
                from .cpu import CpuBackend

                _BACKENDS[device] = CpuBackend()
            else:
                from .cuda import CudaBackend

                _BACKENDS[device] = CudaBackend()
        return _BACKENDS[device]
