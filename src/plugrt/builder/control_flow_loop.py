"""An ``ILoop`` lowered to the ``loop`` operator.

Operator inputs: the COUNT trip limit (when given), the recurrences' initial
values, then the outer tensors the body reads (iterated tensors among them).
The body takes the iteration number, a condition, the recurrences' current
values and the outer tensors; it returns the WHILE condition of the iteration
(or the condition it was given), the recurrences' next values, then one value
per loop output that is not the last value of a recurrence (those are the
operator's final loop-carried values).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import helper

from ..core.dims import Dims
from ..core.errors import BuildError
from ..core.types import DataType
from ..network.control_flow import (
    IIteratorLayer,
    ILoop,
    ILoopOutputLayer,
    IRecurrenceLayer,
    ITripLimitLayer,
    LoopOutput,
    TripLimit,
)
from ..network.definition import INetworkDefinition
from ..network.tensor import ITensor
from .control_flow import Interior, LoweredLayer, given, owner_label, read
from .control_flow_body import BodyGraph, analyse, input_templates, shown

__all__ = ["UNBOUNDED_ITERATIONS", "lower_loop"]

#: Iterations the concatenated outputs are planned for when the trip count is not known at build time.
UNBOUNDED_ITERATIONS = 1024
_SCAN_KINDS = {LoopOutput.LAST_VALUE: "last", LoopOutput.CONCATENATE: "concatenate", LoopOutput.REVERSE: "reverse"}


def lower_loop(network: INetworkDefinition, loop: ILoop) -> tuple[LoweredLayer | None, set[int]]:
    """The layer running ``loop`` (None when it has no outputs) and the ids of the tensors inside it."""
    label = owner_label(loop)
    recurrences = [layer for layer in loop._layers if isinstance(layer, IRecurrenceLayer)]
    iterators = [layer for layer in loop._layers if isinstance(layer, IIteratorLayer)]
    outputs = [layer for layer in loop._layers if isinstance(layer, ILoopOutputLayer)]
    limits = [layer for layer in loop._layers if isinstance(layer, ITripLimitLayer)]
    for kind in TripLimit:
        named = [layer.name for layer in limits if layer.kind == kind]
        if len(named) > 1:
            raise BuildError(f"{label} has {len(named)} {kind} trip limits ({named}); give at most one")
    if not limits:
        raise BuildError(f"{label} has no trip limit; add one with add_trip_limit(tensor, TripLimit.COUNT or WHILE)")
    count = next((layer for layer in limits if layer.kind == TripLimit.COUNT), None)
    whiles = next((layer for layer in limits if layer.kind == TripLimit.WHILE), None)
    for rec in recurrences:
        if not given(rec, 1):
            raise BuildError(f"{label}: recurrence rec {rec.name!r} has no next value; call set_input(1, next)")
    for out in outputs:
        if out.kind != LoopOutput.LAST_VALUE and not given(out, 1):
            raise BuildError(
                f"{label}: loop output out {out.name!r} is {out.kind}, which needs its length as input 1 "
                "(set_input(1, trip_count))"
            )
    for it in iterators:
        if it.reverse and count is None:
            raise BuildError(f"{label}: iterator it {it.name!r} runs in reverse, which needs a COUNT trip limit")
    seeds = [layer.get_output(0) for layer in [*recurrences, *iterators]]
    sinks = [read(layer, 1) for layer in recurrences] + [read(layer, 0) for layer in outputs]
    sinks += [read(whiles, 0)] if whiles is not None else []
    interior = Interior(loop, seeds, [t for t in sinks if t is not None])
    for out in outputs:
        if not interior.inside(read(out, 0)):
            raise BuildError(
                f"{label}: loop output out {out.name!r} reads {read(out, 0).name!r}, which is not computed "
                "in the loop (from its recurrences or iterators)"
            )
    for boundary in [*recurrences, *iterators, *([count] if count else [])]:
        if interior.inside(read(boundary, 0)):
            raise BuildError(f"{label}: boundary {boundary.name!r} reads {read(boundary, 0).name!r}, which the loop computes")
    if not outputs:
        return None, interior.tensors
    # The results: final recurrence values (claimed by LAST_VALUE outputs of recurrence outputs), then scans.
    finals: list[ITensor | None] = [None] * len(recurrences)
    scans: list[ILoopOutputLayer] = []
    for out in outputs:
        source = read(out, 0).producer
        if out.kind == LoopOutput.LAST_VALUE and source in recurrences:
            slot = recurrences.index(source)  # type: ignore[arg-type]
            if finals[slot] is None:
                finals[slot] = out.get_output(0)
                continue
        scans.append(out)
    outer = [t for t in interior.outer if id(t) not in {id(s) for s in seeds}]
    for it in iterators:
        if all(t is not read(it, 0) for t in outer):
            outer.append(read(it, 0))
    if count is not None and any(layer.reverse for layer in iterators):
        if all(t is not read(count, 0) for t in outer):
            outer.append(read(count, 0))
    head = [read(count, 0)] if count is not None else []
    op_inputs = [*head, *(read(layer, 0) for layer in recurrences), *outer]
    results = [t if t is not None else ITensor(f"{loop.name} final {k}", DataType.FLOAT, Dims(), None)
               for k, t in enumerate(finals)]
    results += [layer.get_output(0) for layer in scans]
    plan = _LoopPlan(loop, count, whiles, recurrences, iterators, scans, interior, outer)
    return LoweredLayer(network, loop, "loop", op_inputs, results, plan), interior.tensors


class _LoopPlan:
    """Works out the ``loop`` operator's params and body once the input types and shapes are built."""

    def __init__(
        self,
        loop: ILoop,
        count: ITripLimitLayer | None,
        whiles: ITripLimitLayer | None,
        recurrences: list[IRecurrenceLayer],
        iterators: list[IIteratorLayer],
        scans: list[ILoopOutputLayer],
        interior: Interior,
        outer: list[ITensor],
    ) -> None:
        self.loop, self.count, self.whiles = loop, count, whiles
        self.recurrences, self.iterators, self.scans = recurrences, iterators, scans
        self.interior, self.outer = interior, outer

    def __call__(self, infos: list[tuple[DataType, list[Any], Any]]) -> tuple[dict[str, Any], dict[str, Any], int]:
        label = owner_label(self.loop)
        first = 1 if self.count is not None else 0
        if self.count is not None:
            dtype, shape, _ = infos[0]
            if dtype not in (DataType.INT32, DataType.INT64) or shape:
                raise BuildError(
                    f"{label}: trip limit layer {self.count.name!r} needs a 0-d INT32 or INT64 count, got {dtype.name} "
                    f"of rank {len(shape)}"
                )
        body = BodyGraph(label)
        body.add_input(f"{label} iteration", DataType.INT64, [], None)
        body.add_input(f"{label} condition", DataType.BOOL, [], None)
        for k, rec in enumerate(self.recurrences):
            dtype, shape, _ = infos[first + k]
            body.add_input(rec.get_output(0).name, dtype, shape, first + k)
        position = {id(t): first + len(self.recurrences) + k for k, t in enumerate(self.outer)}
        for tensor in self.outer:
            dtype, shape, _ = infos[position[id(tensor)]]
            body.add_input(tensor.name, dtype, shape, position[id(tensor)])
        self._iterators(body, label)
        body.add_layers(self.interior.layers)
        body.add_result(read(self.whiles, 0).name if self.whiles is not None else f"{label} condition")
        for rec in self.recurrences:
            body.add_result(read(rec, 1).name)
        for out in self.scans:
            body.add_result(read(out, 0).name)
        model = body.model()
        found = analyse(body, model)
        if self.whiles is not None and (found[0][0] != DataType.BOOL or found[0][1]):
            raise BuildError(
                f"{label}: WHILE trip limit layer {self.whiles.name!r} needs a 0-d BOOL condition, got "
                f"{found[0][0].name} of rank {len(found[0][1])}"
            )
        types, shapes = [], []
        for k, rec in enumerate(self.recurrences):
            dtype, shape, _ = infos[first + k]
            initial = input_templates(shape, first + k)
            next_type, next_dims = found[1 + k]
            if next_type != dtype or next_dims != initial:
                raise BuildError(
                    f"{label}: recurrence rec {rec.name!r} starts as "
                    f"{shown(read(rec, 0), dtype, initial)} but its next value is "
                    f"{shown(read(rec, 1), next_type, next_dims)}; they must agree in type and shape"
                )
            types.append(dtype)
            shapes.append(initial)
        count = 0
        limit = None
        counted = self.count is not None and infos[0][2] is not None
        iterations: list[Any] = ["v", 0] if counted else ["c", UNBOUNDED_ITERATIONS]
        if not counted:
            limit = UNBOUNDED_ITERATIONS
        if self.whiles is not None or not counted:
            iterations, count = ["s", 0, iterations], 1
        for out, (dtype, dims) in zip(self.scans, found[1 + len(self.recurrences) :]):
            if any(d is None for d in dims):
                raise BuildError(f"{label}: the shape of {read(out, 0).name!r} cannot be expressed at build time")
            if out.kind != LoopOutput.LAST_VALUE:
                if not 0 <= out.axis <= len(dims):
                    raise BuildError(f"{label}: loop output out {out.name!r} has axis {out.axis} for rank {len(dims)}")
                dims = [*dims[: out.axis], iterations, *dims[out.axis :]]
            types.append(dtype)
            shapes.append(dims)
        params = {
            "has_trip_count": self.count is not None,
            "has_cond": False,
            "while_first": self.whiles is not None,
            "num_carried": len(self.recurrences),
            "num_scan": len(self.scans),
            "scan_kinds": [_SCAN_KINDS[layer.kind] for layer in self.scans],
            "scan_axes": [layer.axis for layer in self.scans],
            "iteration_limit": limit if self.scans else None,
            "types": [t.name for t in types],
            "shapes": shapes,
            "num_sizes": count,
        }
        return params, {"body": np.frombuffer(model.SerializeToString(), dtype=np.uint8).copy()}, count

    def _iterators(self, body: BodyGraph, label: str) -> None:
        """A Gather of iteration ``i`` (``M - 1 - i`` in reverse) per iterator."""
        for k, it in enumerate(self.iterators):
            index = f"{label} iteration"
            if it.reverse:
                assert self.count is not None
                m = f"{label} reverse {k} count"
                body.nodes.append(helper.make_node("Cast", [read(self.count, 0).name], [m], to=7))
                one = body.constant(f"{label} reverse {k} one", np.array(1, dtype=np.int64))
                last = f"{label} reverse {k} last"
                body.nodes.append(helper.make_node("Sub", [m, one], [last]))
                index = f"{label} reverse {k} index"
                body.nodes.append(helper.make_node("Sub", [last, f"{label} iteration"], [index]))
            body.nodes.append(
                helper.make_node("Gather", [read(it, 0).name, index], [it.get_output(0).name], axis=it.axis)
            )
