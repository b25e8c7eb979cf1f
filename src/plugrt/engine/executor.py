"""The executor: one per execution context; binds its nodes on shape change, then launches them.

Per run it only launches nodes: views, descriptors, pointers and launch
arguments are made when shapes (or I/O addresses) change (``Node.bind``).
Layers whose shapes depend on data (after a size tensor) are bound during the run.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..backends.base import Backend
from ..core.errors import ExecutionError, PlugrtError
from ..core.layouts import storage_shape
from ..core.types import TensorFormat
from ..interfaces.v3 import IPluginResourceContext
from ..nodes.base import Binding, Node
from ..ops.hand_over import HandOver, hand_over
from ..ops.linear_weights import packed_matrix
from ..ops.products import is_rows_first
from .graph_runs import GraphRuns
from .plan import EnginePlan, LayerPlan, host_computed

__all__ = ["Executor", "Step"]


@dataclass
class Step:
    """One layer of a context: its node and when it runs."""

    index: int
    layer: LayerPlan
    node: Node
    #: runs once per arena (a constant whose output is not an IO tensor the user may move)
    constant: bool = False
    #: bound during the run (its inputs' shapes depend on data)
    late: bool = False
    #: a shape-tensor layer: its outputs are written on the host when shapes change, never per run
    host: bool = False
    #: a reshape laid over its input's memory (``builder/views.py``): nothing to run
    view: bool = False


class Executor:
    """Runs an engine plan in one arena, with this context's operators and plugins."""

    def __init__(self, engine: Any, backend: Backend) -> None:
        self.engine = engine
        self.plan: EnginePlan = engine.plan
        self.backend = backend
        self.steps: list[Step] = []
        shared = engine.resource_context  # each context gets its own resource context, as in TensorRT
        self.resource_context = IPluginResourceContext(
            shared.backend, shared.allocator, getattr(shared, "error_recorder", None)
        )
        self.size_symbols = {sym for layer in self.plan.layers for sym in layer.size_outputs.values()}
        #: the CUDA graphs of this context's runs
        self.graphs = GraphRuns()
        for index, layer in enumerate(self.plan.layers):
            # constants, and layers the builder found to depend on constants only
            constant = bool(layer.outputs) and all(self.plan.tensors[o].role == "constant" for o in layer.outputs)
            host = not constant and host_computed(layer, self.plan.tensors, self.size_symbols)
            node = engine.create_node(index, self.resource_context)
            self.steps.append(Step(index, layer, node, constant, host=host))
        #: constant tensors read from the plan's weights in place instead of copied into the arena
        self.weight_views = self._weight_views()
        #: tensor -> its shape-tensor values for the current input shapes (where they depend on shapes only)
        self.values: dict[int, tuple[int, ...]] = {}
        #: whether the shape-tensor layers' outputs in the arena hold the current values
        self.values_written = False
        self.profile = 0
        self.arena: Any = None
        self.arena_base = 0
        self.constants_ready = False
        self.env: dict[str, int] = {}
        self.shapes: list[tuple[int, ...] | None] = [None] * len(self.plan.tensors)
        self.arrays: list[Any] = [None] * len(self.plan.tensors)
        self.pointers: list[int] = [0] * len(self.plan.tensors)
        self.upper_arrays: dict[int, Any] = {}
        self.upper: dict[int, tuple[int, ...]] = {}
        self.io_bound: set[int] = set()
        self.size_upper = {
            leaf.symbol: leaf.size_bounds[1] for t in self.plan.tensors for d in t.shape for leaf in _size_leaves(d)
        }
        self.set_profile(0)

    # --- memory ------------------------------------------------------------------------
    def _weight_views(self) -> dict[int, Any]:
        """Constant layers' outputs that are the plan's weight arrays themselves (read-only) rather than copies in
        the arena: on a backend whose arrays are host memory, for linear tensors of the weight's type that only
        operators read (a plugin is given pointers, which the arena aligns), and the places of the weights that
        products hold packed. Their arena space is never written, so the weights are in memory once."""
        if not self.backend.host_memory:
            return {}
        plugin_inputs = {i for layer in self.plan.layers if layer.is_plugin for i in layer.inputs}
        views: dict[int, Any] = {}
        for step in self.steps:
            layer = step.layer
            value = getattr(step.node, "weights", {}).get("value") if layer.kind == "constant" else None
            if not step.constant or value is None or len(layer.outputs) != 1:
                continue
            index = layer.outputs[0]
            tensor = self.plan.tensors[index]
            packed = packed_matrix(value) is not None  # held by the products that read it (ops/torch_cpu_linear.py)
            if index in plugin_inputs or tensor.format != TensorFormat.LINEAR:
                continue
            if not (value.flags.c_contiguous or packed or is_rows_first(value)):
                continue
            if value.dtype != np.dtype(tensor.dtype.nptype()):
                continue
            view = value.view()
            view.flags.writeable = False
            views[index] = view
        return views

    def set_profile(self, profile: int) -> None:
        """Switch to ``profile``'s memory plan (allocates its arena)."""
        self.profile = profile
        self.arena, self.arena_base = self.backend.allocate_arena(self.plan.profiles[profile].arena_size)
        self.constants_ready = False
        self.values_written = False

    def _arena_view(self, tensor: int, shape: tuple[int, ...]) -> Any:
        t = self.plan.tensors[tensor]
        offset = self.plan.profiles[self.profile].offsets.get(tensor)
        if offset is None:
            raise ExecutionError(f"tensor {t.name!r} has no place in the memory plan")
        stored = storage_shape(shape, t.format)
        dtype = np.dtype(t.dtype.nptype())
        nbytes = int(np.prod(stored, dtype=np.int64)) * dtype.itemsize
        if offset + nbytes > self.plan.profiles[self.profile].arena_size:
            raise ExecutionError(
                f"tensor {t.name!r} of shape {shape} needs {nbytes} bytes at offset {offset}, beyond the arena "
                f"({self.plan.profiles[self.profile].arena_size} bytes)"
            )
        address = self.arena_base + offset if nbytes else 0
        self.pointers[tensor] = address
        return self.backend.view(address, stored, dtype, owner=self.arena)

    # --- shapes ------------------------------------------------------------------------
    def infer(self, input_shapes: dict[str, tuple[int, ...]]) -> None:
        """Evaluate every shape that does not depend on data, for these input shapes."""
        env: dict[str, int] = {}
        for sym, (name, axis) in self.plan.symbols.items():
            env[sym] = input_shapes[name][axis]
        self.env = env
        upper_env = dict(env)
        for sym, upper in self.size_upper.items():
            upper_env[sym] = upper.evaluate(upper_env)
        self.upper = {}
        for index, tensor in enumerate(self.plan.tensors):
            if any(d.symbols() & self.size_symbols for d in tensor.shape):
                self.shapes[index] = None
                self.upper[index] = tuple(d.evaluate(upper_env) for d in tensor.shape)
            else:
                self.shapes[index] = tuple(d.evaluate(env) for d in tensor.shape)
        self.values = {
            index: tuple(v.evaluate(env) for v in tensor.values)
            for index, tensor in enumerate(self.plan.tensors)
            if tensor.values is not None and not any(v.symbols() & self.size_symbols for v in tensor.values)
        }
        self.values_written = False

    def bind(self, io_arrays: dict[int, Any], io_pointers: dict[int, int]) -> None:
        """Make views and bind every step whose shapes are known."""
        #: the I/O tensors bound to the caller's memory (the others are placed in the arena or by allocators)
        self.io_bound = set(io_arrays)
        for index in self.upper:  # data-dependent shapes of the previous run are not known for the next
            self.shapes[index] = None
        for index, tensor in enumerate(self.plan.tensors):
            shape = self.shapes[index]
            if index in io_arrays:
                self.arrays[index] = io_arrays[index]
                self.pointers[index] = io_pointers[index]
            elif index in self.weight_views:
                self.arrays[index] = self.weight_views[index]
                self.pointers[index] = self.backend.address_of(self.weight_views[index])
            elif tensor.role != "input":
                self.arrays[index] = self._arena_view(index, shape if shape is not None else self.upper[index])
        self.upper_arrays = {i: self.arrays[i] for i in self.upper}
        if not self.constants_ready:
            for step in self.steps:
                if step.constant and not (step.layer.outputs and step.layer.outputs[0] in self.weight_views):
                    self._bind_step(step)
                    self._run_step(step, 0)
            self.constants_ready = True
        for step in self.steps:
            if step.host:  # written when shapes or the arena change, not when only I/O addresses move
                if not self.values_written:
                    self._write_values(step)
                continue
            step.late = any(self.shapes[i] is None for i in step.layer.inputs)
            step.view = (
                not step.late
                and step.node.views_input()
                and self.pointers[step.layer.inputs[0]] == self.pointers[step.layer.outputs[0]]
            )
            if not step.late:
                self._bind_step(step)
        self.values_written = True
        self._calls: list[tuple[Step, Callable[..., Any], tuple[Any, ...]]] | None = None
        self._calls_stream = -1
        self.graphs.reset()

    def move_io(self, io_arrays: dict[int, Any], io_pointers: dict[int, int]) -> None:
        """I/O tensors moved to new addresses, shapes unchanged since the last :meth:`bind`: only the steps that
        read or write them are bound again (a whole bind costs each layer its setup again: 2-13 ms on the CNN
        exports, more than a run of the smaller ones, at every call that hands out new output arrays). Falls
        back to :meth:`bind` where a moved tensor is written by a constant or shape-tensor step (written once
        per bind) or where shapes depend on data."""
        moved = set(io_arrays)
        touched = [
            step
            for step in self.steps
            if moved.intersection(step.layer.inputs) or moved.intersection(step.layer.outputs)
        ]
        if self.upper or any(step.constant or step.host or step.late for step in touched):
            # a full bind, of the I/O tensors that did not move (as bound last) and of those that did
            kept = self.io_bound - moved
            self.bind(
                {**{i: self.arrays[i] for i in kept}, **io_arrays},
                {**{i: self.pointers[i] for i in kept}, **io_pointers},
            )
            return
        for index in moved:
            self.arrays[index] = io_arrays[index]
            self.pointers[index] = io_pointers[index]
        for step in touched:
            step.view = step.node.views_input() and self.pointers[step.layer.inputs[0]] == self.pointers[step.layer.outputs[0]]
            self._bind_step(step)
        self._calls = None
        self.graphs.reset()

    def _bind_step(self, step: Step) -> None:
        layer = step.layer
        try:
            scales = layer.params.get("io_scales") or [1.0] * (len(layer.inputs) + len(layer.outputs))
            inputs = [self._binding(i, scale) for i, scale in zip(layer.inputs, scales)]
            outputs = [self._binding(i, scale) for i, scale in zip(layer.outputs, scales[len(layer.inputs) :])]
            offset = self.plan.profiles[self.profile].workspace_offsets.get(step.index)
            workspace = self.arena_base + offset if layer.workspace and offset is not None else 0
            step.node.bind(inputs, outputs, workspace)
        except PlugrtError:
            raise
        except Exception as exc:  # MemoryError and the like: name the layer
            raise step.node.failure(exc) from exc

    def _binding(self, index: int, scale: float) -> Binding:
        tensor = self.plan.tensors[index]
        return Binding(
            self._shape_or_upper(index),
            tensor.dtype,
            tensor.format,
            scale,
            self.pointers[index],
            self.arrays[index],
            functools.partial(self.engine.tensor_range, index, self.profile),
            self.values.get(index),
            tensor.role == "constant",
        )

    def _write_values(self, step: Step) -> None:
        """A shape-tensor layer's outputs, written from their values for the current shapes (one host
        copy each on a device, queued on the current stream before the run's kernels)."""
        for index in step.layer.outputs:
            tensor = self.plan.tensors[index]
            values = np.array(self.values[index], dtype=np.int64).astype(tensor.dtype.nptype(), copy=False)
            self.backend.copy_from_host(self.arrays[index], values.reshape(self.shapes[index] or ()))

    def known_shape(self, index: int) -> tuple[int, ...] | None:
        """Tensor ``index``'s shape as known before a run: None while it depends on data.

        A data-dependent shape resolved by the previous run is not known for the next one:
        the same input shape with other data gives another size.
        """
        return None if index in self.upper else self.shapes[index]

    def _shape_or_upper(self, index: int) -> tuple[int, ...]:
        shape = self.shapes[index]
        return shape if shape is not None else self.upper[index]

    # --- running -----------------------------------------------------------------------
    def run(self, stream: int, profiler: Any = None) -> None:
        """Run every step in order; with an ``IProfiler``, time each layer and report it."""
        if not self.upper and profiler is None:
            self.run_static(stream)
            return
        for index, array in self.upper_arrays.items():
            self.shapes[index] = None
            self.arrays[index] = array
        for sym in self.size_symbols:
            self.env.pop(sym, None)
        for step in self.steps:
            if step.constant or step.host or step.view:
                continue
            if step.late:
                self._bind_late(step)
            if profiler is None:
                self._run_step(step, stream)
            else:
                start = time.perf_counter()
                self._run_step(step, stream)
                self.backend.synchronize(stream)
                profiler.report_layer_time(step.layer.name, (time.perf_counter() - start) * 1e3)
            if step.layer.size_outputs:
                self._read_sizes(step)

    def run_static(self, stream: int) -> None:
        """The common case (no data-dependent shapes): a flat list of prepared launches."""
        if self._calls is None or self._calls_stream != stream:
            releases = self._releases()
            self._calls = []
            for step in self.steps:
                if not (step.constant or step.host or step.view):
                    self._calls.append((step, *step.node.prepared_launch(stream)))
                    if step.index in releases:
                        self._calls.append((step, _release, (releases[step.index],)))
            self._calls_stream = stream
        current: Step | None = None
        try:
            for current, launch, args in self._calls:  # noqa: B007 - read in the handler
                launch(*args)
        except Exception as exc:
            assert current is not None
            raise current.node.failure(exc) from exc

    def _releases(self) -> dict[int, tuple[HandOver, ...]]:
        """Per step, the hand-over slots of the channels-last (HWC) tensors it reads last: emptied after it runs, so
        that the tensor a kernel left there is freed at once rather than at the next run (``ops/hand_over.py``).
        MobileNetV2 held 13.6 MiB so: every new result then went to memory untouched since the run before, and its
        layers took 0.36 ms more a run on the CPU. A slot an output of the same step also has (a tensor written
        where its input was) is kept."""
        last: dict[int, Step] = {}
        for step in self.steps:
            if not (step.constant or step.host or step.view):
                for index in step.layer.inputs:
                    last[index] = step
        releases: dict[int, list[HandOver]] = {}
        for index, step in last.items():
            tensor = self.plan.tensors[index]
            if tensor.format != TensorFormat.HWC or tensor.role != "internal" or self.arrays[index] is None:
                continue
            slot = hand_over(self.arrays[index])
            if all(hand_over(self.arrays[o]) is not slot for o in step.layer.outputs if self.arrays[o] is not None):
                releases.setdefault(step.index, []).append(slot)
        return {k: tuple(v) for k, v in releases.items()}

    def static_launcher(self, stream: int) -> Callable[[], None] | None:
        """The run as a call without arguments: the flat list of prepared launches (None where the run has
        data-dependent shapes); valid until the next :meth:`bind`."""
        return None if self.upper else functools.partial(self.run_static, stream)

    def run_graph(self, stream: int) -> bool:
        """Replay the run as a CUDA graph, capturing it first (``GraphRuns.run``); True where it replayed."""
        return self.graphs.run(self, stream)

    def run_auto(self, stream: int) -> bool:
        """Run, replaying a graph where that is safe and repeats (``GraphRuns.run_auto``); True where it replayed."""
        return self.graphs.run_auto(self, stream)

    def _run_step(self, step: Step, stream: int) -> None:
        try:
            step.node.launch(stream)
        except Exception as exc:
            raise step.node.failure(exc) from exc

    def _read_sizes(self, step: Step) -> None:
        for output, sym in step.layer.size_outputs.items():
            tensor = step.layer.outputs[output]
            value = int(self.arrays[tensor].reshape(-1)[0])  # a device read: sizes must be known to go on
            upper_expr = self.size_upper.get(sym)
            if value < 0:
                raise ExecutionError(
                    f"layer {step.layer.name!r} wrote size {value} to size tensor output {output}; sizes must be >= 0"
                )
            if upper_expr is not None:
                upper = upper_expr.evaluate(self.env)
                if value > upper:
                    raise ExecutionError(
                        f"layer {step.layer.name!r} wrote size {value} to size tensor output {output}, above the upper "
                        f"bound {upper} it declared with declare_size_tensor"
                    )
            self.env[sym] = value
        for index, planned in enumerate(self.plan.tensors):
            if self.shapes[index] is None and all(s in self.env for d in planned.shape for s in d.symbols()):
                shape = tuple(d.evaluate(self.env) for d in planned.shape)
                self.shapes[index] = shape
                self.arrays[index] = self._arena_view(index, shape)

    def _bind_late(self, step: Step) -> None:
        missing = [self.plan.tensors[i].name for i in step.layer.inputs if self.shapes[i] is None]
        if missing:
            raise ExecutionError(f"layer {step.layer.name!r}: shapes of {missing} are still unknown")
        self._bind_step(step)

    def release(self) -> None:
        """Release every node's hold on this context (plugin clones are detached)."""
        for step in self.steps:
            step.node.release()


def _size_leaves(expr: Any) -> list[Any]:
    if expr.is_size_tensor():
        return [expr]
    leaves = []
    for arg in getattr(expr, "_args", ()):
        leaves.extend(_size_leaves(arg))
    return leaves


def _release(slots: tuple[HandOver, ...]) -> None:
    """Empty ``slots`` (their tensors' last reader ran)."""
    for slot in slots:
        slot.tensor = None
