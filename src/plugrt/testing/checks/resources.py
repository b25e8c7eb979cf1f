"""Check ``initialize-terminate``: what a plugin acquires is released at the right owner.

Resources are tracked through :func:`plugrt.device_malloc` (``trt.live_allocations()``).
In TensorRT's order: the build instance is initialized, serialized, terminated and
destroyed; the engine's plugin is initialized once; context clones are made
from it without ``initialize`` and are destroyed (not terminated) when their
context goes; the engine's plugin is terminated and destroyed last. A new
context may be created after another one was destroyed.
"""

from __future__ import annotations

from typing import Any

from ...backends.memory import DeviceBuffer, live_allocations
from ..context import CheckContext
from ..hooks import HookError
from ..report import CheckFailedError

__all__ = ["check_initialize_terminate"]


def _new_since(before: set[DeviceBuffer]) -> list[DeviceBuffer]:
    return [b for b in live_allocations() if b not in before]


def _describe(buffers: list[DeviceBuffer]) -> str:
    sizes = ", ".join(f"{b.nbytes} bytes" for b in buffers[:4]) + (" ..." if len(buffers) > 4 else "")
    return f"{len(buffers)} device_malloc buffer(s) ({sizes})"


def _build_cycle(ctx: CheckContext, problems: list[str]) -> None:
    """initialize -> terminate twice on one build instance: each terminate releases what initialize took."""
    driver, combo = ctx.driver, ctx.combo
    adapter: Any = driver.adapter()
    adapter.begin_build(ctx.fresh())
    rule = driver.rule_with(adapter, [t for t, _ in combo.inputs])
    adapter.configure_build(driver.request(combo), driver.output_ports(rule, combo.outputs), 1)
    before = set(live_allocations())
    for cycle in (1, 2):
        adapter.initialize_build()
        acquired = _new_since(before)
        adapter.terminate_build()
        left = [b for b in acquired if b in live_allocations()]
        if left:
            problems.append(
                f"terminate() left {_describe(left)} that initialize() allocated"
                + (" (second initialize/terminate cycle)" if cycle == 2 else "")
            )
            break
    adapter.abort_build()


def check_initialize_terminate(ctx: CheckContext) -> str:
    """No device_malloc buffer outlives the plugin objects; contexts can come and go."""
    ctx.require_baseline("initialize-terminate")
    driver = ctx.driver
    problems: list[str] = []
    before = set(live_allocations())
    try:
        if driver.has_initialize:
            _build_cycle(ctx, problems)
        session = ctx.session()
        shape_set = ctx.shape_sets[0]
        inputs = ctx.inputs_for(shape_set)
        session.run(shape_set.shapes, inputs)
        session.detach(session.context)
        try:
            session.run(shape_set.shapes, inputs, plugin=session.attach())
        except HookError as exc:
            problems.append(
                f"a context created after another context's plugin was destroyed failed ({exc}): destroying a clone "
                "released something the engine's plugin still owns. Fix: a clone frees only what it allocated itself"
            )
        session.close(strict=True)
    except HookError as exc:
        if exc.owner != "initialize-terminate":
            ctx.blame("initialize-terminate", exc)
        raise CheckFailedError(str(exc)) from None
    leaked = _new_since(before)
    if leaked:
        where = "terminate()" if driver.has_initialize else "destroy()"
        problems.append(
            f"after every plugin object was terminated and destroyed in TensorRT's order, {_describe(leaked)} are "
            f"still allocated. Fix: free in {where} what the plugin allocated (and in destroy() what clone(), "
            "configure_plugin or enqueue allocated)"
        )
    if problems:
        raise CheckFailedError("; ".join(problems))
    if driver.has_initialize:
        return "initialize/terminate pairs release everything; contexts can be created after others are destroyed"
    return "no device_malloc buffer outlives the plugin objects (IPluginV3: destroy releases)"
