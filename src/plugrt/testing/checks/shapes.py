"""Checks on what the shape hooks declare and what enqueue does with the buffers.

``output-shapes``: every element of every declared output is written (two runs
from two poison patterns), size tensors stay within their bound.
``guard-bytes``: nothing is written outside the buffers. ``inputs-unmodified``:
inputs are read-only. ``shape-hooks-pure``: type and shape hooks keep no state
and give the same answer every time, configured or not.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.types import DataType
from ...shape.builder import constant
from ..buffers import unwritten_mask
from ..context import CheckContext
from ..driver import OutputRule
from ..hooks import HookError
from ..report import CheckFailedError
from ..state import describe_change, snapshot

__all__ = ["check_guard_bytes", "check_inputs_unmodified", "check_output_shapes", "check_shape_hooks_pure"]


def _labels(ctx: CheckContext) -> str:
    return ", ".join(s.label for s in ctx.shape_sets)


def check_output_shapes(ctx: CheckContext) -> str:
    """The declared output shapes are exactly what enqueue writes, at every shape set."""
    baseline = ctx.require_baseline("output-shapes")
    problems = []
    rule = ctx.rule_of(ctx.fresh(), [t for t, _ in ctx.combo.inputs])
    for index in rule.size_tensors:
        if ctx.combo.outputs[index][0] not in (DataType.INT32, DataType.INT64):
            problems.append(
                f"size tensor output {index} is {ctx.combo.outputs[index][0].name}; it must be INT32 or INT64"
            )
    for base in baseline.values():
        problems += [f"at {base.shape_set}: {p}" for p in base.first.size_problems]
        for i, (first, second) in enumerate(zip(base.first.outputs, base.second.outputs)):
            if first.shape != second.shape:
                continue  # a data-dependent shape that changed between runs: determinism reports it
            mask = unwritten_mask(first, second)
            missing = int(np.count_nonzero(mask))
            if missing:
                where = tuple(int(v) for v in np.argwhere(mask)[0])
                problems.append(
                    f"at {base.shape_set}: output {i} has shape {first.shape} by the shape hook, but enqueue left "
                    f"{missing} of {first.size} elements unwritten (first at index {where})"
                )
    if problems:
        raise CheckFailedError(
            "; ".join(problems[:4])
            + ". Fix: make the shape hook describe exactly what enqueue writes, and write every element "
            "(output buffers are not cleared for you)"
        )
    shapes = ", ".join(f"{b.shape_set.label} {[o.shape for o in b.first.outputs]}" for b in baseline.values())
    return f"every output element is written at {shapes}"


def check_guard_bytes(ctx: CheckContext) -> str:
    """Enqueue writes nothing before or after its input and output buffers."""
    baseline = ctx.require_baseline("guard-bytes")
    problems = []
    for base in baseline.values():
        for run in (base.first, base.second):
            problems += [f"at {base.shape_set}: {p}" for p in run.output_damage + run.input_damage]
    if problems:
        unique = list(dict.fromkeys(problems))
        raise CheckFailedError(
            "enqueue wrote outside its buffers: " + "; ".join(unique[:4]) + ". Fix: take shapes from the descriptors "
            "enqueue receives (trt.as_array(ptr, desc)) and keep them equal to what the shape hook declares"
        )
    return f"guard bytes around every input and output intact at {_labels(ctx)}"


def check_inputs_unmodified(ctx: CheckContext) -> str:
    """Enqueue never writes into its inputs."""
    baseline = ctx.require_baseline("inputs-unmodified")
    problems = []
    for base in baseline.values():
        problems += [f"at {base.shape_set}: {p}" for p in base.first.modified_inputs]
    if problems:
        raise CheckFailedError(
            "enqueue modified its inputs: " + "; ".join(problems[:4]) + ". Inputs are read-only: other layers (and "
            "the next run) read the same buffer. Fix: compute into the outputs or the workspace"
        )
    return f"inputs unchanged by enqueue at {_labels(ctx)}"


def _constant_exprs(shapes: Any) -> list[list[Any]]:
    return [[constant(d) for d in shape] for shape in shapes]


def _same(a: OutputRule, b: OutputRule) -> bool:
    return a.types == b.types and a.exprs == b.exprs


def _values(ctx: CheckContext, rule: OutputRule, shapes: Any) -> list[tuple[int, ...]]:
    return rule.upper_shapes(ctx.driver.env(shapes))


def _configured_rules(ctx: CheckContext) -> list[OutputRule]:
    """The shape hooks' answers from a configured engine plugin and a configured, run context plugin."""
    rules = []
    try:
        with ctx.session() as session:
            session.run(ctx.shape_sets[-1].shapes, ctx.inputs_for(ctx.shape_sets[-1]))
            for plugin in (session.engine, session.context):
                try:
                    rules.append(ctx.rule_of(plugin))
                except HookError:
                    pass  # a runtime-only copy may not offer the build hooks
    except HookError:
        pass  # the plugin cannot run: other checks report why
    return rules


def check_shape_hooks_pure(ctx: CheckContext) -> str:
    """Type and shape hooks change no state and answer the same for the same inputs."""
    driver = ctx.driver
    types_hook, shapes_hook = driver.shape_hooks
    plugin = ctx.fresh()
    problems = []
    before = snapshot(plugin)
    driver.output_types(plugin, list(ctx.input_types))
    after_types = snapshot(plugin)
    change = describe_change(plugin, before, after_types)
    if change:
        problems.append(f"{types_hook} changed {change}")
    first = ctx.rule_of(plugin)
    after_shapes = snapshot(plugin)
    change = describe_change(plugin, after_types, after_shapes)
    if change:
        problems.append(f"{shapes_hook} changed {change}")
    for shape_set in (ctx.shape_sets[0], ctx.shape_sets[-1]):
        concrete = driver.rule(plugin, list(ctx.input_types), _constant_exprs(shape_set.shapes))
        expected = _values(ctx, first, shape_set.shapes)
        got = [tuple(e.bounds({}, {})[1] for e in dims) for dims in concrete.exprs]
        if got != expected:
            problems.append(
                f"{shapes_hook} gives {got} for constant dims {list(shape_set.shapes)} but {expected} when the same "
                "dims are symbolic; the answer must depend only on the dims' values"
            )
    again = ctx.rule_of(plugin)
    if not _same(first, again):
        problems.append(f"{shapes_hook} answered differently when asked again ({first.exprs} then {again.exprs})")
    change = describe_change(plugin, before, snapshot(plugin))
    if change and not problems:
        problems.append(f"the shape hooks changed {change}")
    for configured in _configured_rules(ctx):
        if not _same(first, configured):
            problems.append(
                f"after configure_plugin and enqueue, {shapes_hook} answers {configured.exprs} instead of "
                f"{first.exprs}: it reads state set by configure"
            )
            break
    if problems:
        raise CheckFailedError(
            "; ".join(problems) + ". TensorRT calls these hooks any number of times, on any copy, before and after "
            f"configure. Fix: make {types_hook} and {shapes_hook} pure functions of their arguments and the fields"
        )
    return f"{types_hook} and {shapes_hook} are pure and repeatable"
