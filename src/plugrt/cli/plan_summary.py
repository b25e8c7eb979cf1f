"""A plan file as plain data: what ``plugrt inspect`` prints, as JSON or HTML."""

from __future__ import annotations

from typing import Any

from ..engine.plan import EnginePlan
from ..engine.validate import validate_plan
from ..interfaces.field_codec import decode_fields

__all__ = ["summarize_plan"]


def _tensor(plan: EnginePlan, index: int) -> dict[str, Any]:
    t = plan.tensors[index]
    return {
        "name": t.name,
        "dtype": t.dtype.name,
        "format": t.format.name,
        "shape": [str(d) for d in t.shape],
        "role": t.role,
    }


def _plugin_record(plan: EnginePlan, index: int) -> dict[str, Any]:
    record = plan.plugins[index]
    info: dict[str, Any] = {
        "name": record.name,
        "version": record.version,
        "namespace": record.namespace,
        "interface": record.interface,
        "payload_bytes": len(record.payload),
    }
    if record.interface == "v3":
        try:
            info["fields"] = {
                f.name: {"type": f.type.name, "value": f.data.tolist()} for f in decode_fields(record.payload)
            }
        except Exception as exc:
            info["fields_error"] = str(exc)
    else:
        info["payload_hex"] = record.payload[:64].hex()
    return info


def summarize_plan(data: bytes) -> dict[str, Any]:
    """Layers, tensors, IO, profiles, plugin records and the memory plan of a plan (no plugins needed)."""
    plan = EnginePlan.from_bytes(data)
    validate_plan(plan)
    layers = []
    for step, layer in enumerate(plan.layers):
        entry: dict[str, Any] = {
            "index": step,
            "name": layer.name,
            "kind": "plugin" if layer.is_plugin else layer.op_kind,
            "inputs": [_tensor(plan, i) for i in layer.inputs],
            "outputs": [_tensor(plan, i) for i in layer.outputs],
        }
        if layer.is_plugin:
            entry["plugin"] = _plugin_record(plan, layer.plugin)
            entry["family"] = layer.family
            entry["tactic"] = layer.tactic
            entry["workspace_bytes"] = layer.workspace
        else:
            entry["params"] = layer.params
            entry["weights"] = {
                k: {"shape": list(plan.weights[v].shape), "dtype": str(plan.weights[v].dtype)}
                for k, v in layer.weights.items()
            }
        layers.append(entry)
    profiles = []
    for p in plan.profiles:
        profiles.append(
            {
                "shapes": {
                    name: {"min": list(lo), "opt": list(opt), "max": list(hi)}
                    for name, (lo, opt, hi) in p.shapes.items()
                },
                "arena_bytes": p.arena_size,
                "tensor_offsets": {plan.tensors[i].name: off for i, off in sorted(p.offsets.items())},
                "workspace_offsets": {plan.layers[i].name: off for i, off in sorted(p.workspace_offsets.items())},
            }
        )
    return {
        "name": plan.name,
        "bytes": len(data),
        "io": [dict(_tensor(plan, i), declared_shape=list(plan.io_shapes[plan.tensors[i].name])) for i in plan.io],
        "layers": layers,
        "profiles": profiles,
        "weights_bytes": int(sum(w.nbytes for w in plan.weights.values())),
    }
