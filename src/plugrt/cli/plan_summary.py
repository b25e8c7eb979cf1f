"""A plan file as plain data: what ``plugrt inspect`` prints, as JSON or HTML."""

from __future__ import annotations

from typing import Any

from ..engine.inspector import describe_layer, describe_tensor
from ..engine.plan import EnginePlan
from ..engine.validate import validate_plan
from ..interfaces.field_codec import decode_fields

__all__ = ["summarize_plan"]


def _payload_detail(plan: EnginePlan, index: int) -> dict[str, Any]:
    """What a plugin record's bytes hold: a V3 plugin's fields, else the first 64 bytes as hex."""
    record = plan.plugins[index]
    info: dict[str, Any] = {}
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
    layers = [describe_layer(plan, i) for i in range(len(plan.layers))]
    for entry, layer in zip(layers, plan.layers):
        if layer.is_plugin:
            entry["plugin"].update(_payload_detail(plan, layer.plugin))
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
        "io": [
            dict(describe_tensor(plan, i), declared_shape=list(plan.io_shapes[plan.tensors[i].name])) for i in plan.io
        ],
        "layers": layers,
        "profiles": profiles,
        "weights_bytes": int(sum(w.nbytes for w in plan.weights.values())),
    }
