"""``EngineInspector``: what an engine holds, as one-line text or JSON."""

from __future__ import annotations

import json
from typing import Any

from ..core.enums import TrtEnum
from ..core.errors import ExecutionError
from ..ops.torch_cpu import tactic_name
from .plan import EnginePlan

__all__ = ["EngineInspector", "LayerInformationFormat", "describe_layer", "describe_tensor"]


class LayerInformationFormat(TrtEnum):
    """Output format of the inspector."""

    ONELINE = 0
    JSON = 1


def describe_tensor(plan: EnginePlan, index: int) -> dict[str, Any]:
    """Tensor ``index`` of ``plan`` as plain data: name, dtype, format, shape (expressions as text), role."""
    t = plan.tensors[index]
    return {
        "name": t.name,
        "dtype": t.dtype.name,
        "format": t.format.name,
        "shape": [str(d) for d in t.shape],
        "role": t.role,
    }


def describe_layer(plan: EnginePlan, index: int) -> dict[str, Any]:
    """Layer ``index`` of ``plan`` as plain data.

    Every layer: index, name, kind ('plugin' or the operator kind), inputs and
    outputs (:func:`describe_tensor`). A plugin layer adds its plugin record
    (name, version, namespace, interface, family, payload_bytes), workspace and
    tactic; an operator its params, weights (shape and dtype of each) and, when the builder chose
    another kernel than its own, ``tactic`` and ``tactic_name`` (see :mod:`plugrt.ops.torch_cpu`).
    Raises :class:`ExecutionError` for an index outside the plan's layers.
    """
    if not isinstance(index, int) or not 0 <= index < len(plan.layers):
        raise ExecutionError(f"layer index {index!r} is out of range; the engine has {len(plan.layers)} layers")
    layer = plan.layers[index]
    info: dict[str, Any] = {
        "index": index,
        "name": layer.name,
        "kind": layer.kind,
        "inputs": [describe_tensor(plan, i) for i in layer.inputs],
        "outputs": [describe_tensor(plan, i) for i in layer.outputs],
    }
    if layer.is_plugin:
        record = plan.plugins[layer.plugin]
        info["plugin"] = {
            "name": record.name,
            "version": record.version,
            "namespace": record.namespace,
            "interface": record.interface,
            "family": layer.family,
            "payload_bytes": len(record.payload),
        }
        info["workspace"] = layer.workspace
        info["tactic"] = layer.tactic
    else:
        info["params"] = layer.params
        weights = {name: plan.weights[key] for name, key in layer.weights.items()}
        info["weights"] = {name: {"shape": list(w.shape), "dtype": str(w.dtype)} for name, w in weights.items()}
        if layer.tactic:
            info["tactic"], info["tactic_name"] = layer.tactic, tactic_name(layer.tactic)
    return info


class EngineInspector:
    """Describes an engine's layers (TensorRT's ``EngineInspector``)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.execution_context: Any = None

    def layer_info(self, layer_index: int) -> dict[str, Any]:
        """A layer as a dict (see :func:`describe_layer`)."""
        return describe_layer(self.engine.plan, layer_index)

    def get_layer_information(
        self,
        layer_index: int,
        format: LayerInformationFormat = LayerInformationFormat.ONELINE,  # noqa: A002 - TensorRT's name
    ) -> str:
        """One layer as a line of text or as JSON."""
        info = self.layer_info(layer_index)
        if format == LayerInformationFormat.JSON:
            return json.dumps(info, sort_keys=True)
        ins = ", ".join(f"{t['name']}:{t['dtype']}/{t['format']}" for t in info["inputs"])
        outs = ", ".join(f"{t['name']}:{t['dtype']}/{t['format']}" for t in info["outputs"])
        kind = f"{info['plugin']['name']} v{info['plugin']['version']}" if "plugin" in info else info["kind"]
        return f"{info['name']} [{kind}] ({ins}) -> ({outs})"

    def get_engine_information(self, format: LayerInformationFormat = LayerInformationFormat.ONELINE) -> str:  # noqa: A002
        """Every layer, plus IO tensors and profiles in JSON mode."""
        count = len(self.engine.plan.layers)
        if format == LayerInformationFormat.JSON:
            plan = self.engine.plan
            return json.dumps(
                {
                    "name": plan.name,
                    "layers": [self.layer_info(i) for i in range(count)],
                    "io": [
                        {
                            "name": plan.tensors[i].name,
                            "role": plan.tensors[i].role,
                            "dtype": plan.tensors[i].dtype.name,
                            "shape": list(plan.io_shapes[plan.tensors[i].name]),
                        }
                        for i in plan.io
                    ],
                    "profiles": [
                        {"arena_bytes": p.arena_size, "shapes": {k: [list(d) for d in v] for k, v in p.shapes.items()}}
                        for p in plan.profiles
                    ],
                },
                sort_keys=True,
            )
        return "\n".join(self.get_layer_information(i) for i in range(count))
