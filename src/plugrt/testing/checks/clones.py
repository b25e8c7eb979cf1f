"""Checks ``clone-independence`` and ``concurrency``: clones carry all state and share none.

Every execution context runs its own clone of the engine's plugin; contexts
are configured independently and may run at the same time on different threads.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from ..context import CheckContext, compare_outputs
from ..hooks import HookError
from ..report import CheckFailedError
from ..state import describe_change, shared_mutables, snapshot

__all__ = ["check_clone_independence", "check_concurrency"]

_THREAD_RUNS = 40


def _sets(ctx: CheckContext) -> tuple[Any, Any]:
    labels = {s.label: s for s in ctx.shape_sets}
    return labels.get("opt", ctx.shape_sets[0]), labels.get("max", ctx.shape_sets[-1])


def _sharing_hint(a: Any, b: Any) -> str:
    shared = shared_mutables(a, b)
    return (
        f" (the clone shares {', '.join('self.' + n for n in shared)} with it: copy those in clone())" if shared else ""
    )


def check_clone_independence(ctx: CheckContext) -> str:
    """Clones give the original's outputs, and configuring or running one leaves the others intact."""
    baseline = ctx.require_baseline("clone-independence")
    ctx.require_deterministic()
    small, large = _sets(ctx)
    problems = []
    with ctx.session() as session:
        engine, first = session.engine, session.context
        engine_before = snapshot(engine)
        run = session.run(large.shapes, baseline[large.label].inputs, plugin=first)
        change = describe_change(engine, engine_before, snapshot(engine))
        if change:
            problems.append(
                f"configuring and running a clone at {large} changed the original's {change}"
                + _sharing_hint(engine, first)
            )
        second = session.attach()
        first_before = snapshot(first)
        other = session.run(small.shapes, baseline[small.label].inputs, plugin=second)
        difference = compare_outputs(baseline[small.label].first.outputs, other.outputs)
        if difference:
            problems.append(f"a second clone at {small}: {difference}")
        change = describe_change(first, first_before, snapshot(first))
        if change:
            problems.append(
                f"configuring and running a second clone changed the first clone's {change}"
                + _sharing_hint(first, second)
            )
        run = session.run(large.shapes, baseline[large.label].inputs, plugin=first)
        difference = compare_outputs(baseline[large.label].first.outputs, run.outputs)
        if difference:
            problems.append(f"the first clone at {large}, after the second clone ran at {small}: {difference}")
    with ctx.session(clone=False) as session:  # the plugin as created, never cloned
        direct = session.run(small.shapes, baseline[small.label].inputs, plugin=session.engine)
    difference = compare_outputs(direct.outputs, baseline[small.label].first.outputs)
    if difference:
        problems.append(
            f"at {small}, the plugins TensorRT runs (clones of clones) differ from the plugin as created "
            f"({difference}): clone() does not copy all the state enqueue uses"
        )
    if problems:
        raise CheckFailedError(
            "; ".join(problems) + ". Each execution context owns a clone. Fix: clone() must copy every attribute "
            "(new lists, dicts and arrays, not references) so clones neither lose nor share state"
        )
    return f"clones match the original and stay independent at {small.label} and {large.label}"


def check_concurrency(ctx: CheckContext) -> str:
    """Two clones enqueued at the same time from two threads give the serial results."""
    ctx.require_baseline("concurrency")
    ctx.require_deterministic()
    shape_set = _sets(ctx)[0]
    errors: list[str] = []
    wrong = [0, 0]
    with ctx.session() as session:
        plugins = [session.context, session.attach()]
        data = [ctx.inputs_for(shape_set, variant=v) for v in (1, 2)]
        expected = [session.run(shape_set.shapes, d, plugin=p).outputs for d, p in zip(data, plugins)]
        start = threading.Barrier(2)

        def work(k: int) -> None:
            for _ in range(_THREAD_RUNS):
                try:  # both threads start each run together, so their enqueues overlap on any interpreter
                    start.wait(timeout=10)
                except threading.BrokenBarrierError:
                    return
                try:
                    run = session.run(shape_set.shapes, data[k], plugin=plugins[k])
                except HookError as exc:
                    errors.append(str(exc))
                    start.abort()
                    return
                if compare_outputs(expected[k], run.outputs):
                    wrong[k] += 1

        interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)
        try:
            threads = [threading.Thread(target=work, args=(k,)) for k in (0, 1)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            sys.setswitchinterval(interval)
    if errors or any(wrong):
        what = f"{sum(wrong)} of {2 * _THREAD_RUNS} runs gave wrong outputs" if any(wrong) else ""
        what += ("; " if what and errors else "") + (f"enqueue failed: {errors[0]}" if errors else "")
        raise CheckFailedError(
            f"two contexts (two clones) enqueued at the same time on two threads at {shape_set}: {what}. The plugin "
            "shares mutable state between clones (a class attribute, a module global, one scratch buffer). Fix: "
            "keep per-run data in the workspace or in attributes each clone owns"
        )
    return f"two clones on two threads, {_THREAD_RUNS} runs each at {shape_set.label}, match the serial results"
