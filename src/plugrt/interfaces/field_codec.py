"""Bytes of a :class:`PluginFieldCollection`: how V3 plugin records are stored in plans."""

from __future__ import annotations

import numpy as np

from ..core.errors import SerializationError, TypeMismatchError
from .fields import PluginField, PluginFieldCollection, PluginFieldType, field_numpy_dtype
from .serialization import SerializationReader, SerializationWriter

__all__ = ["decode_fields", "encode_fields"]

_MAGIC = 0x46444C50  # "PLDF"
_VERSION = 1
_MAX_FIELDS = 4096


def encode_fields(fields: PluginFieldCollection) -> bytes:
    """Serialize every field's name, type and data."""
    if not isinstance(fields, PluginFieldCollection):
        raise TypeMismatchError(f"expected a PluginFieldCollection, got {type(fields).__name__}")
    writer = SerializationWriter(magic=_MAGIC, version=_VERSION)
    writer.write_u32(len(fields))
    for field in fields:
        writer.write_str(field.name)
        writer.write_u32(int(field.type))
        data = np.ascontiguousarray(field.data, dtype=field_numpy_dtype(field.type))
        writer.write_bytes(data.astype(data.dtype.newbyteorder("<"), copy=False).tobytes())
    return writer.to_bytes()


def decode_fields(payload: bytes) -> PluginFieldCollection:
    """Inverse of :func:`encode_fields`; malformed bytes raise :class:`SerializationError`."""
    reader = SerializationReader(payload, magic=_MAGIC, version=_VERSION)
    count = reader.read_u32()
    if count > _MAX_FIELDS:
        raise SerializationError(f"serialized field collection claims {count} fields; at most {_MAX_FIELDS} allowed")
    fields = PluginFieldCollection()
    for _ in range(count):
        name = reader.read_str()
        raw_type = reader.read_u32()
        try:
            field_type = PluginFieldType(raw_type)
        except ValueError:
            raise SerializationError(
                f"serialized field {name!r} has unknown PluginFieldType value {raw_type}"
            ) from None
        dtype = field_numpy_dtype(field_type).newbyteorder("<")
        raw = reader.read_bytes()
        if len(raw) % dtype.itemsize:
            raise SerializationError(
                f"serialized field {name!r}: {len(raw)} bytes is not a multiple of {dtype.itemsize} ({field_type.name})"
            )
        data = np.frombuffer(raw, dtype=dtype).astype(field_numpy_dtype(field_type))
        fields.append(PluginField(name, data, field_type))
    reader.finish()
    return fields
