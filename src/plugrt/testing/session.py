"""A session drives one plugin like an engine with execution contexts, on buffers the checker owns.

Every step is an adapter call, in the order the builder and the runtime make them.
Build: clone of the network's plugin (or, with ``clone=False``, the network's
plugin itself, to compare with its clones), output types and shapes, the format
questions, configuration for the checker's profile, workspace size, initialize.
Then either the build instance serves as the engine's plugin (``adopt_build``), or
(``via_payload``) it is serialized, torn down and recreated through the creator,
as a plan load does. Each context gets a clone (``attach``), is told about shape
changes and runs on guarded, poisoned buffers.
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
from ..interfaces.descriptors import PluginTensorDesc
from ..interfaces.v3 import IPluginResourceContext
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


class Session:
    """One engine-side plugin plus context clones, driven through one adapter."""

    def __init__(
        self, ctx: Any, combo: Combination, *, network: Any = None, via_payload: bool = False, clone: bool = True
    ) -> None:
        self.driver = driver = ctx.driver
        self.combo = combo
        self.network = network if network is not None else ctx.fresh()
        self.payload: bytes | None = None
        self.contexts: list[Any] = []
        self._shapes: dict[int, tuple[tuple[int, ...], ...]] = {}
        self._enqueues: dict[int, Callable[..., None]] = {}
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
        self._output_ranges = self.rule.ranges(driver.profile_envs())
        self.context = self.attach()

    def attach(self) -> Any:
        """A new execution context's plugin (a clone of the engine's plugin)."""
        plugin = self.adapter.attach(self.engine, IPluginResourceContext(DEFAULT_DEVICE))
        self.contexts.append(plugin)
        return plugin

    def detach(self, plugin: Any) -> None:
        """Tear down one context's plugin."""
        self.contexts.remove(plugin)
        self._shapes.pop(id(plugin), None)
        self._enqueues.pop(id(plugin), None)
        self.adapter.detach(plugin)

    def close(self, strict: bool = False) -> None:
        """Contexts first, then the engine's plugin, then the network's (errors ignored unless ``strict``)."""
        steps: list[Callable[[], None]] = [partial(self.detach, p) for p in list(self.contexts)]
        if self.engine is not None:
            steps.append(partial(self.adapter.release, self.engine))
        if self.network is not self.engine:
            steps.append(partial(self.driver.destroy, self.network))
        self.engine = None
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
    def descriptors(self, shapes: Shapes) -> tuple[list[PluginTensorDesc], list[PluginTensorDesc]]:
        """Concrete descriptors (outputs at their upper bound) for input ``shapes``."""
        env = self.driver.env(shapes)
        ins = [PluginTensorDesc(Dims(s), t, f, 1.0) for s, (t, f) in zip(shapes, self.combo.inputs)]
        uppers = self.rule.upper_shapes(env)
        outs = [PluginTensorDesc(Dims(s), t, f, 1.0) for s, (t, f) in zip(uppers, self.combo.outputs)]
        return ins, outs

    def _enqueue(self, plugin: Any) -> Callable[..., None]:
        if id(plugin) not in self._enqueues:
            self._enqueues[id(plugin)] = self.adapter.make_enqueue(plugin)
        return self._enqueues[id(plugin)]

    def run(
        self,
        shapes: Shapes,
        inputs: Sequence[np.ndarray],
        *,
        plugin: Any = None,
        poison: int = POISON_A,
        workspace_fill: int = 0xAB,
        stream: int = 0,
        reconfigure: bool = False,
    ) -> RunResult:
        """Enqueue once on fresh guarded buffers; ``inputs`` are LINEAR arrays of the input types."""
        plugin = self.context if plugin is None else plugin
        key = tuple(tuple(int(d) for d in s) for s in shapes)
        in_descs, out_descs = self.descriptors(key)
        if reconfigure or self._shapes.get(id(plugin)) != key:
            ranges = self.driver.input_ranges()
            self.adapter.shape_change(plugin, in_descs, out_descs, ranges, self._output_ranges)
            self._shapes[id(plugin)] = key
        in_bufs = []
        for array, desc in zip(inputs, in_descs):
            dtype = np.dtype(desc.type.nptype())
            store = storage_shape(tuple(desc.dims), desc.format)
            buf = GuardedBuffer(volume(store) * dtype.itemsize)
            to_storage(np.asarray(array, dtype=dtype), desc.format, buf.view(store, dtype))
            in_bufs.append(buf)
        written = [bytes(b.data) for b in in_bufs]
        out_bufs = []
        for desc in out_descs:
            dtype = np.dtype(desc.type.nptype())
            out_bufs.append(
                GuardedBuffer(volume(storage_shape(tuple(desc.dims), desc.format)) * dtype.itemsize, poison)
            )
        scratch = GuardedBuffer(self.workspace, workspace_fill) if self.workspace else None
        self._enqueue(plugin)(
            in_descs,
            out_descs,
            [b.ptr for b in in_bufs],
            [b.ptr for b in out_bufs],
            scratch.ptr if scratch is not None else 0,
            stream,
        )
        outputs, size_problems = self._read_outputs(key, out_bufs, out_descs)
        result = RunResult(outputs, size_problems=size_problems)
        for i, buf in enumerate(out_bufs):
            text = buf.damage_text(f"output {i}")
            if text:
                result.output_damage.append(text)
        for i, (buf, before) in enumerate(zip(in_bufs, written)):
            text = buf.damage_text(f"input {i}")
            if text:
                result.input_damage.append(text)
            if bytes(buf.data) != before:
                changed = int(np.count_nonzero(np.frombuffer(before, np.uint8) != buf.data))
                result.modified_inputs.append(f"input {i}: {changed} of {buf.nbytes} bytes changed")
        if scratch is not None:
            result.workspace_damage = scratch.damage_text("workspace")
        return result

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
