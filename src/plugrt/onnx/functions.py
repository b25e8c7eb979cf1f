"""Ops defined by an ONNX function: expand a node into its schema's function body.

Many ONNX ops (NegativeLogLikelihoodLoss, RMSNormalization, Attention, ...) come
with a reference definition as a graph of simpler ops. A node whose op has no
built-in importer and no registered plugin is replaced by that graph, imported
node by node (a plugrt extension; TensorRT's parser reports such ops as
unsupported). Context-dependent bodies are built for the node's input types.
"""

from __future__ import annotations

from typing import Any

import onnx
from onnx import AttributeProto, FunctionProto, NodeProto, TypeProto

from ..core.types import DataType
from .scopes import rename_free_names
from .shape_inference import TensorInfo

__all__ = ["expand_node", "function_opset", "schema_function"]

_ONNX_TYPES = {
    DataType.FLOAT: onnx.TensorProto.FLOAT,
    DataType.HALF: onnx.TensorProto.FLOAT16,
    DataType.INT8: onnx.TensorProto.INT8,
    DataType.UINT8: onnx.TensorProto.UINT8,
    DataType.INT32: onnx.TensorProto.INT32,
    DataType.INT64: onnx.TensorProto.INT64,
    DataType.BOOL: onnx.TensorProto.BOOL,
}


def schema_function(node: NodeProto, opset: int, inputs: list[TensorInfo | None]) -> tuple[FunctionProto, Any] | None:
    """The function body defining ``node``'s op at ``opset`` and the op's schema, or None."""
    domain = "" if node.domain == "ai.onnx" else node.domain
    try:
        schema: Any = onnx.defs.get_schema(node.op_type, opset, domain)
    except onnx.defs.SchemaError:
        return None
    function = FunctionProto()
    plain = [v for v in schema.function_opset_versions if v <= opset]
    dependent = [v for v in schema.context_dependent_function_opset_versions if v <= opset]
    if plain:
        function.ParseFromString(schema.get_function_with_opset_version(max(plain)))
    elif dependent:
        types = [_type_proto(info).SerializeToString() for info in inputs]
        try:
            data = schema.get_context_dependent_function_with_opset_version(
                max(dependent), node.SerializeToString(), types
            )
        except Exception:  # the schema could not build a body for these inputs
            return None
        if not data:
            return None
        function.ParseFromString(data)
    else:
        return None
    return (function, schema) if function.node else None


def _type_proto(info: TensorInfo | None) -> TypeProto:
    proto = TypeProto()
    if info is None:
        return proto
    proto.tensor_type.elem_type = _ONNX_TYPES.get(info.dtype, onnx.TensorProto.UNDEFINED)
    for dim in info.shape:
        entry = proto.tensor_type.shape.dim.add()
        if dim.is_constant():
            entry.dim_value = dim.get_constant_value()
    return proto


def expand_node(node: NodeProto, function: FunctionProto, schema: Any, prefix: str) -> list[NodeProto]:
    """The body's nodes wired to ``node``: its inputs, outputs and attributes (schema defaults filled in).

    Internal tensor and node names get ``prefix`` (unique per expansion).
    """
    names = {formal: (node.input[i] if i < len(node.input) else "") for i, formal in enumerate(function.input)}
    for i, formal in enumerate(function.output):
        if i < len(node.output) and node.output[i]:
            names[formal] = node.output[i]
    attributes: dict[str, AttributeProto] = {}
    for name, definition in schema.attributes.items():
        default = definition.default_value
        if default.type != AttributeProto.UNDEFINED:
            attributes[name] = default
    attributes.update({a.name: a for a in node.attribute})

    def rename(name: str) -> str:
        if not name:
            return ""
        return names.get(name, prefix + name)

    expanded = []
    for index, inner in enumerate(function.node):
        copy = NodeProto()
        copy.CopyFrom(inner)
        copy.name = f"{prefix}{inner.name or inner.op_type}_{index}"
        del copy.input[:]
        del copy.output[:]
        copy.input.extend(rename(n) for n in inner.input)
        copy.output.extend(rename(n) for n in inner.output)
        del copy.attribute[:]
        for attribute in inner.attribute:
            if attribute.ref_attr_name:
                if attribute.ref_attr_name in attributes:
                    bound = AttributeProto()
                    bound.CopyFrom(attributes[attribute.ref_attr_name])
                    bound.name = attribute.name
                    copy.attribute.append(bound)
            else:
                copy.attribute.append(attribute)
        rename_free_names(copy, rename)
        expanded.append(copy)
    return expanded


def function_opset(function: FunctionProto, default: int) -> int:
    """The default-domain opset the body is written in."""
    for entry in function.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return int(entry.version)
    return default
