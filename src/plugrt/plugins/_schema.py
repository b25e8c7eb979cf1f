"""Declare a library plugin's fields once; the schema parses, checks and (de)serializes them.

A :class:`FieldSpec` says a field's name, TensorRT's ``PluginFieldType`` for it,
its default (or that it is required) and its valid range. :class:`Schema` turns a
``PluginFieldCollection`` into a plain ``dict`` of checked values, writes those
values with a ``SerializationWriter`` and reads them back, so creation,
serialization and deserialization can never disagree about a field.

>>> import numpy as np, plugrt as trt
>>> schema = Schema("Demo", (FieldSpec("topK", INT, check=at_least(1)), FieldSpec("iou", FLOAT, 0.5)))
>>> fc = trt.PluginFieldCollection([trt.PluginField("topK", np.int32(7), trt.PluginFieldType.INT32)])
>>> schema.parse(fc)
{'topK': 7, 'iou': 0.5}
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.errors import FieldError, TypeMismatchError
from ..core.logger import ILogger, Severity
from ..interfaces.fields import PluginField, PluginFieldCollection, PluginFieldType
from ..interfaces.serialization import SerializationReader, SerializationWriter

__all__ = ["BOOL", "FLOAT", "FLOATS", "INT", "FieldSpec", "Schema", "at_least", "between", "one_of"]

# Field kinds: what a value means. TensorRT stores booleans as INT32 fields.
INT, FLOAT, BOOL, FLOATS = "int", "float", "bool", "floats"
_TYPE = {INT: PluginFieldType.INT32, FLOAT: PluginFieldType.FLOAT32, BOOL: PluginFieldType.INT32}
_TYPE[FLOATS] = PluginFieldType.FLOAT32
_INTEGER_TYPES = (PluginFieldType.INT8, PluginFieldType.INT16, PluginFieldType.INT32, PluginFieldType.INT64)


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()
Check = Callable[[Any], "str | None"]


def at_least(low: float) -> Check:
    """A check that accepts values ``>= low``."""
    return lambda v: None if v >= low else f"a value >= {low}"


def between(low: float, high: float) -> Check:
    """A check that accepts values in ``[low, high]``."""
    return lambda v: None if low <= v <= high else f"a value in [{low}, {high}]"


def one_of(*choices: int) -> Check:
    """A check that accepts only the listed values."""
    return lambda v: None if v in choices else f"one of {list(choices)}"


@dataclass(frozen=True)
class FieldSpec:
    """One field: name, kind (INT, FLOAT, BOOL, FLOATS), default, range check, doc.

    ``ambiguous`` holds a note logged as a WARNING when the field is absent: TensorRT's
    own sources disagree on its default, so relying on it deserves a message.
    """

    name: str
    kind: str
    default: Any = REQUIRED
    check: Check | None = None
    doc: str = ""
    ambiguous: str = ""

    @property
    def field_type(self) -> PluginFieldType:
        """TensorRT's field type for this field."""
        return _TYPE[self.kind]


class Schema:
    """The ordered fields of one plugin type."""

    def __init__(self, plugin: str, fields: tuple[FieldSpec, ...]) -> None:
        self.plugin = plugin
        self.fields = fields

    def field_collection(self) -> PluginFieldCollection:
        """What a creator reports as ``field_names`` (defaults as data; empty when required)."""
        out = PluginFieldCollection()
        for spec in self.fields:
            value = None if spec.default is REQUIRED else np.atleast_1d(spec.default)
            out.append(PluginField(spec.name, value, spec.field_type))
        return out

    def parse(self, fc: PluginFieldCollection | None, logger: ILogger | None = None) -> dict[str, Any]:
        """Checked values for every field; raises FieldError / TypeMismatchError naming the field."""
        given = {f.name: f for f in (fc or PluginFieldCollection())}
        known = {spec.name for spec in self.fields}
        for name in sorted(set(given) - known):
            _log(logger, f"{self.plugin}: ignoring unknown field {name!r}; known fields: {sorted(known)}")
        values: dict[str, Any] = {}
        for spec in self.fields:
            field = given.get(spec.name)
            if field is None:
                if spec.default is REQUIRED:
                    raise FieldError(
                        f"{self.plugin}: required field {spec.name!r} (PluginFieldType.{spec.field_type.name}) "
                        "is missing"
                    )
                if spec.ambiguous:
                    _log(
                        logger,
                        f"{self.plugin}: field {spec.name!r} not given; using {spec.default!r}. {spec.ambiguous}",
                    )
                values[spec.name] = spec.default
                continue
            values[spec.name] = self._convert(spec, field)
        return values

    def _convert(self, spec: FieldSpec, field: PluginField) -> Any:
        where = f"{self.plugin}: field {spec.name!r}"
        accepted = _INTEGER_TYPES if spec.kind == BOOL else (spec.field_type,)
        if field.type not in accepted:
            raise TypeMismatchError(
                f"{where} must be PluginFieldType.{spec.field_type.name}, got PluginFieldType.{field.type.name}"
            )
        data = np.asarray(field.data)
        if spec.kind == FLOATS:
            value: Any = data.astype(np.float32).copy()
        elif data.size != 1:
            raise FieldError(f"{where} must hold exactly 1 value, got {data.size}")
        elif spec.kind == FLOAT:
            value = float(data[0])
        else:
            value = bool(data[0]) if spec.kind == BOOL else int(data[0])
        if spec.kind == FLOAT and not np.isfinite(value):
            raise FieldError(f"{where} must be finite, got {value}")
        problem = spec.check(value) if spec.check is not None else None
        if problem is not None:
            raise FieldError(f"{where} must be {problem}, got {value!r}")
        return value

    def write(self, writer: SerializationWriter, values: dict[str, Any]) -> None:
        """Append ``values`` in field order."""
        for spec in self.fields:
            value = values[spec.name]
            if spec.kind == INT:
                writer.write_i32(int(value))
            elif spec.kind == FLOAT:
                writer.write_f32(float(value))
            elif spec.kind == BOOL:
                writer.write_bool(bool(value))
            else:
                writer.write_array(np.asarray(value, dtype=np.float32))

    def read(self, reader: SerializationReader) -> dict[str, Any]:
        """Read what :meth:`write` wrote (range checks run again: the bytes may be hostile)."""
        values: dict[str, Any] = {}
        for spec in self.fields:
            if spec.kind == INT:
                value: Any = reader.read_i32()
            elif spec.kind == FLOAT:
                value = reader.read_f32()
            elif spec.kind == BOOL:
                value = reader.read_bool()
            else:
                value = reader.read_array().astype(np.float32).reshape(-1)
            problem = spec.check(value) if spec.check is not None else None
            if problem is not None:
                raise FieldError(f"{self.plugin}: serialized field {spec.name!r} must be {problem}, got {value!r}")
            values[spec.name] = value
        return values


def _log(logger: ILogger | None, message: str) -> None:
    if logger is not None:
        logger.emit(Severity.WARNING, message)
