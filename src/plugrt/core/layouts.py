"""Physical layouts of tensor formats: buffer sizes and conversions to/from LINEAR.

Descriptors always carry the logical shape (``[..., C, H, W]``); the format says
how those elements sit in memory. ``CHW<k>`` stores ``[..., ceil(C/k), H, W, k]``,
``HWC<k>`` stores ``[..., H, W, ceil(C/k)*k]`` and ``HWC`` stores ``[..., H, W, C]``;
padding channels are zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .errors import ShapeError
from .types import TensorFormat

__all__ = ["SUPPORTED_FORMATS", "format_min_rank", "from_storage", "storage_shape", "to_storage"]

_CHW_VECTOR = {TensorFormat.CHW2: 2, TensorFormat.CHW4: 4, TensorFormat.CHW16: 16, TensorFormat.CHW32: 32}
_HWC_VECTOR = {TensorFormat.HWC8: 8, TensorFormat.HWC16: 16, TensorFormat.HWC: 1}

#: Formats plugrt can lay out and convert, in the order the builder tries them.
SUPPORTED_FORMATS: tuple[TensorFormat, ...] = (
    TensorFormat.LINEAR,
    TensorFormat.CHW32,
    TensorFormat.CHW4,
    TensorFormat.CHW16,
    TensorFormat.CHW2,
    TensorFormat.HWC8,
    TensorFormat.HWC16,
    TensorFormat.HWC,
)


def format_min_rank(fmt: TensorFormat) -> int:
    """Smallest rank a tensor needs to use ``fmt`` (vectorised formats need C, H, W)."""
    return 0 if fmt == TensorFormat.LINEAR else 3


def storage_shape(shape: Sequence[int], fmt: TensorFormat) -> tuple[int, ...]:
    """The array shape that holds a tensor of logical ``shape`` in format ``fmt``."""
    shape = tuple(int(d) for d in shape)
    if fmt == TensorFormat.LINEAR:
        return shape
    if fmt not in _CHW_VECTOR and fmt not in _HWC_VECTOR:
        raise ShapeError(f"TensorFormat.{TensorFormat(fmt).name} is not supported by plugrt's layouts")
    if len(shape) < 3:
        raise ShapeError(f"TensorFormat.{fmt.name} needs a tensor of rank >= 3, got shape {shape}")
    *lead, c, h, w = shape
    if fmt in _CHW_VECTOR:
        k = _CHW_VECTOR[fmt]
        return (*lead, -(-c // k), h, w, k)
    k = _HWC_VECTOR[fmt]
    return (*lead, h, w, -(-c // k) * k)


def _check_convertible(shape: Sequence[int], fmt: TensorFormat) -> None:
    storage_shape(shape, fmt)  # raises ShapeError for unsupported formats and ranks below 3


def to_storage(linear: Any, fmt: TensorFormat, out: Any) -> None:
    """Write the LINEAR array ``linear`` into ``out`` laid out as ``fmt``."""
    if fmt == TensorFormat.LINEAR:
        out[...] = linear
        return
    _check_convertible(linear.shape, fmt)
    *lead, c, h, w = linear.shape
    if fmt in _CHW_VECTOR:
        k = _CHW_VECTOR[fmt]
        groups = -(-c // k)
        out[...] = 0
        view = out.reshape(*lead, groups, h, w, k)
        for g in range(groups):
            chunk = linear[..., g * k : min(c, (g + 1) * k), :, :]
            view[..., g, :, :, : chunk.shape[-3]] = np.moveaxis(chunk, -3, -1)
        return
    out[...] = 0
    out[..., :c] = np.moveaxis(linear, -3, -1)


def from_storage(stored: Any, fmt: TensorFormat, out: Any) -> None:
    """Write the ``fmt``-laid-out array ``stored`` into the LINEAR array ``out``."""
    if fmt == TensorFormat.LINEAR:
        out[...] = stored
        return
    _check_convertible(out.shape, fmt)
    *lead, c, h, w = out.shape
    if fmt in _CHW_VECTOR:
        k = _CHW_VECTOR[fmt]
        moved = np.moveaxis(stored, -1, -3)  # [..., groups, k, h, w]
        merged = moved.reshape(*lead, stored.shape[-4] * k, h, w)
        out[...] = merged[..., :c, :, :]
        return
    out[...] = np.moveaxis(stored[..., :c], -1, -3)
