"""Re-run every standard layer's type and shape rules on a loaded plan.

A plan's checksums prove it is the file that was written, not that a builder
wrote it: a hand-edited header can keep valid checksums and still ask a
convolution for a ``[3, 100000000]`` kernel. Before anything runs, each
operator is revived from its parameters and weights and its rules are applied
to the plan's own input shapes (in layer order, shape-tensor values carried
along as the builder carries them). The outputs must have the types, ranks and
sizes the plan records, at every profile's min, opt and max, and no dimension
may be negative there: exactly what the builder would have accepted.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import PlanFormatError, PlugrtError
from ..nodes.shape_checks import BroadcastCheck, broadcast_checks, check_at_points, profile_points
from ..ops.base import Operator, create_operator
from ..shape.expr import IDimensionExpr
from .plan import EnginePlan, LayerPlan, profile_envs

__all__ = ["check_layer_rules", "revive_operator"]

Interval = tuple[int, int]


def _fail(message: str) -> PlanFormatError:
    return PlanFormatError(f"plan is inconsistent: {message}")


def revive_operator(plan: EnginePlan, layer: LayerPlan) -> Operator:
    """The operator of standard layer ``layer``; bad parameters raise :class:`PlanFormatError` naming the layer."""
    try:
        op = create_operator(layer.kind, layer.params, {k: plan.weights[v] for k, v in layer.weights.items()})
    except PlanFormatError:
        raise
    except Exception as exc:  # any constructor failure is the plan's fault, whatever its type
        raise _fail(f"layer {layer.name!r} ({layer.kind}) has bad parameters: {type(exc).__name__}: {exc}") from None
    op.name = layer.name
    return op


def check_layer_rules(plan: EnginePlan) -> list[BroadcastCheck]:
    """Raise :class:`PlanFormatError` unless every standard layer's rules give the plan's recorded outputs.

    Returns the broadcast checks the rules recorded (already passed at every
    profile's min, opt and max), for the execution context to apply at shape change.
    """
    points = profile_points([profile_envs(plan, p) for p in range(len(plan.profiles))])
    envs = [dict(env) for _, env in points]
    values: dict[int, list[IDimensionExpr] | None] = {}
    checks: list[BroadcastCheck] = []
    for layer in plan.layers:
        if layer.is_plugin:
            continue
        op = revive_operator(plan, layer)
        label = f"layer {layer.name!r} ({layer.kind})"
        inputs = [plan.tensors[i] for i in layer.inputs]
        in_shapes = [t.shape for t in inputs]
        in_values = [values.get(i) for i in layer.inputs]
        try:
            types = op.output_types([t.dtype for t in inputs])
            shapes = op.output_shapes(in_shapes, in_values)
            out_values = op.output_values(in_shapes, in_values)
        except PlugrtError as exc:
            raise _fail(f"{label} does not accept its inputs: {exc}") from None
        except Exception as exc:
            raise _fail(f"{label} does not accept its inputs: {type(exc).__name__}: {exc}") from None
        layer_checks = broadcast_checks(op, layer.name)
        check_at_points(layer_checks, points, PlanFormatError)
        checks += layer_checks
        if len(shapes) != len(layer.outputs) or len(types) != len(layer.outputs):
            raise _fail(f"{label} has {len(layer.outputs)} outputs; its operator makes {len(shapes)}")
        for k, index in enumerate(layer.outputs):
            recorded = plan.tensors[index]
            if types[k] != recorded.dtype:
                raise _fail(f"{label} output {recorded.name!r} is {recorded.dtype.name}; its operator makes {types[k].name}")
            _compare(label, recorded.name, list(shapes[k]), recorded.shape, envs)
            values[index] = out_values[k] if k < len(out_values) else None
    for tensor in plan.tensors:
        for env in envs:
            for axis, dim in enumerate(tensor.shape):
                low, _ = _interval(dim, env, tensor.name)
                if low < 0:
                    raise _fail(f"tensor {tensor.name!r} axis {axis} is {low} for profile shapes {env}; must be >= 0")
    return checks


def _compare(
    label: str, name: str, rule: list[IDimensionExpr], recorded: list[IDimensionExpr], envs: list[dict[str, int]]
) -> None:
    if len(rule) != len(recorded):
        raise _fail(f"{label} output {name!r} has rank {len(recorded)}; its operator makes rank {len(rule)}")
    for env in envs:
        for axis, (made, kept) in enumerate(zip(rule, recorded)):
            if (made.symbols() | kept.symbols()) - set(env):
                continue  # a data-dependent size: its symbol is the layer's own
            if _interval(made, env, name) != _interval(kept, env, name):
                raise _fail(
                    f"{label} output {name!r} axis {axis} is {_interval(kept, env, name)[0]} in the plan but its "
                    f"operator makes {_interval(made, env, name)[0]} (profile shapes {env})"
                )


def _interval(dim: IDimensionExpr, env: dict[str, int], name: str) -> Any:
    try:
        return dim.bounds(env, env)
    except PlugrtError as exc:
        raise _fail(f"tensor {name!r}: {exc}") from None
    except (OverflowError, ZeroDivisionError, ValueError) as exc:
        raise _fail(f"tensor {name!r}: {type(exc).__name__}: {exc}") from None
