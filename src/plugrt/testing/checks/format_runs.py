"""Check ``format-accepted-runs``: every other combination the plugin accepts runs correctly.

A ``supports_format_combination`` that is too loose says yes to FP16 or to a
vectorised layout that ``enqueue`` does not handle; TensorRT may pick it (the
FP16 flag, a neighbour's layout) and the engine computes garbage. The check
runs each accepted alternative (the other float type; each vectorised format
for inputs of rank >= 3) on the same values and compares with the first
combination, within the tolerance of the less precise type.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.layouts import SUPPORTED_FORMATS
from ...core.types import DataType, TensorFormat
from ..context import CheckContext, compare_outputs
from ..driver import Combination
from ..hooks import HookError
from ..report import CheckFailedError

__all__ = ["check_format_accepted_runs"]

_FLOATS = (DataType.FLOAT, DataType.HALF)
_MAX_ALTERNATIVES = 6

Choice = tuple[DataType, TensorFormat]


def _input_variants(ctx: CheckContext, combo: Combination) -> list[tuple[Choice, ...]]:
    variants = []
    for dtype in _FLOATS:
        swapped = tuple((dtype, f) if t in _FLOATS else (t, f) for t, f in combo.inputs)
        variants.append(swapped)
    for fmt in SUPPORTED_FORMATS[1:]:
        laid = tuple((t, fmt) if r.rank >= 3 else (t, f) for (t, f), r in zip(combo.inputs, ctx.ranges))
        variants.append(laid)
    unique = []
    for variant in variants:
        if variant != combo.inputs and variant not in unique:
            unique.append(variant)
    return unique


def _complete(ctx: CheckContext, plugin: Any, combo: Combination, inputs: tuple[Choice, ...]) -> Combination | None:
    """The combination with these inputs if the plugin accepts them and some outputs, else None."""
    driver = ctx.driver
    count = len(inputs)
    rule = ctx.rule_of(plugin, [t for t, _ in inputs])
    positions = list(inputs) + list(combo.outputs)
    descs = [driver.question_desc(p, c, rule) for p, c in enumerate(positions)]
    for pos in range(count):
        if not driver.supports(plugin, pos, list(descs), count):
            return None
    outputs = []
    layout = inputs[0][1] if inputs else TensorFormat.LINEAR
    for index, dtype in enumerate(rule.types):
        pos = count + index
        options = [(dtype, layout)] if len(rule.exprs[index]) >= 3 else []
        options += [(dtype, TensorFormat.LINEAR)]
        for choice in options:
            descs[pos] = driver.question_desc(pos, choice, rule)
            if driver.supports(plugin, pos, list(descs), count):
                outputs.append(choice)
                break
        else:
            return None
    return Combination(inputs, tuple(outputs))


def _pick_sets(ctx: CheckContext) -> list[str]:
    labels = [s.label for s in ctx.shape_sets]
    return [label for label in ("opt", "max") if label in labels] or labels[:1]


def check_format_accepted_runs(ctx: CheckContext) -> str:
    """Each accepted alternative type/format combination gives the same results."""
    baseline = ctx.require_baseline("format-accepted-runs")
    ctx.require_deterministic()
    combo = ctx.combo
    plugin = ctx.fresh()
    alternatives = []
    for inputs in _input_variants(ctx, combo):
        found = _complete(ctx, plugin, combo, inputs)
        if found is not None:
            alternatives.append(found)
    alternatives = alternatives[:_MAX_ALTERNATIVES]
    if not alternatives:
        return f"{combo} is the only combination (of the float types and layouts tried) it accepts"
    problems = []
    for alt in alternatives:
        for label in _pick_sets(ctx):
            base = baseline[label]
            alt_inputs = [a.astype(np.dtype(t.nptype())) for a, (t, _) in zip(base.inputs, alt.inputs)]
            same_values = [a.astype(np.dtype(t.nptype())) for a, (t, _) in zip(alt_inputs, combo.inputs)]
            try:
                with ctx.session(alt) as session:
                    got = session.run(base.shape_set.shapes, alt_inputs)
                with ctx.session() as session:
                    expected = session.run(base.shape_set.shapes, same_values)
            except HookError as exc:
                problems.append(f"it accepts {alt} but fails with it: {exc}")
                break
            rtol, atol = ctx.tolerances([t for t, _ in alt.outputs + combo.outputs])
            difference = compare_outputs(expected.outputs, got.outputs, rtol, atol)
            damage = [] if expected.output_damage else got.output_damage  # new with this combination only
            if damage or difference:
                problems.append(
                    f"it accepts {alt}, but at {base.shape_set} "
                    + (f"enqueue wrote {damage[0]}" if damage else "")
                    + (f"its {difference} (compared with {combo})" if difference else "")
                )
                break
    if problems:
        raise CheckFailedError(
            "; ".join(problems[:3]) + ". supports_format_combination is too loose: TensorRT may choose any combination "
            "it accepts. Fix: accept only the types and formats enqueue handles, and read them from the descriptors"
        )
    names = "; ".join(str(a) for a in alternatives)
    return f"the other accepted combinations agree with {combo}: {names}"
