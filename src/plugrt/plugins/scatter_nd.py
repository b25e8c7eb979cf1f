"""``ScatterND`` version 1 (IPluginV2DynamicExt): ONNX ScatterND without reduction.

Inputs: ``data`` (FLOAT, HALF or INT32), ``indices`` INT32 ``[..., k]`` with
``k <= rank(data)``, ``updates`` of shape ``indices.shape[:-1] + data.shape[k:]`` and
the type of ``data``. The output is a copy of ``data`` where each index tuple's slice
is replaced by its update. No fields. Negative indices count from the end; indices out
of range raise on the CPU. When an index repeats, ONNX and TensorRT leave unspecified
which update lands; here the last one in index order does, on both devices.

On a CUDA engine the kernel runs on the device with CuPy and reads nothing back (so it
can be captured in a CUDA graph). Two things differ there: an index tuple out of range
cannot raise without reading the indices back, so its update is dropped (its slot keeps
``data``); and since parallel writes to one slot land in no fixed order, each slot's
last update is picked first (``maximum.at`` of tuple numbers) and every tuple aiming at
the slot writes that same update.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.errors import ExecutionError, ShapeError
from ..core.types import DataType, TensorFormat
from ..interfaces.descriptors import DynamicPluginTensorDesc, PluginTensorDesc
from ..shape.builder import DimsExprs, IExprBuilder
from ._base import FLOAT_TYPES, LibraryCreator
from ._scaffold import DynamicLibraryPlugin
from ._schema import Schema

__all__ = ["ScatterNDPlugin", "ScatterNDPluginCreator", "scatter_nd"]

_MAGIC, _FORMAT = 0x53434E44, 1  # "SCND"


def scatter_nd(data: Any, indices: Any, updates: Any, out: Any, xp: Any = np) -> None:
    """``out = data`` with ``out[indices[i]] = updates[i]`` for every index tuple ``i``.

    ``xp`` is the arrays' module: NumPy, or CuPy for device arrays.
    """
    xp.copyto(out, data)
    depth = indices.shape[-1]
    tuples = indices.reshape(-1, depth).astype(np.int64)
    if xp is not np:
        _scatter_device(xp, data, tuples, updates, out)
        return
    extent = np.asarray(data.shape[:depth], np.int64)
    bad = (tuples < -extent) | (tuples >= extent)
    if bad.any():
        row = int(np.flatnonzero(bad.any(axis=1))[0])
        raise ExecutionError(f"ScatterND: index {tuples[row].tolist()} is outside data dims {list(data.shape)}")
    tuples %= np.maximum(extent, 1)
    out[tuple(tuples.T)] = updates.reshape(tuples.shape[0], *data.shape[depth:])  # in order: the last one lands


def _scatter_device(xp: Any, data: Any, tuples: Any, updates: Any, out: Any) -> None:
    """The scatter on CuPy arrays: the same result as the host's, out-of-range tuples dropped."""
    count, depth = tuples.shape
    slots, inner = int(np.prod(data.shape[:depth])), int(np.prod(data.shape[depth:]))
    if count == 0 or slots == 0 or inner == 0:
        return
    target = xp.zeros(count, np.int64)  # row-major slot number of each tuple
    valid = xp.ones(count, np.bool_)
    for axis, extent in enumerate(data.shape[:depth]):
        column = tuples[:, axis]
        valid &= (column >= -extent) & (column < extent)
        target = target * extent + column % extent
    target = xp.where(valid, target, 0)
    last = xp.full(slots, -1, np.int32)  # per slot: the last valid tuple aiming at it, or -1
    xp.maximum.at(last, target, xp.where(valid, xp.arange(count, dtype=np.int32), -1).astype(np.int32, copy=False))
    lands = last[target]
    kept = data.reshape(slots, inner)[target]
    written = updates.reshape(count, inner)[xp.maximum(lands, 0)]
    out.reshape(slots, inner)[target] = xp.where((lands >= 0)[:, None], written, kept)


class ScatterNDPlugin(DynamicLibraryPlugin):
    """Scatter slices of ``updates`` into a copy of ``data`` at ``indices``."""

    NAME, VERSION = "ScatterND", "1"
    MAGIC, FORMAT = _MAGIC, _FORMAT
    SCHEMA = Schema(NAME, ())

    def get_output_dimensions(
        self, output_index: int, inputs: list[DimsExprs], exprBuilder: IExprBuilder
    ) -> DimsExprs:
        if len(inputs) != 3:
            raise ShapeError(f"{self.NAME}: expects 3 inputs (data, indices, updates), got {len(inputs)}")
        data, indices = len(inputs[0]), len(inputs[1])
        if indices < 1 or data < 1:
            raise ShapeError(f"{self.NAME}: data and indices need rank >= 1, got ranks {data} and {indices}")
        return DimsExprs(inputs[0])

    def supports_format_combination(self, pos: int, in_out: list[PluginTensorDesc], num_inputs: int) -> bool:
        desc = in_out[pos]
        if desc.format != TensorFormat.LINEAR:
            return False
        if pos == 1:  # indices
            return desc.type == DataType.INT32
        if pos == 0:
            return desc.type in (*FLOAT_TYPES, DataType.INT32)
        return desc.type == in_out[0].type

    def configure_plugin(self, inp: list[DynamicPluginTensorDesc], out: list[DynamicPluginTensorDesc]) -> None:
        data, indices, updates = (list(d.desc.dims) for d in inp)
        depth = indices[-1]
        if depth < 0 or any(d < 0 for d in data + indices + updates):
            return  # checked again when shapes are known
        expected = indices[:-1] + data[depth:]
        if depth > len(data) or updates != expected:
            raise ShapeError(
                f"{self.NAME}: with data {data} and indices {indices}, updates must have shape {expected} "
                f"(indices.shape[:-1] + data.shape[k:], k = {depth} <= rank {len(data)}), got {updates}"
            )

    def compute(self, xp: Any, inputs: list[Any], outputs: list[Any], scratch: dict[str, Any]) -> None:
        data, indices, updates = inputs
        scatter_nd(data, indices, updates, outputs[0], xp)


class ScatterNDPluginCreator(LibraryCreator):
    """Creator of ``ScatterND`` version 1 (no fields)."""

    plugin_class = ScatterNDPlugin
