"""The ``loop`` operator (ONNX Loop, and the network API's ``ILoop`` lowered to it) on its bound body.

The body is built and bound for the operator's input shapes when the operator is bound; a run writes the
inputs into the body's buffers once, then per iteration launches the body's kernels, copies the carried
values back as one block and writes the scan results into their slot of the outputs. Bodies whose results
depend on data run on fresh arrays each iteration instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import ExecutionError
from .base import register_operator
from .subgraph import BodyOperator, BoundSubgraph

__all__ = ["LoopOperator"]


def _scalar(value: Any) -> Any:
    """A 0-d or one-element array as a Python scalar (a device read on the GPU)."""
    return value.reshape(-1)[0].item()


class _BoundLoop:
    """A loop's body bound for its input shapes, and everything an iteration touches, made once (at bind):
    the carried values copied back as one block, the scan outputs' slots, the final copies."""

    def __init__(self, op: LoopOperator, bound: BoundSubgraph, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        carried_count = int(op.param("num_carried"))
        first = int(bool(op.params.get("has_trip_count"))) + int(bool(op.params.get("has_cond")))
        self.bound = bound
        self.inputs, self.outputs = inputs, outputs
        ins, outs = bound.input_buffers, bound.output_buffers
        self.counter, self.condition, self.flag = ins[0], ins[1], outs[0]
        #: (body input buffer, the operator input copied into it at each run)
        self.initial = list(zip(ins[2:], inputs[first:]))
        #: the condition and the carried values handed to the next iteration, as one copy where they lie alike
        if ins[1].shape == outs[0].shape and ins[1].dtype == outs[0].dtype:
            self.carry = bound.carry(1, 0, 1 + carried_count)
            self.set_condition = False
        else:
            self.carry = bound.carry(2, 1, carried_count)
            self.set_condition = True
        self.finals = list(zip(outputs[:carried_count], ins[2 : 2 + carried_count]))
        scans = outs[1 + carried_count :]
        self.kinds = list(op.params.get("scan_kinds") or ["concatenate"] * len(scans))
        #: stacked scan outputs: (the output as [iterations, *result], the body's result)
        self.stacked = []
        #: last-value scan outputs: (the output, the body's result)
        self.lasts = []
        for out, item, kind in zip(outputs[carried_count:], scans, self.kinds):
            if kind == "last":
                self.lasts.append((out, item))
            else:
                count = out.size // max(item.size, 1)
                self.stacked.append((out.reshape(-1)[: count * item.size].reshape((count, *item.shape)), item))
        #: iterations the stacked outputs have room for
        self.capacity = min((len(slots) for slots, _ in self.stacked), default=None)
        templates = [t for t, kind in zip(op.param("shapes")[carried_count:], self.kinds) if kind != "last"]
        #: data-dependent sizes that count the iterations
        self.sizes = [int(t[0][1]) for t in templates if t and t[0][0] == "s"]
        self.stream = -1
        self.launch: Any = None


@register_operator
class LoopOperator(BodyOperator):
    """ONNX Loop: inputs ``[M] [cond] carried... outer...``; results: final carried values, then stacked scan outputs.

    Params: ``has_trip_count``, ``has_cond``, ``num_carried``, ``num_scan``, and
    ``iteration_limit`` (the bound the scan outputs' buffers were planned for
    when the trip count is not known at build time, or None). Loops of the
    network API (TensorRT's ``ILoop``) also give ``while_first`` (the body's
    first result is the condition of the iteration it starts, computed from
    that iteration's values: false ends the loop before the iteration counts),
    ``scan_kinds`` (per scan output ``"concatenate"``, ``"reverse"`` or
    ``"last"``: the last iteration's value) and ``scan_axes``.

    The body is built and bound for the operator's input shapes when the operator is (:meth:`bind`); a run
    then writes the inputs into the body's buffers once and launches the body's kernels per iteration.
    """

    kind = "loop"

    def bind_body(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any) -> _BoundLoop | None:
        """The bound loop for these arrays, or None where the body's results depend on data or do not fit."""
        first = int(bool(self.params.get("has_trip_count"))) + int(bool(self.params.get("has_cond")))
        carried_count = int(self.param("num_carried"))
        counter, condition = xp.zeros((), np.int64), xp.ones((), np.bool_)
        bound = self.subgraph("body").bound([counter, condition, *inputs[first:]], xp)
        if bound is None or not self._fits(bound, carried_count, outputs):
            return None
        return _BoundLoop(self, bound, inputs, outputs)

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        has_trip, has_cond = bool(self.params.get("has_trip_count")), bool(self.params.get("has_cond"))
        carried_count, scan_count = int(self.param("num_carried")), int(self.param("num_scan"))
        position = 0
        trip_count = None
        if has_trip:
            # a trip count computed from shapes is known from the bind: no read of the array
            bound = inputs is self._bound_inputs()
            trip_count = int(self.input_ints(0, inputs[0])[0] if bound else _scalar(inputs[0]))
            position += 1
        keep_going = True
        if has_cond:
            keep_going = bool(_scalar(inputs[position]))
            position += 1
        if trip_count is None and not has_cond and not bool(self.params.get("while_first")):
            raise ExecutionError(f"{self.label}: a Loop with neither a trip count nor a condition never ends")
        loop = self.bound_body(inputs, outputs, xp)
        if loop is not None:
            self._run_bound(loop, trip_count, keep_going)
            return
        state = [xp.array(a, copy=True) for a in inputs[position : position + carried_count]]
        outer = list(inputs[position + carried_count :])
        body = self.subgraph("body")
        scans: list[list[Any]] = [[] for _ in range(scan_count)]
        iteration = 0
        condition = xp.asarray(np.bool_(True))
        while_first = bool(self.params.get("while_first"))
        while (trip_count is None or iteration < trip_count) and (not has_cond or keep_going):
            if scan_count:
                self._check_limit(iteration)
            counter = xp.asarray(np.int64(iteration))
            results = body.run([counter, condition, *state, *outer], xp)
            if while_first and not bool(_scalar(xp.asarray(results[0]))):
                break
            condition = xp.asarray(results[0]).astype(np.bool_).reshape(())
            if has_cond:
                keep_going = bool(_scalar(condition))
            state = list(results[1 : 1 + carried_count])
            for store, value in zip(scans, results[1 + carried_count :]):
                store.append(value)
            iteration += 1
        kinds = list(self.params.get("scan_kinds") or ["concatenate"] * scan_count)
        axes = [int(a) for a in self.params.get("scan_axes") or [0] * scan_count]
        stacked = []
        for index, (store, kind, axis) in enumerate(zip(scans, kinds, axes)):
            out = outputs[carried_count + index]
            if kind == "last":
                stacked.append(xp.asarray(store[-1]) if store else xp.zeros(out.shape, dtype=out.dtype))
            elif store:
                values = [xp.asarray(v) for v in (store[::-1] if kind == "reverse" else store)]
                stacked.append(xp.stack(values, axis=axis))
            else:
                shape = list(out.shape)
                shape[axis] = 0
                stacked.append(xp.zeros(tuple(shape), dtype=out.dtype))
        self.write_results([*state, *stacked], outputs, xp)

    def _bound_inputs(self) -> Any:
        args = getattr(self, "_bound_args", None)
        return args[0] if args is not None else None

    def _check_limit(self, iteration: int) -> None:
        limit = self.params.get("iteration_limit")
        if limit is not None and iteration >= int(limit):
            raise ExecutionError(
                f"{self.label}: the loop runs past {limit} iterations, the bound its scan outputs were planned "
                "for (its trip count is not known at build time; give it a constant trip count)"
            )

    def _fits(self, bound: BoundSubgraph, carried_count: int, outputs: Sequence[Any]) -> bool:
        """Whether the bound body's results can go straight into the loop's buffers: carried results of
        the carried inputs' shapes and types, scan results stacked on axis 0 of their outputs."""
        ins, outs = bound.input_buffers, bound.output_buffers
        carried = zip(ins[2 : 2 + carried_count], outs[1 : 1 + carried_count])
        if any(a.shape != b.shape or a.dtype != b.dtype for a, b in carried):
            return False
        if outs[0].size != 1:
            return False
        scans = outs[1 + carried_count :]
        axes = [int(a) for a in self.params.get("scan_axes") or [0] * len(scans)]
        kinds = list(self.params.get("scan_kinds") or ["concatenate"] * len(scans))
        for axis, kind, item, out in zip(axes, kinds, scans, outputs[carried_count:]):
            if out.dtype != item.dtype:
                return False
            if kind == "last" and out.shape != item.shape:
                return False
            if kind != "last" and (axis != 0 or out.shape[1:] != item.shape):
                return False
        return True

    def _run_bound(self, loop: _BoundLoop, trip_count: int | None, keep_going: bool) -> None:
        """The loop on its bound body: the inputs written into the body's buffers once, carried results copied
        back into the carried inputs, scan results written into their slot of the output, nothing allocated.
        Runs inside the engine's run (its backend and error state hold)."""
        for buffer, value in loop.initial:
            buffer[...] = value
        loop.condition[...] = True
        stream = loop.bound.stream()
        if loop.stream != stream:
            loop.launch, loop.stream = loop.bound.launcher(stream), stream
        iteration = self._iterate(loop, trip_count, keep_going) if keep_going else 0
        for out, buffer in loop.finals:
            out[...] = buffer
        for out, _ in loop.lasts:
            if not iteration:
                out[...] = 0
        stacked = (slots for slots, _ in loop.stacked)
        for slots, kind in zip(stacked, (k for k in loop.kinds if k != "last")):
            if kind == "reverse" and iteration > 1:
                slots[:iteration] = slots[iteration - 1 :: -1].copy()
        if loop.sizes:
            self.write_sizes({index: iteration for index in loop.sizes}, loop.outputs)

    def _iterate(self, loop: _BoundLoop, trip_count: int | None, keep_going: bool) -> int:
        """Launch the bound body until the trip count or its condition ends the loop; the iterations run."""
        has_cond, while_first = bool(self.params.get("has_cond")), bool(self.params.get("while_first"))
        read_flag = has_cond or while_first
        launch, carry, counter, flag, condition = loop.launch, loop.carry, loop.counter, loop.flag, loop.condition
        stacked, lasts, capacity = loop.stacked, loop.lasts, loop.capacity
        # the last iteration's values stay in the body's results, unless a while condition ends the loop after
        # running the body once more (that iteration does not count)
        lasts_each = lasts if while_first else []
        end = max(trip_count, 0) if trip_count is not None else -1  # -1: no count ends it
        iteration = 0
        while iteration != end:
            if capacity is not None and iteration >= capacity:
                self._check_limit(iteration)
                raise ExecutionError(
                    f"{self.label}: a scan output has more than the {capacity} iterations its buffer was planned for"
                )
            counter[...] = iteration
            launch()
            if read_flag:
                value = bool(flag.item())
                if while_first and not value:
                    break
                keep_going = value or not has_cond
            if loop.set_condition:
                condition[...] = bool(flag.item())
            if carry is not None:
                carry()
            for slots, result in stacked:
                slots[iteration] = result
            for out, result in lasts_each:
                out[...] = result
            iteration += 1
            if not keep_going:
                break
        if not while_first and iteration:
            for out, result in lasts:
                out[...] = result
        return iteration
