"""Channels-last runs: the tensors between layers that chose a channels-last kernel are stored ``HWC``.

An operator's :data:`~plugrt.ops.torch_cpu.CHANNELS_LAST_TACTIC` kernel (the convolution's: oneDNN on
channels-last tensors, its kernel reordered once; MAX pooling's and the SE block's) is timed on channels-last
inputs and outputs
(``builder/tactics.py``). After the tactics are chosen this pass decides which layers take it: a tensor
that one of them writes and only such layers read (at positions their kernel takes channels-last)
is stored ``HWC`` (the same bytes as LINEAR, laid out ``[N, H, W, C]``), and is handed over with
no reorder in or out. A tensor anyone else reads (another layer, the caller as a network output)
stays LINEAR, and so does a run's first input: the layer at either end of a run reorders on its
side, and is timed again that way. The choice starts from the layers the kernel is fastest for
alone and moves one layer in or out at a time while that lowers the time of the layers it touches; the
same search also starts from every candidate, and a result replaces "every candidate channels-last" only
where the layers it changes (with their neighbours) take at least :data:`LAYOUT_MARGIN`
less time in sum (:func:`_choose`); the others get their fastest other tactic. Layer by layer alone, small layers
would leave NCHW layers between channels-last ones, each reordering both ways; and one layer at a time,
the search from the fastest-alone layers stops where a run pays only as a whole, none of its layers alone
with the reorders it then gets (PP-OCR cls: it kept 23 of 45 candidates, 1031 us by these times against
923 us for all 45, and ran 1.45 ms against 1.15 ms with ``PLUGRT_TORCH=nhwc``). Times taken alone
miss what a run saves in the engine (tensors handed over between its layers), hence the margin.

A transpose whose output, stored ``HWC``, holds its input's bytes in their order (an export's NHWC to NCHW
``Transpose`` before a convolution, or magika's ``[N, H, C, 1]`` to ``[N, C, H, 1]``), read only by layers
that take it channels-last, becomes a reshape into that ``HWC`` tensor (a copy in order): the
convolution then reads it without a reorder (:func:`_transposes_in_order`; magika, one thread: the transpose
layer 0.134 -> 0.013 ms, and the convolution's reorder of its input, 52-61 us, gone).

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
from .tactics import pick, time_layer

__all__ = ["LAYOUT_MARGIN", "channels_last_layouts"]

#: a channels-last choice replaces another only where the layers it changes take less than this fraction of the
#: time: wider than a single layer's tactic margin, times taken alone miss what a run saves (see the note above)
LAYOUT_MARGIN = 0.9

#: the types a tensor between channels-last kernels may have (HALF: a GPU's, under ``BuilderFlag.FP16`` or typed so)
_STORED_TYPES = (DataType.FLOAT, DataType.HALF)


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
    eligible = {t for t, (layer, k) in writer.items() if _may_store(state, t, layer, k, readers[t], taken)}
    if all(layer.name not in state.tactic_times for layer in candidates):  # PLUGRT_TORCH=nhwc: the kernel, untimed
        chosen = {id(layer) for layer in candidates}
    else:
        chosen = _choose(state, candidates, eligible, taken, writer, readers)
    stored = _stored(eligible, chosen, writer, readers) | _transposes_in_order(state, chosen, taken, writer, readers)
    for layer in candidates:
        times = state.tactic_times.get(layer.name, {})
        others = sorted(t for t in times if t != CHANNELS_LAST_TACTIC)
        layer.tactic = CHANNELS_LAST_TACTIC if id(layer) in chosen or not others else pick(times, others)
    for t in stored:
        state.tensors[t].format = TensorFormat.HWC
    if chosen:
        state.logger.emit(
            Severity.VERBOSE, f"{len(chosen)} layer(s) run channels-last, {len(stored)} tensor(s) stored HWC"
        )


def _stored(
    eligible: set[int],
    chosen: set[int],
    writer: dict[int, tuple[LayerPlan, int]],
    readers: dict[int, list[tuple[LayerPlan, int]]],
) -> set[int]:
    """The eligible tensors whose writer and readers all take the channels-last kernel."""
    return {t for t in eligible if id(writer[t][0]) in chosen and all(id(r) in chosen for r, _ in readers[t])}


def _choose(
    state: BuildState,
    candidates: list[LayerPlan],
    eligible: set[int],
    taken: dict[int, tuple[list[int], list[int]]],
    writer: dict[int, tuple[LayerPlan, int]],
    readers: dict[int, list[tuple[LayerPlan, int]]],
) -> set[int]:
    """The layers that take the channels-last kernel: from those it is fastest for alone (by
    :data:`LAYOUT_MARGIN`), and again from every candidate, a local search that moves one
    layer in or out while that lowers the time of the layers it touches (itself, and the others reading or
    writing its tensors), each timed with the formats it then gets: the channels-last kernel's time as timed
    where every tensor it takes is HWC, timed again where one is LINEAR (a reorder in or out), the fastest
    other tactic's time otherwise. A result replaces every candidate channels-last when the layers whose
    time differs between the two (those it leaves out and their neighbours) take at least ``LAYOUT_MARGIN`` less
    in sum (the result that saves more, where both do)."""
    by_id = {id(layer): layer for layer in candidates}
    other: dict[int, tuple[int, float]] = {}  # layer id -> its fastest other tactic and that one's time
    nhwc: dict[int, float] = {}  # layer id -> the channels-last kernel's time with every tensor it takes HWC
    for layer in candidates:
        times = state.tactic_times[layer.name]
        rest = sorted(t for t in times if t != CHANNELS_LAST_TACTIC)
        best = pick(times, rest) if rest else 0
        other[id(layer)] = (best, times[best] if rest else float("inf"))
        nhwc[id(layer)] = times[CHANNELS_LAST_TACTIC]
    timed: dict[tuple[str, tuple[TensorFormat, ...]], float] = {}

    def cost(layer: LayerPlan, chosen: set[int], stored: set[int]) -> float:
        if id(layer) not in chosen:
            return other[id(layer)][1]
        ins, outs = taken[id(layer)]
        n = len(layer.inputs)
        formats = [TensorFormat.LINEAR] * (n + len(layer.outputs))
        for p in ins:
            formats[p] = TensorFormat.HWC if layer.inputs[p] in stored else TensorFormat.LINEAR
        for p in outs:
            formats[n + p] = TensorFormat.HWC if layer.outputs[p] in stored else TensorFormat.LINEAR
        if all(formats[p] == TensorFormat.HWC for p in (*ins, *(n + p for p in outs))):
            return nhwc[id(layer)]
        key = (layer.name, tuple(formats))
        if key not in timed:  # timed with the all-HWC kernel and the other tactic at the same moment
            full = list(formats)
            for p in (*ins, *(n + p for p in outs)):
                full[p] = TensorFormat.HWC
            tactic = other[id(layer)][0]
            mixed, hwc, alone = time_layer(
                state, layer, [(CHANNELS_LAST_TACTIC, formats), (CHANNELS_LAST_TACTIC, full), (tactic, None)]
            )
            timed[key] = mixed
            nhwc[id(layer)] = min(nhwc[id(layer)], hwc)
            other[id(layer)] = (tactic, min(other[id(layer)][1], alone))
        return timed[key]

    def touched(layer: LayerPlan) -> list[LayerPlan]:
        near = {id(layer): layer}
        for t in (*layer.inputs, *layer.outputs):
            if t not in eligible:
                continue
            for other_layer in (writer[t][0], *(r for r, _ in readers[t])):
                if id(other_layer) in by_id:
                    near[id(other_layer)] = other_layer
        return list(near.values())

    def search(chosen: set[int]) -> set[int]:
        for _ in range(4):
            moved = False
            for layer in candidates:
                trial = chosen ^ {id(layer)}
                before, after = _stored(eligible, chosen, writer, readers), _stored(eligible, trial, writer, readers)
                near = touched(layer)
                now = sum(cost(n, chosen, before) for n in near)
                then = sum(cost(n, trial, after) for n in near)
                if then < now:
                    chosen, moved = trial, True
            if not moved:
                break
        return chosen

    def region_cost(chosen: set[int], region: list[LayerPlan]) -> float:
        stored = _stored(eligible, chosen, writer, readers)
        return sum(cost(layer, chosen, stored) for layer in region)

    everything = {id(layer) for layer in candidates}
    fastest = {id(layer) for layer in candidates if nhwc[id(layer)] < LAYOUT_MARGIN * other[id(layer)][1]}
    result, saving = everything, 0.0
    for chosen in (search(fastest), search(set(everything))):
        # the layers whose time can differ from every candidate channels-last: those it changes and their neighbours
        region = list({id(n): n for layer in candidates if id(layer) not in chosen for n in touched(layer)}.values())
        for _ in range(2):  # the second pass sees every time the first one took (a layer's fastest run may drop)
            then, now = region_cost(chosen, region), region_cost(everything, region)
        if then < LAYOUT_MARGIN * now and now - then > saving:
            result, saving = chosen, now - then
    return result


def _transposes_in_order(
    state: BuildState,
    chosen: set[int],
    taken: dict[int, tuple[list[int], list[int]]],
    writer: dict[int, tuple[LayerPlan, int]],
    readers: dict[int, list[tuple[LayerPlan, int]]],
) -> set[int]:
    """The tensors a 4-D transpose writes whose ``HWC`` storage is its input's bytes in order, that only chosen
    layers read at positions they take channels-last: each such transpose becomes the reshape that writes
    them (its input's elements copied in order into the stored ``[N, H, W, C]``; the shuffle kernel empties
    the buffer's hand-over slot). Its logical ``[N, C, H, W]`` dimensions past the batch must be known."""
    found = set()
    for t, (layer, _) in writer.items():
        if layer.is_plugin or layer.kind != "shuffle" or len(layer.inputs) != 1 or layer.shape_inputs:
            continue
        params, tensor = layer.params, state.tensors[t]
        # TensorRT's permutations hold eight axes; a 4-D tensor's are the first four
        perm = [int(p) for p in params.get("first_transpose") or range(4)][:4]
        second = [int(p) for p in params.get("second_transpose") or range(4)][:4]
        if sorted(perm) != [0, 1, 2, 3] or second != [0, 1, 2, 3] or params.get("reshape_dims") is not None:
            continue
        if tensor.role != "internal" or tensor.format != TensorFormat.LINEAR or tensor.dtype != DataType.FLOAT:
            continue
        if len(tensor.shape) != 4 or not all(d.is_constant() for d in tensor.shape[1:]) or not readers[t]:
            continue
        if not all(id(r) in chosen and p in taken[id(r)][0] for r, p in readers[t]):
            continue
        source = state.tensors[layer.inputs[0]].shape
        if len(source) != 4:
            continue
        # the input's axes in the order HWC storage lays the output's: [N, H, W, C] of the transposed tensor
        unit = [d.is_constant() and d.get_constant_value() == 1 for d in source]
        if [a for a in (perm[0], perm[2], perm[3], perm[1]) if not unit[a]] != sorted(a for a in perm if not unit[a]):
            continue
        dims = [d.get_constant_value() for d in tensor.shape[1:]]
        layer.params = {**params, "first_transpose": list(range(8)), "second_transpose": list(range(8))}
        layer.params.update(reshape_dims=[0, *dims], zero_is_placeholder=True)
        found.add(t)
    return found


def _may_store(
    state: BuildState,
    t: int,
    layer: LayerPlan,
    k: int,
    readers: list[tuple[LayerPlan, int]],
    taken: dict[int, tuple[list[int], list[int]]],
) -> bool:
    """Whether tensor ``t`` (output ``k`` of ``layer``) may be stored HWC: an internal 4-D FLOAT or HALF tensor that a
    candidate writes and only candidates read, each at a position its channels-last kernel takes HWC."""
    tensor = state.tensors[t]
    if id(layer) not in taken or k not in taken[id(layer)][1]:
        return False
    if tensor.role != "internal" or tensor.format != TensorFormat.LINEAR or tensor.dtype not in _STORED_TYPES:
        return False
    if len(tensor.shape) != 4 or not readers:
        return False
    return all(id(r) in taken and p in taken[id(r)][0] for r, p in readers)
