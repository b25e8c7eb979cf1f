"""Checks on running: ``reconfigure``, ``workspace``, ``determinism``, ``stream``, ``reference`` (``stream-gpu`` has its own module)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..context import CheckContext, compare_outputs
from ..hooks import HookError
from ..report import CheckFailedError, CheckSkippedError

__all__ = [
    "check_determinism",
    "check_reconfigure",
    "check_reference",
    "check_stream",
    "check_workspace",
]

#: Stream handles tried on the CPU, where a stream is an opaque integer.
STREAM_HANDLES = (0x7F3A1C00, 1, (1 << 40) + 8)


def check_reconfigure(ctx: CheckContext) -> str:
    """One context moved between shapes gives what a fresh plugin gives at each."""
    baseline = ctx.require_baseline("reconfigure")
    ctx.require_deterministic()
    if len(ctx.shape_sets) == 1:
        return "build-time configuration with the profile's range works (static shapes: nothing to reconfigure)"
    order = ctx.shape_sets[1:] + ctx.shape_sets[:1] + ctx.shape_sets[1:2]
    problems = []
    previous = ctx.shape_sets[0]
    with ctx.session() as session:
        session.run(previous.shapes, baseline[previous.label].inputs)
        for shape_set in order:
            try:
                run = session.run(shape_set.shapes, baseline[shape_set.label].inputs)
            except HookError as exc:
                problems.append(f"moving from {previous} to {shape_set}: {exc}")
                break
            difference = compare_outputs(baseline[shape_set.label].first.outputs, run.outputs)
            if difference:
                problems.append(f"at {shape_set} after {previous.label}: {difference}")
            previous = shape_set
    if problems:
        raise CheckFailedError(
            "a context that changes shapes computes something different from a fresh plugin: "
            + "; ".join(problems[:3])
            + ". enqueue uses state left from an earlier configuration. Fix: recompute everything shape-dependent "
            "each time configure_plugin/on_shape_change is called, or read shapes from enqueue's descriptors"
        )
    return (
        "reconfiguring one context through " + " -> ".join(s.label for s in [ctx.shape_sets[0], *order]) + " is exact"
    )


def check_workspace(ctx: CheckContext) -> str:
    """The declared workspace is enough, and enqueue never reads workspace bytes it did not write."""
    baseline = ctx.require_baseline("workspace")
    ctx.require_deterministic()
    problems = []
    for base in baseline.values():
        for run in (base.first, base.second):
            if run.workspace_damage:
                problems.append(f"at {base.shape_set}: enqueue wrote past the {run.workspace_damage}")
    size = 0
    for base in baseline.values():
        with ctx.session() as session:  # a fresh plugin per shape set: reconfiguring is another check
            size = session.workspace
            if size:
                for fill in (0x00, 0xFF):
                    run = session.run(base.shape_set.shapes, base.inputs, workspace_fill=fill)
                    difference = compare_outputs(base.first.outputs, run.outputs)
                    if difference:
                        problems.append(
                            f"at {base.shape_set}, with the workspace starting as 0x{fill:02X} bytes: {difference}; "
                            "enqueue reads workspace bytes it did not write (the workspace is not cleared for you)"
                        )
                        break
    if problems:
        raise CheckFailedError(
            "; ".join(list(dict.fromkeys(problems))[:3]) + f". get_workspace_size returned {size} bytes. Fix: "
            "return the bytes enqueue needs at the profile's max shapes, and initialise what you read"
        )
    if not size:
        return "declares no workspace and enqueue does not use one"
    return f"{size} bytes of workspace suffice at every shape set and their initial contents do not matter"


def check_determinism(ctx: CheckContext) -> str:
    """The same inputs give bit-identical outputs, run after run and plugin after plugin."""
    baseline = ctx.require_baseline("determinism")
    problem = ctx.nondeterminism()
    for base in baseline.values() if problem is None else ():
        with ctx.session() as session:  # a fresh plugin per shape set: reconfiguring is another check
            for attempt in range(2):
                run = session.run(base.shape_set.shapes, base.inputs)
                difference = compare_outputs(base.first.outputs, run.outputs)
                if difference:
                    problem = f"at {base.shape_set}, run {attempt + 1} of a second plugin: {difference}"
                    break
        if problem:
            break
    if problem:
        raise CheckFailedError(
            f"identical inputs gave different outputs ({problem}). Fix: enqueue must not depend on hidden state "
            "(call counters, unseeded randomness, memory it did not write)"
        )
    return "repeated runs and separate contexts give bit-identical outputs"


def check_stream(ctx: CheckContext) -> str:
    """On the CPU a stream is an opaque handle: outputs must not depend on its value."""
    baseline = ctx.require_baseline("stream")
    ctx.require_deterministic()
    base = next((b for b in baseline.values() if b.shape_set.label == "opt"), next(iter(baseline.values())))
    problems = []
    with ctx.session() as session:
        for handle in STREAM_HANDLES:
            try:
                run = session.run(base.shape_set.shapes, base.inputs, stream=handle)
            except HookError as exc:
                problems.append(f"with stream handle {handle:#x}: {exc}")
                continue
            difference = compare_outputs(base.first.outputs, run.outputs)
            if difference:
                problems.append(f"with stream handle {handle:#x}: {difference}")
    if problems:
        raise CheckFailedError(
            "enqueue behaves differently on another stream: " + "; ".join(problems[:2]) + ". TensorRT passes each "
            "context's stream; a plugin that assumes the default stream (0) breaks there. Fix: do all work on the "
            "stream enqueue receives (on the GPU: cupy.cuda.ExternalStream(stream))"
        )
    return "outputs do not depend on the stream handle (the GPU ordering check is stream-gpu)"


def _as_outputs(value: Any) -> list[np.ndarray]:
    if isinstance(value, np.ndarray) or np.isscalar(value):
        return [np.asarray(value)]
    if isinstance(value, Sequence):
        return [np.asarray(v) for v in value]
    return [np.asarray(value)]


def check_reference(ctx: CheckContext) -> str:
    """Outputs match the user's reference function within the dtype's tolerance."""
    if ctx.reference is None:
        raise CheckSkippedError("no reference function given (check_plugin(..., reference=lambda *inputs: outputs))")
    baseline = ctx.require_baseline("reference")
    types = [t for t, _ in ctx.combo.outputs]
    rtol, atol = ctx.tolerances(types)
    for base in baseline.values():
        try:
            expected = _as_outputs(ctx.reference(*base.inputs))
        except Exception as exc:
            raise CheckFailedError(
                f"the reference function raised {type(exc).__name__}: {exc} at {base.shape_set}"
            ) from exc
        got = base.first.outputs
        if len(expected) < len(got):
            got = got[: len(expected)]  # the reference may omit trailing outputs
        difference = compare_outputs([e.astype(g.dtype, copy=False) for e, g in zip(expected, got)], got, rtol, atol)
        if difference:
            raise CheckFailedError(
                f"at {base.shape_set}: {difference} (rtol {rtol:g}, atol {atol:g}). Fix the kernel, or the "
                "reference if it is the one that is wrong"
            )
    return f"matches the reference at every shape set (rtol {rtol:g}, atol {atol:g})"
