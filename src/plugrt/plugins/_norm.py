"""What the normalization plugins share: standardizing rows, and weights kept in backend memory.

:func:`standardize` computes ``(x - mean) / sqrt(var + eps)`` per row in float32 (also for
FP16 inputs), in a scratch array the plugin takes from its workspace, with NumPy or CuPy
arrays (the plugins' buffers on the engine's device).

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

__all__ = ["DeviceWeights", "leaky_relu", "standardize"]


def standardize(x: Any, epsilon: float, out: Any, xp: Any = np) -> Any:
    """Rows of ``x`` (``[rows, n]``) standardized into ``out`` (float32, same shape); returns ``out``.

    ``xp`` is the arrays' module: NumPy on the host, CuPy for device arrays (the same
    arithmetic either way; on the device nothing is read back and no cuBLAS call is made,
    so it can be captured in a CUDA graph).

    >>> out = np.empty((1, 4), np.float32)
    >>> standardize(np.array([[1, 2, 3, 4]], np.float32), 0.0, out).astype(float).round(3).tolist()
    [[-1.342, -0.447, 0.447, 1.342]]
    """
    xp.copyto(out, x, casting="same_kind")
    if out.shape[1] == 0:
        return out
    out -= out.mean(axis=1, keepdims=True, dtype=np.float64).astype(np.float32)
    if xp is np:
        variance = np.einsum("ij,ij->i", out, out, dtype=np.float64) / out.shape[1]
    else:  # the same float64 squares; CuPy's einsum would be a cuBLAS product, which graph capture refuses
        variance = xp.square(out, dtype=np.float64).sum(axis=1) / out.shape[1]
    out *= (1.0 / xp.sqrt(variance + epsilon)).astype(np.float32)[:, None]
    return out


def leaky_relu(xp: Any, values: Any, alpha: float) -> None:
    """Multiply the negative entries of float32 ``values`` by ``alpha``, in place.

    A multiplication by 1 leaves the others exactly as they were (NaN and -0.0 included),
    so this equals a masked multiply, and runs on NumPy and CuPy alike (CuPy's ufuncs
    take no ``where=``).
    """
    values *= xp.where(values < 0, np.float32(alpha), np.float32(1))


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
