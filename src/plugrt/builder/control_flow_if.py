"""An ``IIfConditional`` lowered to the ``if`` operator.

Operator inputs: the condition, then the tensors the conditional's input layers
read and the outer tensors either branch reads. Each branch is a subgraph taking
the input layers' values and its outer tensors and returning one value per
output layer (its true or its false input); only the chosen branch runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.errors import BuildError
from ..core.types import DataType
from ..network.control_flow import IConditionLayer, IIfConditional, IIfConditionalInputLayer, IIfConditionalOutputLayer
from ..network.definition import INetworkDefinition
from ..network.tensor import ITensor
from .control_flow import Interior, LoweredLayer, owner_label, read
from .control_flow_body import BodyGraph, analyse, shown

__all__ = ["lower_conditional"]


def lower_conditional(
    network: INetworkDefinition, conditional: IIfConditional
) -> tuple[LoweredLayer | None, set[int]]:
    """The layer running ``conditional`` (None when it has no outputs) and the ids of the tensors inside it."""
    label = owner_label(conditional)
    condition = next((layer for layer in conditional._layers if isinstance(layer, IConditionLayer)), None)
    if condition is None:
        raise BuildError(f"{label} has no condition; call set_condition(tensor) with a 0-d BOOL tensor")
    inputs = [layer for layer in conditional._layers if isinstance(layer, IIfConditionalInputLayer)]
    outputs = [layer for layer in conditional._layers if isinstance(layer, IIfConditionalOutputLayer)]
    seeds = [layer.get_output(0) for layer in inputs]
    branches = [Interior(conditional, seeds, [read(layer, side) for layer in outputs]) for side in (0, 1)]
    inside = branches[0].tensors | branches[1].tensors
    for boundary in [condition, *inputs]:
        if id(read(boundary, 0)) in inside:
            raise BuildError(f"{label}: boundary {boundary.name!r} reads {read(boundary, 0).name!r}, which it computes")
    if not outputs:
        return None, inside
    op_inputs: list[ITensor] = [read(condition, 0), *(read(layer, 0) for layer in inputs)]
    seed_ids = {id(s) for s in seeds}
    for branch in branches:
        for tensor in branch.outer:
            if id(tensor) not in seed_ids and all(t is not tensor for t in op_inputs[1 + len(inputs) :]):
                op_inputs.append(tensor)
    plan = _IfPlan(conditional, condition, inputs, outputs, branches, op_inputs)
    return LoweredLayer(network, conditional, "if", op_inputs, [o.get_output(0) for o in outputs], plan), inside


class _IfPlan:
    """Works out the ``if`` operator's params and branches once the input types and shapes are built."""

    def __init__(
        self,
        conditional: IIfConditional,
        condition: IConditionLayer,
        inputs: list[IIfConditionalInputLayer],
        outputs: list[IIfConditionalOutputLayer],
        branches: list[Interior],
        op_inputs: list[ITensor],
    ) -> None:
        self.conditional, self.condition, self.inputs, self.outputs = conditional, condition, inputs, outputs
        self.branches, self.op_inputs = branches, op_inputs

    def __call__(self, infos: list[tuple[DataType, list[Any], Any]]) -> tuple[dict[str, Any], dict[str, Any], int]:
        label = owner_label(self.conditional)
        dtype, shape, _ = infos[0]
        if dtype != DataType.BOOL or shape:
            raise BuildError(
                f"{label}: condition layer {self.condition.name!r} needs a 0-d BOOL tensor, got "
                f"{read(self.condition, 0).name!r} ({dtype.name} of rank {len(shape)})"
            )
        params: dict[str, Any] = {}
        weights: dict[str, Any] = {}
        found = []
        for side, (name, branch) in enumerate(zip(("then", "else"), self.branches)):
            body = BodyGraph(f"{label} {'true' if side == 0 else 'false'} branch")
            positions = []
            for k, boundary in enumerate(self.inputs):
                body.add_input(boundary.get_output(0).name, infos[1 + k][0], infos[1 + k][1], 1 + k)
                positions.append(1 + k)
            seeds = {id(layer.get_output(0)) for layer in self.inputs}
            for tensor in branch.outer:
                if id(tensor) in seeds:
                    continue
                position = next(p for p, t in enumerate(self.op_inputs) if t is tensor and p > len(self.inputs))
                body.add_input(tensor.name, infos[position][0], infos[position][1], position)
                positions.append(position)
            body.add_layers(branch.layers)
            for out in self.outputs:
                body.add_result(read(out, side).name)
            model = body.model()
            found.append(analyse(body, model))
            params[f"{name}_inputs"] = positions
            weights[f"{name}_branch"] = np.frombuffer(model.SerializeToString(), dtype=np.uint8).copy()
        types, shapes, sizes = [], [], 0
        for out, (true_type, true_dims), (false_type, false_dims) in zip(self.outputs, found[0], found[1]):
            if true_type != false_type or len(true_dims) != len(false_dims):
                raise BuildError(
                    f"{label}: output out {out.name!r} is {shown(read(out, 0), true_type, true_dims)} when "
                    f"true and {shown(read(out, 1), false_type, false_dims)} when false; the branches must "
                    "agree in type and rank"
                )
            dims: list[Any] = []
            for first, second in zip(true_dims, false_dims):
                if first is None or second is None:
                    raise BuildError(f"{label}: the shape of output out {out.name!r} cannot be expressed at build time")
                if first == second:
                    dims.append(first)
                else:
                    dims.append(["s", sizes, ["op", "MAX", first, second]])
                    sizes += 1
            types.append(true_type)
            shapes.append(dims)
        params.update({"types": [t.name for t in types], "shapes": shapes, "num_sizes": sizes})
        return params, weights, sizes
