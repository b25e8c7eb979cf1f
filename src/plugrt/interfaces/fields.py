"""Plugin attributes: ``PluginField``, ``PluginFieldType`` and ``PluginFieldCollection``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..core.checked_list import CheckedList
from ..core.enums import TrtEnum
from ..core.errors import FieldError, TypeMismatchError

__all__ = ["PluginField", "PluginFieldCollection", "PluginFieldType", "field_numpy_dtype"]


class PluginFieldType(TrtEnum):
    """Element type of a plugin field (TensorRT's 14 values)."""

    FLOAT16 = 0
    FLOAT32 = 1
    FLOAT64 = 2
    INT8 = 3
    INT16 = 4
    INT32 = 5
    CHAR = 6
    DIMS = 7
    UNKNOWN = 8
    BF16 = 9
    INT64 = 10
    FP8 = 11
    INT4 = 12
    FP4 = 13


# Storage dtype of each field type. Types NumPy lacks are stored as raw bytes
# (BF16 as uint16 bit patterns, FP8/INT4/FP4 as uint8), DIMS as int64 values.
_STORAGE: dict[PluginFieldType, np.dtype] = {
    PluginFieldType.FLOAT16: np.dtype(np.float16),
    PluginFieldType.FLOAT32: np.dtype(np.float32),
    PluginFieldType.FLOAT64: np.dtype(np.float64),
    PluginFieldType.INT8: np.dtype(np.int8),
    PluginFieldType.INT16: np.dtype(np.int16),
    PluginFieldType.INT32: np.dtype(np.int32),
    PluginFieldType.CHAR: np.dtype(np.int8),
    PluginFieldType.DIMS: np.dtype(np.int64),
    PluginFieldType.UNKNOWN: np.dtype(np.uint8),
    PluginFieldType.BF16: np.dtype(np.uint16),
    PluginFieldType.INT64: np.dtype(np.int64),
    PluginFieldType.FP8: np.dtype(np.uint8),
    PluginFieldType.INT4: np.dtype(np.uint8),
    PluginFieldType.FP4: np.dtype(np.uint8),
}


def field_numpy_dtype(field_type: PluginFieldType) -> np.dtype:
    """The NumPy dtype a field of ``field_type`` stores its data as."""
    return _STORAGE[PluginFieldType(field_type)]


def _to_array(name: str, data: Any, field_type: PluginFieldType) -> np.ndarray:
    expected = _STORAGE[field_type]
    if data is None:
        return np.zeros(0, dtype=expected)
    if isinstance(data, str):
        if field_type not in (PluginFieldType.CHAR, PluginFieldType.UNKNOWN):
            raise TypeMismatchError(
                f"plugin field {name!r}: a string needs PluginFieldType.CHAR, not {field_type.name}"
            )
        data = data.encode("utf-8")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return (
            np.frombuffer(bytes(data), dtype=np.uint8).view(expected)
            if expected.itemsize == 1
            else (_reject(name, "bytes", field_type))
        )
    array = np.asarray(data)
    if array.dtype == expected:
        return array.reshape(-1) if array.ndim != 1 else array
    if array.size == 0:
        return np.zeros(0, dtype=expected)
    kind, want = array.dtype.kind, expected.kind
    compatible = (kind == want) or (kind in "iub" and want in "iu") or (kind in "iub" and want == "f")
    if field_type in (PluginFieldType.BF16, PluginFieldType.FP8, PluginFieldType.INT4, PluginFieldType.FP4):
        compatible = kind == "u" and array.dtype.itemsize == expected.itemsize
    if not compatible:
        _reject(name, str(array.dtype), field_type)
    with np.errstate(over="ignore", invalid="ignore"):
        converted = array.astype(expected).reshape(-1)
    if want == "f" and not np.array_equal(np.isfinite(converted), np.isfinite(array.reshape(-1).astype(np.float64))):
        raise FieldError(
            f"plugin field {name!r}: values {array.reshape(-1)[:8].tolist()} overflow "
            f"PluginFieldType.{field_type.name} ({expected})"
        )
    if want in "iu" and not np.array_equal(converted.astype(array.dtype), array.reshape(-1)):
        raise FieldError(
            f"plugin field {name!r}: values {array.reshape(-1)[:8].tolist()} do not fit "
            f"PluginFieldType.{field_type.name} ({expected})"
        )
    return converted


def _reject(name: str, actual: str, field_type: PluginFieldType) -> np.ndarray:
    raise TypeMismatchError(
        f"plugin field {name!r}: data of type {actual} does not match "
        f"PluginFieldType.{field_type.name} (expects {_STORAGE[field_type]} data)"
    )


class PluginField:
    """One named plugin attribute: a 1-d NumPy array plus its field type.

    The array is kept alive by the field. Python scalars, lists and strings are
    converted; an array whose kind cannot represent the type (floats for an
    INT32 field, say) raises :class:`~plugrt.TypeMismatchError`.

    >>> f = PluginField("pads", np.array([1, 1], dtype=np.int32), PluginFieldType.INT32)
    >>> f.size
    2
    """

    def __init__(
        self,
        name: str = "",
        data: Any = None,
        type: PluginFieldType = PluginFieldType.UNKNOWN,  # noqa: A002 - TensorRT's name
    ) -> None:
        if not isinstance(name, str):
            raise TypeMismatchError(f"PluginField name must be a str, got {type_name(name)}")
        try:
            field_type = PluginFieldType(type)
        except ValueError:
            raise TypeMismatchError(f"plugin field {name!r}: {type!r} is not a PluginFieldType") from None
        if (
            field_type == PluginFieldType.UNKNOWN
            and data is not None
            and not isinstance(data, (bytes, bytearray, memoryview, str))
        ):
            array = np.asarray(data)
            field_type = _infer_type(array)
        self.name = name
        self.type = field_type
        self._data = _to_array(name, data, field_type)

    @property
    def data(self) -> np.ndarray:
        """The field's values as a 1-d NumPy array."""
        return self._data

    @data.setter
    def data(self, value: Any) -> None:
        self._data = _to_array(self.name, value, self.type)

    @property
    def size(self) -> int:
        """Number of elements (characters for CHAR fields)."""
        return int(self._data.size)

    @property
    def length(self) -> int:
        """Alias of :attr:`size` (TensorRT's C++ ``length``)."""
        return self.size

    def as_str(self) -> str:
        """A CHAR field's text (stops at the first NUL)."""
        return self._data.astype(np.uint8).tobytes().split(b"\0", 1)[0].decode("utf-8")

    def scalar(self) -> Any:
        """The single value of a one-element field, as a Python number."""
        if self.size != 1:
            raise FieldError(f"plugin field {self.name!r} holds {self.size} values, expected exactly 1")
        return self._data[0].item()

    def __repr__(self) -> str:
        return f"PluginField({self.name!r}, {self._data!r}, PluginFieldType.{self.type.name})"


def type_name(value: object) -> str:
    """The type name of ``value`` for messages."""
    return type(value).__name__


def _infer_type(array: np.ndarray) -> PluginFieldType:
    for field_type in (
        PluginFieldType.FLOAT32,
        PluginFieldType.FLOAT64,
        PluginFieldType.FLOAT16,
        PluginFieldType.INT32,
        PluginFieldType.INT64,
        PluginFieldType.INT16,
        PluginFieldType.INT8,
    ):
        if _STORAGE[field_type] == array.dtype:
            return field_type
    return PluginFieldType.UNKNOWN


class PluginFieldCollection(CheckedList[PluginField]):
    """A list of :class:`PluginField` (TensorRT's ``PluginFieldCollection``).

    >>> fc = PluginFieldCollection([PluginField("alpha", np.float32(0.5), PluginFieldType.FLOAT32)])
    >>> len(fc), fc[0].name
    (1, 'alpha')
    """

    def __init__(self, fields: Iterable[PluginField] = ()) -> None:
        self._items: list[PluginField] = []
        for field in fields:
            self.append(field)

    def _checked(self, value: Any) -> PluginField:
        if not isinstance(value, PluginField):
            raise TypeMismatchError(f"PluginFieldCollection holds PluginField objects, got {type_name(value)}")
        return value

    def append(self, field: PluginField) -> None:
        """Add a field at the end."""
        self._items.append(self._checked(field))

    @property
    def nbFields(self) -> int:
        """Number of fields."""
        return len(self._items)

    def names(self) -> list[str]:
        """The field names, in order."""
        return [f.name for f in self._items]

    def __repr__(self) -> str:
        return f"PluginFieldCollection({self._items!r})"
