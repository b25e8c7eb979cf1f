"""Plugin fields for the checker: a ``{name: value}`` mapping typed by the creator's ``field_names``.

Values given as text (the command line) are parsed with the declared type:
``"1,2"`` is ``[1, 2]`` for an INT32 field and ``[1.0, 2.0]`` for FLOAT32; a CHAR
field keeps the text.

>>> import plugrt as trt
>>> creator = trt.IPluginCreator()
>>> creator.field_names = trt.PluginFieldCollection(
...     [trt.PluginField("pads", np.zeros(0, np.int32), trt.PluginFieldType.INT32)])
>>> make_fields(creator, {"pads": "1,2"})[0].data
array([1, 2], dtype=int32)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..interfaces.fields import PluginField, PluginFieldCollection, PluginFieldType
from .spec import CheckUsageError

__all__ = ["declared_types", "describe_fields", "format_values", "make_fields", "parse_field_text"]

_FLOAT_TYPES = {PluginFieldType.FLOAT16, PluginFieldType.FLOAT32, PluginFieldType.FLOAT64, PluginFieldType.BF16}


def declared_types(creator: Any) -> dict[str, PluginFieldType]:
    """Field name -> declared type from ``creator.field_names`` (empty when unreadable)."""
    names = getattr(creator, "field_names", None)
    if not isinstance(names, PluginFieldCollection):
        return {}
    return {f.name: PluginFieldType(f.type) for f in names}


def parse_field_text(name: str, text: str, field_type: PluginFieldType | None) -> Any:
    """Turn command-line text into a value of ``field_type`` (inferred when None)."""
    if field_type in (PluginFieldType.CHAR, PluginFieldType.UNKNOWN):
        return text
    items = [t.strip() for t in text.split(",") if t.strip()]
    if field_type is not None:
        try:
            return [float(t) for t in items] if field_type in _FLOAT_TYPES else [int(t, 0) for t in items]
        except ValueError:
            raise CheckUsageError(
                f"field {name!r}: cannot read {text!r} as PluginFieldType.{field_type.name} values (comma-separated)"
            ) from None
    for parse in (lambda t: int(t, 0), float):
        try:
            return [parse(t) for t in items]
        except ValueError:
            continue
    return text


def _infer(value: Any) -> PluginFieldType:
    if isinstance(value, str):
        return PluginFieldType.CHAR
    array = np.asarray(value)
    if array.dtype.kind == "f":  # Python floats are FLOAT32, as TensorRT's fields mostly are
        explicit64 = isinstance(value, (np.ndarray, np.floating)) and array.dtype.itemsize == 8
        return PluginFieldType.FLOAT64 if explicit64 else PluginFieldType.FLOAT32
    if array.dtype.kind in "iub":
        return PluginFieldType.INT32
    raise CheckUsageError(f"cannot tell the field type of {value!r}; pass a PluginField")


def make_fields(creator: Any, fields: Mapping[str, Any] | PluginFieldCollection | None) -> PluginFieldCollection:
    """A :class:`PluginFieldCollection` from ``{name: value}``, typed by the creator's declarations."""
    if fields is None:
        return PluginFieldCollection()
    if isinstance(fields, PluginFieldCollection):
        return fields
    if not isinstance(fields, Mapping):
        raise CheckUsageError(f"fields must be a mapping name -> value or a PluginFieldCollection, got {fields!r}")
    declared = declared_types(creator)
    collection = PluginFieldCollection()
    for name, value in fields.items():
        if isinstance(value, PluginField):
            collection.append(value)
            continue
        field_type = declared.get(name)
        if isinstance(value, str) and field_type not in (PluginFieldType.CHAR, PluginFieldType.UNKNOWN):
            value = parse_field_text(name, value, field_type)
        if field_type is None:
            field_type = _infer(value)
        data = value if isinstance(value, str) else np.atleast_1d(np.asarray(value))
        try:
            collection.append(PluginField(name, data, field_type))
        except Exception as exc:
            raise CheckUsageError(f"field {name!r}: {exc}") from None
    return collection


def format_values(data: np.ndarray) -> str:
    """'[1, 2]' or '[0.2]' (floats to 7 significant digits, as FLOAT32 holds them)."""
    shown = [f"{v:.7g}" if data.dtype.kind == "f" else str(v) for v in data.tolist()[:8]]
    return "[" + ", ".join(shown) + (", ..." if data.size > 8 else "") + "]"


def describe_fields(fields: PluginFieldCollection) -> str:
    """'pads=[1, 2], scale=[0.5]' for messages."""
    parts = []
    for field in fields:
        value = repr(field.as_str()) if field.type == PluginFieldType.CHAR else format_values(field.data)
        parts.append(f"{field.name}={value}")
    return ", ".join(parts) or "no fields"
