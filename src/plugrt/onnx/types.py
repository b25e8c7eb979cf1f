"""ONNX element types and plugrt's DataType.

plugrt, like TensorRT, has no DOUBLE, INT16, UINT16, UINT32 or UINT64 tensors.
The importer maps them onto the nearest type it has -- DOUBLE to FLOAT (values
are rounded to single precision, with a warning), INT16/UINT16 to INT32,
UINT32/UINT64 to INT64, the narrow storage types (BFLOAT16, the FLOAT8 and FLOAT4
families, INT4/UINT4, INT2/UINT2) to FLOAT, INT8 or UINT8, exactly -- and remembers the declared ONNX type of every graph
input and output, so ``plugrt.compile`` and the ONNX backend convert arrays at
the boundary and callers see the types the model declares. Other types
(STRING, FLOAT8E8M0, complex) are not supported.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from ..core.types import DataType
from ..ops.storage_cast import NARROW_TYPES, narrow_numpy_type

__all__ = ["NARROW", "WIDENED", "onnx_numpy_dtype", "onnx_type_name", "plugrt_numpy_dtype", "to_datatype", "to_supported_array"]

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
#: narrow ONNX storage types -> their ml_dtypes name; plugrt holds their values in a wider type
#: (FLOAT, INT8 or UINT8, see :mod:`plugrt.ops.storage_cast`), and casts to them round the values
NARROW: dict[int, str] = {
    getattr(TensorProto, onnx_name): numpy_name
    for onnx_name, numpy_name in (
        ("BFLOAT16", "bfloat16"),
        ("FLOAT8E4M3FN", "float8_e4m3fn"),
        ("FLOAT8E4M3FNUZ", "float8_e4m3fnuz"),
        ("FLOAT8E5M2", "float8_e5m2"),
        ("FLOAT8E5M2FNUZ", "float8_e5m2fnuz"),
        ("FLOAT4E2M1", "float4_e2m1fn"),
        ("INT4", "int4"),
        ("UINT4", "uint4"),
        ("INT2", "int2"),
        ("UINT2", "uint2"),
    )
    if hasattr(TensorProto, onnx_name)
}
WIDENED.update({elem: NARROW_TYPES[name] for elem, name in NARROW.items()})
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
_NUMPY_TARGET.update(
    {narrow_numpy_type(name): np.dtype(NARROW_TYPES[name].nptype()) for name in NARROW.values()}
)


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
