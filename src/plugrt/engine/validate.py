"""Consistency checks of a plan read from bytes, before anything runs it.

Checksums catch damage; these checks catch plans that are well-formed but
inconsistent (hand-edited or hostile): IO tensors that do not match their
declared shapes, symbols with no input behind them, profiles of the wrong rank,
layers that read tensors nobody wrote, memory placed outside the arena. A plan
that passes cannot make plugrt view memory it did not size.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..core.errors import PlanFormatError, PlugrtError
from ..interfaces.adapters import PluginAdapter
from ..nodes.ports import Port, ProfileDims
from ..nodes.shape_checks import BroadcastCheck
from ..shape.expr import IDimensionExpr
from .layer_rules import check_layer_rules
from .limits import check_plan_allocations
from .plan import EnginePlan, LayerPlan, profile_envs, tensor_max_bytes

__all__ = ["check_revived_plugin", "validate_plan"]

_ROLES = ("input", "output", "internal", "constant")


def _fail(message: str) -> PlanFormatError:
    return PlanFormatError(f"plan is inconsistent: {message}")


def validate_plan(plan: EnginePlan) -> list[BroadcastCheck]:
    """Raise :class:`PlanFormatError` unless ``plan`` is internally consistent.

    Returns the broadcast checks its layers need whenever input shapes change.
    """
    _check_io(plan)
    _check_symbols_and_profiles(plan)
    _check_layers(plan)
    checks = check_layer_rules(plan)
    _check_memory(plan)
    check_plan_allocations(plan, "plan")
    return checks


def _check_io(plan: EnginePlan) -> None:
    names = [plan.tensors[i].name for i in plan.io]
    if len(set(names)) != len(names) or len(set(plan.io)) != len(plan.io):
        raise _fail(f"IO tensor names repeat: {names}")
    if set(plan.io_shapes) != set(names):
        raise _fail(f"io_shapes names {sorted(plan.io_shapes)} differ from the IO tensors {sorted(names)}")
    for index, tensor in enumerate(plan.tensors):
        if tensor.role not in _ROLES:
            raise _fail(f"tensor {tensor.name!r} has unknown role {tensor.role!r}")
        if (tensor.role in ("input", "output")) != (index in plan.io):
            raise _fail(
                f"tensor {tensor.name!r} has role {tensor.role!r} but is {'' if index in plan.io else 'not '}an IO tensor"
            )
        if len(tensor.shape) > 8:
            raise _fail(f"tensor {tensor.name!r} has {len(tensor.shape)} dimensions; at most 8")
        for dim in tensor.shape:
            if dim.is_constant() and dim.get_constant_value() < 0:
                raise _fail(f"tensor {tensor.name!r} has a negative dimension {dim}")
    for index in plan.io:
        tensor = plan.tensors[index]
        declared = plan.io_shapes[tensor.name]
        if len(declared) != len(tensor.shape):
            raise _fail(f"IO tensor {tensor.name!r} has rank {len(tensor.shape)} but io_shapes says {declared}")
        if tensor.role != "input":
            for axis, (dim, size) in enumerate(zip(tensor.shape, declared)):
                fixed = dim.get_constant_value() if dim.is_constant() else -1
                if fixed != size:
                    raise _fail(f"output {tensor.name!r} axis {axis} is {dim} but its declared size is {size}")
            continue
        for axis, (dim, size) in enumerate(zip(tensor.shape, declared)):
            expected_symbol = f"{tensor.name}[{axis}]"
            ok = (dim.is_constant() and size >= 0 and dim.get_constant_value() == size) or (
                size == -1
                and dim.symbol == expected_symbol
                and not dim.is_size_tensor()
                and plan.symbols.get(expected_symbol) == (tensor.name, axis)
            )
            if not ok:
                raise _fail(f"input {tensor.name!r} axis {axis} is {dim} but its declared size is {size}")


def _check_symbols_and_profiles(plan: EnginePlan) -> None:
    inputs = {
        plan.tensors[i].name: plan.io_shapes[plan.tensors[i].name] for i in plan.io if plan.tensors[i].role == "input"
    }
    for sym, (name, axis) in plan.symbols.items():
        if name not in inputs or not 0 <= axis < len(inputs[name]) or inputs[name][axis] != -1:
            raise _fail(f"symbol {sym!r} refers to {name!r} axis {axis}, which is not a dynamic input axis")
    for p, profile in enumerate(plan.profiles):
        if set(profile.shapes) != set(inputs):
            raise _fail(f"profile {p} sets shapes for {sorted(profile.shapes)}; the inputs are {sorted(inputs)}")
        for name, (lo, opt, hi) in profile.shapes.items():
            declared = inputs[name]
            if not len(lo) == len(opt) == len(hi) == len(declared):
                raise _fail(f"profile {p} shapes of {name!r} do not have the input's rank {len(declared)}")
            for axis, (a, b, c, d) in enumerate(zip(lo, opt, hi, declared)):
                if not 0 <= a <= b <= c or (d >= 0 and not a == c == d):
                    raise _fail(f"profile {p} gives {name!r} axis {axis} min {a}, opt {b}, max {c} (declared {d})")


def _check_layers(plan: EnginePlan) -> None:
    size_symbols = {sym for layer in plan.layers for sym in layer.size_outputs.values()}
    known = set(plan.symbols) | size_symbols
    for tensor in plan.tensors:
        for dim in tensor.shape:
            unknown = dim.symbols() - known
            if unknown:
                raise _fail(f"tensor {tensor.name!r} depends on unknown dimension(s) {sorted(unknown)}")
    written = {i for i in plan.io if plan.tensors[i].role == "input"}
    for layer in plan.layers:
        for i in layer.inputs + layer.shape_inputs:
            if i not in written:
                raise _fail(f"layer {layer.name!r} reads tensor {plan.tensors[i].name!r} before any layer writes it")
        for i in layer.outputs:
            if i in written:
                raise _fail(f"tensor {plan.tensors[i].name!r} is written twice (again by layer {layer.name!r})")
            written.add(i)
        for output in layer.size_outputs:
            if not 0 <= output < len(layer.outputs) or plan.tensors[layer.outputs[output]].shape:
                raise _fail(f"layer {layer.name!r} declares size tensor output {output}, which is not a 0-d output")
    missing = [plan.tensors[i].name for i in plan.io if plan.tensors[i].role == "output" and i not in written]
    if missing:
        raise _fail(f"output(s) {missing} are written by no layer")


def _check_memory(plan: EnginePlan) -> None:
    for p, profile in enumerate(plan.profiles):
        low, _, high = profile_envs(plan, p)
        needs_arena = [i for i, t in enumerate(plan.tensors) if t.role in ("internal", "constant")]
        for index in needs_arena:
            if index not in profile.offsets:
                raise _fail(f"profile {p} has no memory for tensor {plan.tensors[index].name!r}")
        for index, offset in profile.offsets.items():
            size = _bytes(plan, index, low, high)
            if offset < 0 or offset + size > profile.arena_size:
                raise _fail(
                    f"profile {p} puts tensor {plan.tensors[index].name!r} ({size} bytes at {offset}) outside the arena"
                )
        for step, offset in profile.workspace_offsets.items():
            if offset < 0 or offset + plan.layers[step].workspace > profile.arena_size:
                raise _fail(f"profile {p} puts the workspace of layer {plan.layers[step].name!r} outside the arena")
        for step, layer in enumerate(plan.layers):
            if layer.workspace and step not in profile.workspace_offsets:
                raise _fail(f"profile {p} has no workspace for layer {layer.name!r}")


def _bytes(plan: EnginePlan, index: int, low: dict[str, int], high: dict[str, int]) -> Any:
    try:
        return tensor_max_bytes(plan.tensors[index], low, high)
    except PlugrtError as exc:
        raise _fail(f"tensor {plan.tensors[index].name!r}: {exc}") from None


def check_revived_plugin(
    plan: EnginePlan,
    layer: LayerPlan,
    adapter: PluginAdapter,
    plugin: Any,
    tensor_range: Callable[[int, int], ProfileDims],
) -> None:
    """Raise :class:`PlanFormatError` unless ``plugin``, revived from ``layer``'s record, gives the output shapes
    the plan records for the layer (the shapes its memory was planned for).

    The plugin's output-shape hook is asked on a throwaway clone, with the plan's input shapes
    (``tensor_range``: a tensor's dims in a profile) and shape-input values. Shapes equal as expressions
    pass; others must agree at every profile's min, opt and max shapes and over each profile's whole range.
    """
    profiles = range(len(plan.profiles))
    ports = [
        Port(list(t.shape), [tensor_range(i, p) for p in profiles], t.dtype, t.format)
        for i, t in ((i, plan.tensors[i]) for i in layer.inputs)
    ]
    shape_ports = [Port([], [], values=plan.tensors[i].values) for i in layer.shape_inputs]
    try:
        shapes = adapter.revived_output_shapes(plugin, ports, shape_ports)
        if shapes is None:
            return
        problem = _shape_difference(plan, shapes, [plan.tensors[i].shape for i in layer.outputs])
    except PlanFormatError:
        raise
    except Exception as exc:
        detail = str(exc) if isinstance(exc, PlugrtError) else f"{type(exc).__name__}: {exc}"
        raise PlanFormatError(
            f"plan layer {layer.name!r}: its revived plugin could not be asked for its output shapes: {detail}"
        ) from exc
    if problem:
        raise PlanFormatError(
            f"plan does not match its plugin record: {adapter.describe_shapes(plugin)} {problem}; the plan's memory "
            "was planned for the recorded shapes"
        )


def _shape_difference(
    plan: EnginePlan, shapes: Sequence[Sequence[IDimensionExpr]], recorded: Sequence[Sequence[IDimensionExpr]]
) -> str:
    """'' when the plugin's ``shapes`` agree with the plan's ``recorded`` ones, else how they differ."""
    if len(shapes) != len(recorded):
        return f"gives {len(shapes)} output shapes, but the layer has {len(recorded)} outputs in the plan"
    for k, (got, want) in enumerate(zip(shapes, recorded)):
        if list(got) == list(want):
            continue
        where = f"gives output {k} the shape {_text(got)} where the plan records {_text(want)}"
        if len(got) != len(want):
            return f"{where} (rank {len(got)}, not {len(want)})"
        for p in range(len(plan.profiles)):
            low, opt, high = profile_envs(plan, p)
            for label, a, b in (("min", low, low), ("opt", opt, opt), ("max", high, high), ("range", low, high)):
                values = [[d.bounds(a, b) for d in dims] for dims in (got, want)]
                if values[0] != values[1]:
                    shown = [[f"{lo}" if lo == hi else f"{lo}..{hi}" for lo, hi in v] for v in values]
                    at = f"over profile {p}'s range" if label == "range" else f"at profile {p}'s {label} shapes"
                    return f"{where}: {at}, [{', '.join(shown[0])}] against [{', '.join(shown[1])}]"
    return ""


def _text(dims: Sequence[IDimensionExpr]) -> str:
    text = "[" + ", ".join(repr(d) for d in dims) + "]"
    return text if len(text) <= 400 else text[:397] + "..."
