"""The plugin fallback: ONNX nodes without a built-in importer run as registered plugins.

As TensorRT's ONNX parser does it:

* the creator is looked up in ``get_plugin_registry()`` by (op type, the node's
  ``plugin_version`` attribute or "1", its ``plugin_namespace`` attribute or "");
* each attribute named in the creator's ``field_names`` becomes a
  :class:`PluginField` of the type the creator declares there (an UNKNOWN
  declared type takes the attribute's own: FLOAT -> FLOAT32, INT -> INT32,
  STRING -> CHAR, FLOATS/INTS -> arrays of those, TENSOR by its element type);
* an ``IPluginCreator`` makes the plugin with ``create_plugin(name, fc)`` and it
  is added with ``add_plugin_v2``; an ``IPluginCreatorV3One`` with
  ``create_plugin(name, fc, TensorRTPhase.BUILD)`` and ``add_plugin_v3``.

Beyond TensorRT: an attribute the creator does not list is dropped (as TensorRT
drops it) *with a WARNING*, a listed field the node does not set is reported
(WARNING), and a missing creator is an error naming the registered near
matches. A node whose op type has a built-in importer runs as a plugin when it
carries a ``plugin_namespace`` attribute (so a plugin can replace a built-in op).

A node naming a decorator-API plugin (``plugrt.plugin``) is added with
``add_plugin``: its attributes are mapped by the plugin's schema, and an optional
``aot`` attribute (0 or 1) insists on the JIT or AOT implementation (without it the
network's ``PREFER_AOT/JIT_PYTHON_PLUGINS`` flag decides).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import AttributeProto, helper, numpy_helper

from ..core.errors import CreatorNotFoundError, FieldError, PluginError, PlugrtError, TypeMismatchError
from ..interfaces.creator import IPluginCreator, IPluginCreatorV3One
from ..interfaces.fields import PluginField, PluginFieldCollection, PluginFieldType
from ..interfaces.registry import get_plugin_registry
from ..interfaces.v3 import TensorRTPhase
from ..network.tensor import ITensor
from ..plugin._lib import QuickPluginCreator
from .importers.base import ImportContext

__all__ = ["attribute_fields", "import_plugin", "wants_plugin"]

#: Attributes that address the plugin and are not passed to it.
ADDRESSING = frozenset({"plugin_version", "plugin_namespace"})
#: ... and for decorator-API plugins, the choice of implementation.
QUICK_ADDRESSING = frozenset({"aot"})

_TENSOR_FIELD_TYPES: dict[np.dtype, PluginFieldType] = {
    np.dtype(np.float32): PluginFieldType.FLOAT32,
    np.dtype(np.float16): PluginFieldType.FLOAT16,
    np.dtype(np.float64): PluginFieldType.FLOAT64,
    np.dtype(np.int8): PluginFieldType.INT8,
    np.dtype(np.int16): PluginFieldType.INT16,
    np.dtype(np.int32): PluginFieldType.INT32,
    np.dtype(np.int64): PluginFieldType.INT64,
}


def wants_plugin(node: Any) -> bool:
    """True when the node asks for a plugin explicitly (it has a ``plugin_namespace`` attribute)."""
    return any(a.name == "plugin_namespace" for a in node.attribute)


def import_plugin(ctx: ImportContext, inputs: list[ITensor | None], explicit: bool = False) -> list[ITensor]:
    """Add the node as a plugin layer; ``explicit`` when it replaces a built-in importer."""
    node = ctx.node
    version = _addressing(ctx, "plugin_version", "1")
    namespace = _addressing(ctx, "plugin_namespace", "")
    creator = _find_creator(ctx, version, namespace, explicit)
    quick = isinstance(creator, QuickPluginCreator)
    fields = attribute_fields(ctx, creator, QUICK_ADDRESSING if quick else frozenset())
    tensors = _plugin_inputs(ctx, inputs)
    name = node.name or f"{node.op_type}_{node.output[0] if node.output else ''}"
    label = f"{node.op_type} v{version}" + (f" (namespace {namespace!r})" if namespace else "")
    if quick:
        return _outputs(ctx, _add_quick(ctx, creator, fields, tensors), label)
    try:
        if isinstance(creator, IPluginCreatorV3One):
            plugin = creator.create_plugin(name, fields, TensorRTPhase.BUILD)
        elif isinstance(creator, IPluginCreator):
            plugin = creator.create_plugin(name, fields)
        else:
            raise TypeMismatchError(
                f"creator {type(creator).__name__} is neither IPluginCreator nor IPluginCreatorV3One"
            )
    except PlugrtError:
        raise
    except Exception as exc:
        raise PluginError(
            f"{type(creator).__name__}.create_plugin for {label} raised {type(exc).__name__}: {exc}"
        ) from exc
    if plugin is None:
        raise PluginError(f"{type(creator).__name__}.create_plugin for {label} returned None")
    if isinstance(creator, IPluginCreatorV3One):
        layer = ctx.network.add_plugin_v3(tensors, [], plugin)
    else:
        layer = ctx.network.add_plugin_v2(tensors, plugin)
    return _outputs(ctx, layer, label)


def _outputs(ctx: ImportContext, layer: Any, label: str) -> list[ITensor]:
    layer.name = ctx.layer_name(f"plugin {ctx.node.op_type}")
    wanted = len(ctx.node.output)
    if layer.num_outputs < wanted:
        ctx.fail(f"the node has {wanted} outputs but plugin {label} has {layer.num_outputs} (num_outputs)")
    return [layer.get_output(i) for i in range(wanted)]


def _add_quick(
    ctx: ImportContext, creator: QuickPluginCreator, fields: PluginFieldCollection, tensors: list[ITensor]
) -> Any:
    """A decorator-API plugin: attributes by its schema, ``aot`` (if set) choosing the implementation."""
    schema = creator.definition.schema
    aot = ctx.attr("aot", None)
    if aot is not None and (isinstance(aot, bool) or not isinstance(aot, int) or aot not in (0, 1)):
        ctx.fail(f"attribute 'aot' of QDP plugin {schema.plugin_id!r} must be an INT 0 or 1, got {aot!r}")
    values = {f.name: schema.from_field(f) for f in fields}
    described = [(len(t.shape), t.dtype) for t in tensors]

    def create(request: Any) -> tuple[list[ITensor], list[ITensor], Any]:
        return tensors, [], creator.create_quick(values, request, described)

    return ctx.network.add_plugin(create, aot=None if aot is None else bool(aot))


def _addressing(ctx: ImportContext, name: str, default: str) -> str:
    value = ctx.attr(name, default)
    if not isinstance(value, str):
        ctx.fail(f"attribute {name!r} must be a STRING, got {value!r}")
    return value


def _find_creator(ctx: ImportContext, version: str, namespace: str, explicit: bool) -> Any:
    op_type = ctx.node.op_type
    registry = get_plugin_registry()
    try:
        return registry.require_creator(op_type, version, namespace)
    except CreatorNotFoundError as exc:
        if explicit:
            why = "the node asks for a plugin (it has a plugin_namespace attribute)"
        else:
            domain = f" in domain {ctx.node.domain!r}" if ctx.node.domain not in ("", "ai.onnx") else ""
            why = f"op {op_type!r}{domain} has no built-in importer, so it must be a registered plugin"
        raise CreatorNotFoundError(f"{why}, but {exc}") from None


def _plugin_inputs(ctx: ImportContext, inputs: list[ITensor | None]) -> list[ITensor]:
    present = list(inputs)
    while present and present[-1] is None:
        present.pop()
    if any(t is None for t in present):
        missing = [i for i, t in enumerate(present) if t is None]
        ctx.fail(f"inputs {missing} are omitted (empty names) before a given input; a plugin takes no gaps")
    return [t for t in present if t is not None]


def attribute_fields(
    ctx: ImportContext, creator: Any, addressing: frozenset[str] = frozenset()
) -> PluginFieldCollection:
    """The node's attributes as the creator's fields (see the module note for the rules);
    ``addressing`` names more attributes that are not fields."""
    declared = {f.name: PluginFieldType(f.type) for f in creator.field_names}
    who = f"creator {type(creator).__name__} ({creator.name!r} v{creator.plugin_version})"
    fields = PluginFieldCollection()
    present = set()
    for attribute in ctx.node.attribute:
        if attribute.name in ADDRESSING or attribute.name in addressing:
            continue
        present.add(attribute.name)
        if attribute.name not in declared:
            listed = ", ".join(sorted(declared)) or "none"
            ctx.warn(
                f"attribute {attribute.name!r} is not a field of {who} (its field_names list: {listed}); "
                "it is dropped, as TensorRT drops it silently -- add it to field_names if the plugin needs it"
            )
            continue
        fields.append(_field(ctx, attribute, declared[attribute.name], who))
    for name in declared:
        if name not in present:
            ctx.warn(f"{who} lists field {name!r} but the node does not set it; the plugin gets no value for it")
    return fields


def _field(ctx: ImportContext, attribute: Any, declared: PluginFieldType, who: str) -> PluginField:
    data, natural = _attribute_data(ctx, attribute)
    target = natural if declared == PluginFieldType.UNKNOWN else declared
    try:
        return PluginField(attribute.name, data, target)
    except (TypeMismatchError, FieldError) as exc:
        kind = AttributeProto.AttributeType.Name(attribute.type)
        ctx.fail(
            f"attribute {attribute.name!r} ({kind}) does not fit field type {target.name} declared by {who}: {exc}"
        )


def _attribute_data(ctx: ImportContext, attribute: Any) -> tuple[Any, PluginFieldType]:
    """The attribute's data and the field type TensorRT's mapping gives it."""
    kind = attribute.type
    value = helper.get_attribute_value(attribute)
    if kind == AttributeProto.FLOAT:
        return np.array([value], dtype=np.float32), PluginFieldType.FLOAT32
    if kind == AttributeProto.INT:
        return np.array([value], dtype=np.int64), PluginFieldType.INT32
    if kind == AttributeProto.STRING:
        return bytes(value), PluginFieldType.CHAR
    if kind == AttributeProto.FLOATS:
        return np.array(value, dtype=np.float32), PluginFieldType.FLOAT32
    if kind == AttributeProto.INTS:
        return np.array(value, dtype=np.int64), PluginFieldType.INT32
    if kind == AttributeProto.STRINGS:
        return b"\0".join(bytes(v) for v in value), PluginFieldType.CHAR
    if kind == AttributeProto.TENSOR:
        array = np.asarray(numpy_helper.to_array(value)).reshape(-1)
        if array.dtype in (np.dtype(np.bool_), np.dtype(np.uint8)):
            return array.view(np.int8), PluginFieldType.INT8
        field_type = _TENSOR_FIELD_TYPES.get(array.dtype)
        if field_type is None:
            ctx.fail(f"attribute {attribute.name!r} is a tensor of {array.dtype}, which has no plugin field type")
        return array, field_type
    ctx.fail(
        f"attribute {attribute.name!r} is of type {AttributeProto.AttributeType.Name(kind)}, "
        "which has no plugin field mapping (FLOAT, INT, STRING, FLOATS, INTS, STRINGS and TENSOR do)"
    )
