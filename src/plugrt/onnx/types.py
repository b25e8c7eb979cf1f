"""ONNX element types and plugrt's DataType.

plugrt, like TensorRT, has no DOUBLE, INT16, UINT16, UINT32 or UINT64 tensors.
The importer maps them onto the nearest type it has -- DOUBLE to FLOAT (values
are rounded to single precision, with a warning), INT16/UINT16 to INT32,
UINT32/UINT64 to INT64 -- and remembers the declared ONNX type of every graph
input and output, so ``plugrt.compile`` and the ONNX backend convert arrays at
the boundary and callers see the types the model declares. Other types
(STRING, BFLOAT16, the FLOAT8/INT4/FLOAT4 families, complex) are not supported.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from ..core.types import DataType

__all__ = ["WIDENED", "onnx_numpy_dtype", "onnx_type_name", "plugrt_numpy_dtype", "to_datatype", "to_supported_array"]

_EXACT: dict[int, DataType] = {
    TensorProto.FLOAT: DataType.FLOAT,
    TensorProto.FLOAT16: DataType.HALF,
    TensorProto.INT8: DataType.INT8,
    TensorProto.UINT8: DataType.UINT8,
    TensorProto.INT32: DataType.INT32,
    TensorProto.INT64: DataType.INT64,
    TensorProto.BOOL: DataType.BOOL,
}
#: ONNX types imported as another plugrt type.
WIDENED: dict[int, DataType] = {
    TensorProto.DOUBLE: DataType.FLOAT,
    TensorProto.INT16: DataType.INT32,
    TensorProto.UINT16: DataType.INT32,
    TensorProto.UINT32: DataType.INT64,
    TensorProto.UINT64: DataType.INT64,
}
_SUPPORTED_NUMPY = frozenset(
    np.dtype(t) for t in (np.float32, np.float16, np.int8, np.uint8, np.int32, np.int64, np.bool_)
)
_NUMPY_TARGET: dict[np.dtype, np.dtype] = {
    np.dtype(np.float64): np.dtype(np.float32),
    np.dtype(np.int16): np.dtype(np.int32),
    np.dtype(np.uint16): np.dtype(np.int32),
    np.dtype(np.uint32): np.dtype(np.int64),
    np.dtype(np.uint64): np.dtype(np.int64),
}


def onnx_type_name(elem_type: int) -> str:
    """'FLOAT', 'DOUBLE', ... for messages."""
    try:
        return str(TensorProto.DataType.Name(elem_type))
    except ValueError:
        return f"<unknown ONNX type {elem_type}>"


def to_datatype(elem_type: int) -> DataType | None:
    """The DataType an ONNX element type is imported as, or None when it is not supported."""
    found = _EXACT.get(elem_type)
    return found if found is not None else WIDENED.get(elem_type)


def onnx_numpy_dtype(elem_type: int) -> np.dtype | None:
    """The NumPy dtype of an ONNX element type (None for types NumPy lacks)."""
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError):
        return None


def plugrt_numpy_dtype(array_dtype: np.dtype) -> np.dtype | None:
    """The dtype plugrt holds values of ``array_dtype`` in (itself when supported), or None."""
    dtype = np.dtype(array_dtype)
    target = _NUMPY_TARGET.get(dtype)
    if target is not None:
        return target
    return dtype if dtype in _SUPPORTED_NUMPY else None


def to_supported_array(value: np.ndarray) -> np.ndarray | None:
    """``value`` converted to a dtype plugrt supports (see the module note), or None."""
    target = plugrt_numpy_dtype(value.dtype)
    if target is None:
        return None
    if target == value.dtype:
        return value
    with np.errstate(over="ignore", invalid="ignore"):
        return value.astype(target)
