"""Element types and memory layouts of tensors, with TensorRT's names and values."""

from __future__ import annotations

import numpy as np

from ..core.enums import TrtEnum
from .errors import TypeMismatchError

__all__ = ["DataType", "PluginFormat", "TensorFormat", "from_nptype", "nptype"]


class DataType(TrtEnum):
    """Element type of a tensor (TensorRT's ``DataType``, same integer values)."""

    FLOAT = 0
    HALF = 1
    INT8 = 2
    INT32 = 3
    BOOL = 4
    UINT8 = 5
    FP8 = 6
    BF16 = 7
    INT64 = 8
    INT4 = 9
    FP4 = 10

    @property
    def itemsize(self) -> float:
        """Bytes per element (0.5 for the 4-bit types)."""
        return _ITEMSIZE[self]

    def nptype(self) -> type[np.generic]:
        """The NumPy scalar type of this data type; see :func:`nptype`."""
        return nptype(self)


_ITEMSIZE: dict[DataType, float] = {
    DataType.FLOAT: 4,
    DataType.HALF: 2,
    DataType.INT8: 1,
    DataType.INT32: 4,
    DataType.BOOL: 1,
    DataType.UINT8: 1,
    DataType.FP8: 1,
    DataType.BF16: 2,
    DataType.INT64: 8,
    DataType.INT4: 0.5,
    DataType.FP4: 0.5,
}

_TO_NUMPY: dict[DataType, type[np.generic]] = {
    DataType.FLOAT: np.float32,
    DataType.HALF: np.float16,
    DataType.INT8: np.int8,
    DataType.INT32: np.int32,
    DataType.BOOL: np.bool_,
    DataType.UINT8: np.uint8,
    DataType.INT64: np.int64,
}


def nptype(dtype: DataType) -> type[np.generic]:
    """Return the NumPy type of ``dtype``, as ``tensorrt.nptype`` does.

    >>> nptype(DataType.HALF)
    <class 'numpy.float16'>

    FP8, BF16, INT4 and FP4 have no NumPy equivalent and raise
    :class:`~plugrt.TypeMismatchError`.
    """
    dtype = DataType(dtype)
    try:
        return _TO_NUMPY[dtype]
    except KeyError:
        supported = ", ".join(t.name for t in _TO_NUMPY)
        raise TypeMismatchError(f"DataType.{dtype.name} has no NumPy equivalent; types with one: {supported}") from None


def from_nptype(dtype: np.dtype | type) -> DataType:
    """Return the :class:`DataType` of a NumPy dtype (inverse of :func:`nptype`)."""
    np_dtype = np.dtype(dtype)
    for trt_type, np_type in _TO_NUMPY.items():
        if np.dtype(np_type) == np_dtype:
            return trt_type
    supported = ", ".join(str(np.dtype(t)) for t in _TO_NUMPY.values())
    raise TypeMismatchError(f"NumPy dtype {np_dtype} has no DataType; supported: {supported}")


class TensorFormat(TrtEnum):
    """Memory layout of a tensor (TensorRT's ``TensorFormat``, same integer values).

    ``LINEAR`` is row-major. ``CHW<k>`` vectorises channels in groups of ``k``
    (channels padded up to a multiple of ``k``): an NCHW tensor is stored as
    ``[N, ceil(C/k), H, W, k]``. ``HWC<k>`` stores ``[N, H, W, ceil(C/k)*k]``; ``HWC``
    is ``HWC`` without padding. ``DHWC8``/``CDHW32``/``DHWC`` are the 3-D versions.
    """

    LINEAR = 0
    CHW2 = 1
    HWC8 = 2
    CHW4 = 3
    CHW16 = 4
    CHW32 = 5
    DHWC8 = 6
    CDHW32 = 7
    HWC = 8
    DLA_LINEAR = 9
    DLA_HWC4 = 10
    HWC16 = 11
    DHWC = 12


PluginFormat = TensorFormat
