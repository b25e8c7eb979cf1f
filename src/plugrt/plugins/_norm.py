"""What the normalization plugins share: standardizing rows, and weights kept in backend memory.

:func:`standardize` computes ``(x - mean) / sqrt(var + eps)`` per row in float32 (also for
FP16 inputs), in a scratch array the plugin takes from its workspace.

:class:`DeviceWeights` is the seeds' pattern for weights given as fields: host copies
are serialized; ``initialize()`` copies them to backend memory (``trt.device_malloc``),
``terminate()`` frees them. A plugin cloned after ``initialize()`` uploads copies of its
own (as TensorRT's InstanceNormalization does in ``clone()``), so every owner frees
exactly what it allocated and nothing is freed twice.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backends.memory import DeviceBuffer, device_malloc
from ..core.errors import ExecutionError
from ._base import copy_to

__all__ = ["DeviceWeights", "standardize"]


def standardize(x: np.ndarray, epsilon: float, out: np.ndarray) -> np.ndarray:
    """Rows of ``x`` (``[rows, n]``) standardized into ``out`` (float32, same shape); returns ``out``.

    >>> out = np.empty((1, 4), np.float32)
    >>> standardize(np.array([[1, 2, 3, 4]], np.float32), 0.0, out).astype(float).round(3).tolist()
    [[-1.342, -0.447, 0.447, 1.342]]
    """
    np.copyto(out, x, casting="same_kind")
    if out.shape[1] == 0:
        return out
    out -= out.mean(axis=1, keepdims=True, dtype=np.float64).astype(np.float32)
    variance = np.einsum("ij,ij->i", out, out, dtype=np.float64) / out.shape[1]
    out *= (1.0 / np.sqrt(variance + epsilon)).astype(np.float32)[:, None]
    return out


class DeviceWeights:
    """Named float32 weight vectors: host copies always, backend copies between upload and release."""

    def __init__(self, **host: np.ndarray) -> None:
        self.host = {name: np.ascontiguousarray(values, dtype=np.float32).reshape(-1) for name, values in host.items()}
        self._device: dict[str, DeviceBuffer] = {}

    @property
    def uploaded(self) -> bool:
        """True between :meth:`upload` and :meth:`release`."""
        return bool(self._device)

    def upload(self) -> None:
        """Copy every vector to backend memory (idempotent)."""
        if self._device:
            return
        for name, values in self.host.items():
            buffer = device_malloc(values.nbytes)
            copy_to(buffer.as_array(values.shape, np.float32), values)
            self._device[name] = buffer

    def release(self) -> None:
        """Free the backend copies (idempotent)."""
        for buffer in self._device.values():
            buffer.free()
        self._device.clear()

    def device(self, name: str) -> Any:
        """The backend copy of ``name`` (what a kernel reads)."""
        buffer = self._device.get(name)
        if buffer is None:
            raise ExecutionError(f"weights {name!r} are not in backend memory: initialize() was not called")
        return buffer.as_array(self.host[name].shape, np.float32)
