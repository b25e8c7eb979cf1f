"""Node attributes of the wrong type are refused, never converted quietly.

ONNX says ``Conv``'s ``strides`` are INTS and ``Softmax``'s ``axis`` an INT; a
model with ``strides=[1.5, 1.5]`` (FLOATS) or ``axis="0"`` (STRING) is invalid, and
truncating ``1.5`` to ``1`` would run a different network than the one written.
Every default-domain node's attributes are checked against the op's schema at
its opset before an importer reads them.
"""

from __future__ import annotations

from typing import Any

import onnx
from onnx import AttributeProto, helper

from ..core.errors import TypeMismatchError

__all__ = ["check_attribute_types"]


def _type_name(value: int) -> str:
    try:
        return AttributeProto.AttributeType.Name(value)
    except ValueError:
        return str(value)


def check_attribute_types(node: Any, opset: int) -> None:
    """Raise :class:`TypeMismatchError` naming the attribute, its expected type and the value given."""
    if node.domain not in ("", "ai.onnx") or not node.attribute:
        return
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, node.domain)
    except onnx.defs.SchemaError:
        return  # no schema: a plugin or an unknown op, checked by its own creator
    for attribute in node.attribute:
        spec = schema.attributes.get(attribute.name)
        if spec is None or attribute.ref_attr_name or attribute.type == AttributeProto.UNDEFINED:
            continue
        expected = int(spec.type.value)  # type: ignore[attr-defined]  # AttrType numbers the AttributeProto types
        if attribute.type != expected:
            try:
                value: Any = helper.get_attribute_value(attribute)
            except Exception:
                value = "?"
            shown = repr(value.decode() if isinstance(value, bytes) else value)[:80]
            raise TypeMismatchError(
                f"attribute {attribute.name!r} must be {_type_name(expected)}, got {_type_name(attribute.type)} {shown}"
            )
