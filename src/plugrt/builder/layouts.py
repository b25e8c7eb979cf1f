"""Channels-last runs: the tensors between layers that chose a channels-last kernel are stored ``HWC``.

An operator's :data:`~plugrt.ops.torch_cpu.CHANNELS_LAST_TACTIC` kernel (the convolution's: oneDNN on
channels-last tensors, its kernel reordered once) is timed on channels-last inputs and outputs
(``builder/tactics.py``). After the tactics are chosen this pass joins such layers into runs: a tensor
that one of them writes and only such layers read (at positions their kernel takes channels-last)
may be stored ``HWC`` (the same bytes as LINEAR, laid out ``[N, H, W, C]``), and then the run
hands it over with no reorder in or out. A tensor anyone else reads (another layer, the caller as
a network output) stays LINEAR, and so does the run's first input: the layer at either end of a
run reorders on its side, and is timed again that way. A run whose layers take less time
channels-last than with their fastest other tactics (by :data:`~plugrt.builder.tactics.MARGIN`)
takes the kernel with its tensors stored ``HWC``; the layers of other runs get their fastest
other tactic. Deciding by whole runs keeps the reorders at a run's ends: layer by layer, timing
noise alone would leave NCHW layers between channels-last ones, each reordering both ways.

Measured on MobileNetV2 (one thread, each of its 52 convolutions timed alone): 9.1 ms with the
NCHW kernels against 4.8 ms channels-last with the kernels reordered once.
"""

from __future__ import annotations

from collections import defaultdict

from ..core.logger import Severity
from ..core.types import DataType, TensorFormat
from ..engine.plan import LayerPlan
from ..ops.base import create_operator
from ..ops.torch_cpu import CHANNELS_LAST_TACTIC, TorchOperator
from .state import BuildState
from .tactics import MARGIN, pick, time_layer

__all__ = ["channels_last_layouts"]


def channels_last_layouts(state: BuildState) -> None:
    """Store ``HWC`` the tensors between layers that take the channels-last kernel (see the module's note)."""
    candidates = [
        layer
        for layer in state.layers
        if not layer.is_plugin
        and (layer.tactic == CHANNELS_LAST_TACTIC or CHANNELS_LAST_TACTIC in state.tactic_times.get(layer.name, {}))
    ]
    if not candidates:
        return
    taken: dict[int, tuple[list[int], list[int]]] = {}  # layer id -> the input and output positions it takes HWC
    for layer in candidates:
        op = create_operator(layer.kind, layer.params, {n: state.weights[k] for n, k in layer.weights.items()})
        assert isinstance(op, TorchOperator)
        ins = len(layer.inputs)
        positions = op.channels_last_positions(ins, len(layer.outputs))
        taken[id(layer)] = ([p for p in positions if p < ins], [p - ins for p in positions if p >= ins])
    writer: dict[int, tuple[LayerPlan, int]] = {}
    readers: dict[int, list[tuple[LayerPlan, int]]] = defaultdict(list)
    for layer in state.layers:
        for k, t in enumerate(layer.outputs):
            writer[t] = (layer, k)
        for k, t in enumerate(layer.inputs):
            readers[t].append((layer, k))
        for t in layer.shape_inputs:
            readers[t].append((layer, -1))
    stored = {t for t, (layer, k) in writer.items() if _may_store(state, t, layer, k, readers[t], taken)}
    # runs: the candidates joined by the tensors they may hand over channels-last
    parent = {id(layer): id(layer) for layer in candidates}

    def root(key: int) -> int:
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    for t in stored:
        for reader, _ in readers[t]:
            parent[root(id(reader))] = root(id(writer[t][0]))
    runs: dict[int, list[LayerPlan]] = defaultdict(list)
    for layer in candidates:
        runs[root(id(layer))].append(layer)
    for run in runs.values():
        untimed = all(layer.name not in state.tactic_times for layer in run)  # PLUGRT_TORCH=nhwc: the kernel, untimed
        kept = run if untimed or (len(run) > 1 and _faster_channels_last(state, run, stored, taken)) else []
        for layer in run:
            times = state.tactic_times.get(layer.name, {})
            others = sorted(t for t in times if t != CHANNELS_LAST_TACTIC)
            layer.tactic = CHANNELS_LAST_TACTIC if kept or not others else pick(times, others)
        if kept:
            for layer in run:
                for t in layer.outputs:
                    if t in stored:
                        state.tensors[t].format = TensorFormat.HWC
    chosen = sum(1 for layer in candidates if layer.tactic == CHANNELS_LAST_TACTIC)
    if chosen:
        state.logger.emit(Severity.VERBOSE, f"{chosen} layer(s) run channels-last ({len(stored)} tensors may be HWC)")


def _may_store(
    state: BuildState,
    t: int,
    layer: LayerPlan,
    k: int,
    readers: list[tuple[LayerPlan, int]],
    taken: dict[int, tuple[list[int], list[int]]],
) -> bool:
    """Whether tensor ``t`` (output ``k`` of ``layer``) may be stored HWC: an internal 4-D FLOAT tensor that a
    candidate writes and only candidates read, each at a position its channels-last kernel takes HWC."""
    tensor = state.tensors[t]
    if id(layer) not in taken or k not in taken[id(layer)][1]:
        return False
    if tensor.role != "internal" or tensor.format != TensorFormat.LINEAR or tensor.dtype != DataType.FLOAT:
        return False
    if len(tensor.shape) != 4 or not readers:
        return False
    return all(id(r) in taken and p in taken[id(r)][0] for r, p in readers)


def _faster_channels_last(
    state: BuildState, run: list[LayerPlan], stored: set[int], taken: dict[int, tuple[list[int], list[int]]]
) -> bool:
    """Whether the run's layers take less time channels-last than each with its fastest other tactic, at least
    :data:`~plugrt.builder.tactics.MARGIN` less: a layer with every channels-last position HWC counts its time
    as timed, one at an end of the run (a LINEAR input or output to reorder) is timed again as it will run."""
    others = 0.0
    for layer in run:
        times = state.tactic_times[layer.name]
        rest = sorted(t for t in times if t != CHANNELS_LAST_TACTIC)
        others += times[pick(times, rest)]
    total = 0.0
    for layer in run:
        ins, outs = taken[id(layer)]
        tensors = [layer.inputs[p] for p in ins] + [layer.outputs[p] for p in outs]
        if all(t in stored for t in tensors):
            total += state.tactic_times[layer.name][CHANNELS_LAST_TACTIC]
        else:
            formats = [TensorFormat.LINEAR] * (len(layer.inputs) + len(layer.outputs))
            for p in ins:
                formats[p] = TensorFormat.HWC if layer.inputs[p] in stored else TensorFormat.LINEAR
            for p in outs:
                formats[len(layer.inputs) + p] = TensorFormat.HWC if layer.outputs[p] in stored else TensorFormat.LINEAR
            total += time_layer(state, layer, CHANNELS_LAST_TACTIC, formats)
        if total > others:
            return False
    return total < MARGIN * others
