"""A session drives one plugin like an engine with execution contexts, on buffers the checker owns.

Every step is an adapter call, in the order the builder and the runtime make them.
Build: clone of the network's plugin (or, with ``clone=False``, the network's
plugin itself, to compare with its clones), output types and shapes, the format
questions, configuration for the checker's profile, workspace size, initialize.
Then either the build instance serves as the engine's plugin (``adopt_build``), or
(``via_payload``) it is serialized, torn down and recreated through the creator,
as a plan load does. Each context gets a clone (``attach``) and runs it as the
engine does: through a :class:`~plugrt.interfaces.adapters.PluginNode`, bound
(the plugin told the shapes, the run hook's arguments made) when its shapes or
buffers change, then launched, on guarded buffers poisoned again for every run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from ..backends.registry import DEFAULT_DEVICE
from ..core.dims import Dims, volume
from ..core.layouts import from_storage, storage_shape, to_storage
from ..core.types import TensorFormat
from ..interfaces.adapters import PluginNode
from ..interfaces.descriptors import PluginTensorDesc
from ..interfaces.v3 import IPluginResourceContext
from ..nodes.base import Binding
from .buffers import POISON_A, GuardedBuffer
from .driver import Combination

__all__ = ["RunResult", "Session"]

Shapes = Sequence[Sequence[int]]


@dataclass
class RunResult:
    """What one enqueue produced and what it broke."""

    outputs: list[np.ndarray]
    output_damage: list[str] = field(default_factory=list)
    input_damage: list[str] = field(default_factory=list)
    modified_inputs: list[str] = field(default_factory=list)
    workspace_damage: str = ""
    size_problems: list[str] = field(default_factory=list)


@dataclass
class _Bound:
    """One plugin's node, bound to guarded buffers for one set of input shapes."""

    key: tuple[tuple[int, ...], ...]
    inputs: list[GuardedBuffer]
    outputs: list[GuardedBuffer]
    scratch: GuardedBuffer | None
    in_descs: list[PluginTensorDesc]
    out_descs: list[PluginTensorDesc]


class Session:
    """One engine-side plugin plus context clones, driven through one adapter and run as engine nodes."""

    def __init__(
        self, ctx: Any, combo: Combination, *, network: Any = None, via_payload: bool = False, clone: bool = True
    ) -> None:
        self.driver = driver = ctx.driver
        self.combo = combo
        self.network = network if network is not None else ctx.fresh()
        self.payload: bytes | None = None
        self.contexts: list[Any] = []
        self._nodes: dict[int, PluginNode] = {}
        self._bound: dict[int, _Bound] = {}
        self.engine: Any = None
        self.adapter = adapter = driver.adapter()
        if clone:
            adapter.begin_build(self.network)
        else:
            adapter.use_build_instance(self.network)
        self.rule = driver.rule_with(adapter, [t for t, _ in combo.inputs])
        driver.ask_all(adapter, combo, self.rule)
        request, outputs = driver.request(combo), driver.output_ports(self.rule, combo.outputs)
        self.workspace = adapter.configure(request, outputs, 1)
        if via_payload:
            built = adapter.serialize_build()  # a wrong declared size is serialization-size's finding
            self.payload = built.payload
            self.engine = driver.revive(adapter, ctx.creator, built.payload, built.tactic)
        else:
            self.engine = adapter.adopt_build()
        self._input_ranges = driver.input_ranges()
        self._output_ranges = self.rule.ranges(driver.profile_envs())
        self.context = self.attach()

    def attach(self) -> Any:
        """A new execution context's plugin (a clone of the engine's plugin)."""
        plugin = self.adapter.attach(self.engine, IPluginResourceContext(DEFAULT_DEVICE))
        self.contexts.append(plugin)
        return plugin

    def detach(self, plugin: Any) -> None:
        """Tear down one context's plugin (its node's release)."""
        self.contexts.remove(plugin)
        self._bound.pop(id(plugin), None)
        node = self._nodes.pop(id(plugin), None)
        if node is not None:
            node.release()
        else:
            self.adapter.detach(plugin)

    def close(self, strict: bool = False) -> None:
        """Contexts first, then the engine's plugin, then the network's (errors ignored unless ``strict``)."""
        steps: list[Callable[[], None]] = [partial(self.detach, p) for p in list(self.contexts)]
        if self.engine is not None:
            steps.append(partial(self.adapter.release, self.engine))
        if self.network is not self.engine:
            steps.append(partial(self.driver.destroy, self.network))
        self.engine = None
        self._nodes.clear()
        self._bound.clear()
        for step in steps:
            try:
                step()
            except Exception:
                if strict:
                    raise

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- running ------------------------------------------------------------------
    def node(self, plugin: Any) -> PluginNode:
        """The engine node running ``plugin`` (a context's plugin, or the engine's own)."""
        found = self._nodes.get(id(plugin))
        if found is None:
            found = self._nodes[id(plugin)] = PluginNode.for_context(self.adapter, plugin)
        return found

    def run(
        self,
        shapes: Shapes,
        inputs: Sequence[np.ndarray],
        *,
        plugin: Any = None,
        poison: int = POISON_A,
        workspace_fill: int = 0xAB,
        stream: int = 0,
    ) -> RunResult:
        """Launch ``plugin``'s node once (bound first when the shapes changed); ``inputs`` are LINEAR arrays
        of the input types. The buffers are guarded, outputs filled with ``poison``, the workspace with
        ``workspace_fill``."""
        plugin = self.context if plugin is None else plugin
        key = tuple(tuple(int(d) for d in s) for s in shapes)
        bound = self._bound.get(id(plugin))
        if bound is None or bound.key != key:
            bound = self._bind(plugin, key)
        for array, desc, buf in zip(inputs, bound.in_descs, bound.inputs):
            buf.reset()
            dtype = np.dtype(desc.type.nptype())
            store = storage_shape(tuple(desc.dims), desc.format)
            to_storage(np.asarray(array, dtype=dtype), desc.format, buf.view(store, dtype))
        for buf in bound.outputs:
            buf.reset(poison)
        if bound.scratch is not None:
            bound.scratch.reset(workspace_fill)
        written = [bytes(b.data) for b in bound.inputs]
        self.node(plugin).launch(stream)
        outputs, size_problems = self._read_outputs(key, bound.outputs, bound.out_descs)
        result = RunResult(outputs, size_problems=size_problems)
        for i, buf in enumerate(bound.outputs):
            text = buf.damage_text(f"output {i}")
            if text:
                result.output_damage.append(text)
        for i, (buf, before) in enumerate(zip(bound.inputs, written)):
            text = buf.damage_text(f"input {i}")
            if text:
                result.input_damage.append(text)
            if bytes(buf.data) != before:
                changed = int(np.count_nonzero(np.frombuffer(before, np.uint8) != buf.data))
                result.modified_inputs.append(f"input {i}: {changed} of {buf.nbytes} bytes changed")
        if bound.scratch is not None:
            result.workspace_damage = bound.scratch.damage_text("workspace")
        return result

    def _bind(self, plugin: Any, key: tuple[tuple[int, ...], ...]) -> _Bound:
        """New guarded buffers for input shapes ``key`` (outputs at their upper bound), and the node bound to
        them: as an engine binds its nodes at shape change (the plugin's configure_plugin / on_shape_change)."""
        uppers = self.rule.upper_shapes(self.driver.env(key))
        ins = [_guarded(s, c, r) for s, c, r in zip(key, self.combo.inputs, self._input_ranges)]
        outs = [_guarded(s, c, r) for s, c, r in zip(uppers, self.combo.outputs, self._output_ranges)]
        scratch = GuardedBuffer(self.workspace) if self.workspace else None
        self.node(plugin).bind([b for b, _ in ins], [b for b, _ in outs], scratch.ptr if scratch is not None else 0)
        bound = _Bound(
            key, [g for _, g in ins], [g for _, g in outs], scratch, [b.desc for b, _ in ins], [b.desc for b, _ in outs]
        )
        self._bound[id(plugin)] = bound
        return bound

    def _read_outputs(
        self, shapes: Shapes, bufs: list[GuardedBuffer], descs: list[PluginTensorDesc]
    ) -> tuple[list[np.ndarray], list[str]]:
        env = self.driver.env(shapes)
        problems: list[str] = []
        for index, leaf in self.rule.size_tensors.items():
            desc = descs[index]
            value = int(bufs[index].view((), np.dtype(desc.type.nptype()))[()])
            upper = leaf.bounds(env, env)[1]
            if not 0 <= value <= upper:
                problems.append(
                    f"size tensor output {index} holds {value}, outside 0..{upper} (the declared upper bound)"
                )
                value = min(max(value, 0), upper)
            env[leaf.symbol] = value
        actual = self.rule.actual_shapes(env)
        outputs = []
        for buf, desc, shape in zip(bufs, descs, actual):
            dtype = np.dtype(desc.type.nptype())
            if desc.format == TensorFormat.LINEAR:
                outputs.append(buf.view(shape, dtype).copy())
                continue
            upper = tuple(desc.dims)
            linear = np.empty(upper, dtype=dtype)
            from_storage(buf.view(storage_shape(upper, desc.format), dtype), desc.format, linear)
            outputs.append(linear)
        return outputs, problems


def _guarded(
    shape: Sequence[int], choice: tuple[Any, TensorFormat], ranges: tuple[Dims, Dims, Dims]
) -> tuple[Binding, GuardedBuffer]:
    """A new guarded buffer for one tensor, and the node's binding over it (profile dims: ``ranges``)."""
    dtype, fmt = choice
    dims = tuple(int(d) for d in shape)
    store = storage_shape(dims, fmt)
    np_dtype = np.dtype(dtype.nptype())
    buf = GuardedBuffer(volume(store) * np_dtype.itemsize)
    return Binding(dims, dtype, fmt, 1.0, buf.ptr, buf.view(store, np_dtype), lambda: ranges), buf
