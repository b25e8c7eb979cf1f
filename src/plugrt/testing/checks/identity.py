"""Checks ``identity`` and ``fields-roundtrip``: the plugin and its creator agree, fields are honoured."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...interfaces.fields import PluginField, PluginFieldCollection, PluginFieldType
from ...interfaces.v3 import IPluginV3, PluginCapabilityType
from ..context import CheckContext
from ..fields import declared_types, describe_fields, format_values
from ..hooks import HookError
from ..report import CheckFailedError, CheckSkippedError

__all__ = ["check_fields_roundtrip", "check_identity"]


def _labels(ctx: CheckContext) -> tuple[str, str, str]:
    if ctx.driver.family == "IPluginV3":
        return "plugin_name", "plugin_version", "plugin_namespace"
    return "plugin_type", "plugin_version", "plugin_namespace"


def _num_outputs(plugin: Any) -> Any:
    if isinstance(plugin, IPluginV3):
        return getattr(plugin.get_capability_interface(PluginCapabilityType.BUILD), "num_outputs", None)
    return getattr(plugin, "num_outputs", None)


def check_identity(ctx: CheckContext) -> str:
    """Name, version and namespace are strings and equal the creator's; clones keep them."""
    driver, plugin = ctx.driver, ctx.first
    labels = _labels(ctx)
    identity = driver.raw_identity(plugin)
    problems = [
        f"{label} is {value!r}; it must be a str"
        for label, value in zip(labels, identity)
        if not isinstance(value, str)
    ]
    if isinstance(identity[0], str) and not identity[0]:
        problems.append(f"{labels[0]} is empty; set it to the creator's name")
    outputs = _num_outputs(plugin)
    if not isinstance(outputs, int) or isinstance(outputs, bool) or outputs < 1:
        problems.append(f"num_outputs is {outputs!r}; set it to the number of outputs (a positive int) in __init__")
    creator = ctx.creator
    if creator is None:
        problems.append(
            f"no registered creator has ({', '.join(repr(v) for v in identity)}); the runtime finds creators by the "
            "plugin's name, version and namespace, so an engine holding this plugin cannot be loaded"
        )
    else:
        expected = (creator.name, creator.plugin_version, creator.plugin_namespace)
        for label, mine, theirs, attr in zip(
            labels, identity, expected, ("name", "plugin_version", "plugin_namespace")
        ):
            if mine != theirs:
                problems.append(
                    f"the plugin's {label} is {mine!r} but its creator's {attr} is {theirs!r}; deserialization looks the "
                    f"creator up by the plugin's values and fails with 'no creator'. Fix: make {label} equal the "
                    f"creator's {attr}"
                )
    clone_identity = driver.raw_identity(driver.clone(plugin))
    if clone_identity != identity:
        problems.append(f"clone() changes the identity from {identity} to {clone_identity}; copy all three attributes")
    if problems:
        raise CheckFailedError("; ".join(problems))
    registered = creator is not None and ctx.find_creator(identity) is creator
    note = "" if registered else " (the creator is not registered: register it before building engines)"
    return f"{identity[0]!r} version {identity[1]!r} namespace {identity[2]!r} agree with the creator{note}"


def _perturbed(field: PluginField) -> PluginField | None:
    data = field.data
    changed: np.ndarray
    if field.type in (PluginFieldType.CHAR, PluginFieldType.UNKNOWN) or data.size == 0:
        return None
    if data.dtype.kind == "f":
        changed = data.astype(np.float64) * 1.5 + 0.25
    elif np.isin(data, (0, 1)).all():
        changed = 1 - data.astype(np.int64)
    else:
        changed = data.astype(np.int64) + 1
    try:
        return PluginField(field.name, changed, field.type)
    except Exception:
        return None


def _state(ctx: CheckContext, plugin: Any) -> bytes:
    return ctx.driver.payload(plugin)


def check_fields_roundtrip(ctx: CheckContext) -> str:
    """Fields are declared, not modified, and each one changes the plugin's serialized state."""
    creator = ctx.creator
    if creator is None:
        raise CheckSkippedError("no creator: fields are given to a creator")
    if ctx.template is not None and not len(ctx.fields):
        raise CheckSkippedError("the plugin was given as an object and no fields: pass fields to check its creator")
    names = getattr(creator, "field_names", None)
    if not isinstance(names, PluginFieldCollection):
        raise CheckFailedError(
            f"the creator's field_names is {type(names).__name__}; it must be a PluginFieldCollection"
        )
    declared = declared_types(creator)
    problems = []
    for field in ctx.fields:
        if field.name not in declared:
            problems.append(
                f"field {field.name!r} is not declared in the creator's field_names (declared: {sorted(declared)}); "
                "parsers and tools only pass declared fields. Fix: add it to field_names"
            )
        elif declared[field.name] != field.type:
            problems.append(
                f"field {field.name!r} is given as {field.type.name} but declared as {declared[field.name].name}"
            )
    before = [(f.name, f.type, f.data.copy()) for f in ctx.fields]
    plugin = ctx.driver.create(creator, ctx.fields)
    after = [(f.name, f.type, f.data) for f in ctx.fields]
    for (name, kind, old), (_, new_kind, new) in zip(before, after):
        if kind != new_kind or not np.array_equal(old, new):
            problems.append(f"create_plugin modified the caller's field {name!r}; read fields, never write them")
    state: bytes | None
    again: bytes | None
    try:
        state = _state(ctx, plugin)
        again = _state(ctx, ctx.driver.create(creator, ctx.fields))
    except HookError:
        state = again = None  # serialization checks report it
    if state is not None and state != again:
        problems.append(
            "two plugins created from the same fields serialize differently; creation must be deterministic"
        )
    ignored = []
    # Fields a creator declares build-only (a decorator plugin's attributes its impl does not take) need not reach the plan.
    build_only = set(getattr(creator, "build_only_fields", ()))
    for i, field in enumerate(ctx.fields if state is not None else []):
        changed = _perturbed(field)
        if changed is None or field.name in build_only:
            continue
        variant = PluginFieldCollection([changed if j == i else f for j, f in enumerate(ctx.fields)])
        try:
            other = _state(ctx, ctx.driver.create(creator, variant))
        except HookError:
            continue  # the creator rejected the value: it reads the field
        if other == state:
            ignored.append(f"{field.name!r} ({format_values(field.data)} -> {format_values(changed.data)})")
    if ignored:
        problems.append(
            f"changing field(s) {', '.join(ignored)} does not change what the plugin serializes: create_plugin ignores "
            "them (a misspelt name?) or serialize() drops them, so the value is lost in the engine. Fix: read every "
            "declared field in create_plugin and write it in serialize()"
        )
    if problems:
        raise CheckFailedError("; ".join(problems))
    return f"fields ({describe_fields(ctx.fields)}) are declared and each one reaches the serialized plugin"
