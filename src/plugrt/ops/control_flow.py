"""Control flow: ``loop`` (ONNX Loop), ``if`` (ONNX If) and ``scan`` (ONNX Scan).

Each is one operator whose kernel runs sub-engines built from its subgraphs
(:mod:`plugrt.ops.subgraph`). Inputs are the node's inputs followed by the
outer-scope values the subgraphs read; results whose sizes depend on the data
(the scan outputs of a loop that may stop early, a branch-dependent dimension)
are data-dependent sizes, resolved after the step like NonZero's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import ExecutionError
from .base import register_operator
from .subgraph import BoundSubgraph, ControlFlowOperator

__all__ = ["IfOperator", "LoopOperator", "ScanOperator"]


def _scalar(value: Any) -> Any:
    """A 0-d or one-element array as a Python scalar (a device read on the GPU)."""
    return value.reshape(-1)[0].item()


@register_operator
class LoopOperator(ControlFlowOperator):
    """ONNX Loop: inputs ``[M] [cond] carried... outer...``; results: final carried values, then stacked scan outputs.

    Params: ``has_trip_count``, ``has_cond``, ``num_carried``, ``num_scan``, and
    ``iteration_limit`` (the bound the scan outputs' buffers were planned for
    when the trip count is not known at build time, or None). Loops of the
    network API (TensorRT's ``ILoop``) also give ``while_first`` (the body's
    first result is the condition of the iteration it starts, computed from
    that iteration's values: false ends the loop before the iteration counts),
    ``scan_kinds`` (per scan output ``"concatenate"``, ``"reverse"`` or
    ``"last"``: the last iteration's value) and ``scan_axes``.
    """

    kind = "loop"

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        has_trip, has_cond = bool(self.params.get("has_trip_count")), bool(self.params.get("has_cond"))
        carried_count, scan_count = int(self.param("num_carried")), int(self.param("num_scan"))
        position = 0
        trip_count = None
        if has_trip:
            trip_count = int(_scalar(inputs[0]))
            position += 1
        keep_going = True
        if has_cond:
            keep_going = bool(_scalar(inputs[position]))
            position += 1
        state = [xp.array(a, copy=True) for a in inputs[position : position + carried_count]]
        outer = list(inputs[position + carried_count :])
        body = self.subgraph("body")
        if trip_count is None and not has_cond and not bool(self.params.get("while_first")):
            raise ExecutionError(f"{self.label}: a Loop with neither a trip count nor a condition never ends")
        counter, condition = xp.asarray(np.int64(0)), xp.asarray(np.bool_(True))
        bound = body.bound([counter, condition, *state, *outer], xp)
        if bound is not None and self._fits(bound, carried_count, outputs):
            self._run_bound(bound, trip_count, keep_going, state, outer, outputs, xp)
            return
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

    def _run_bound(
        self,
        bound: BoundSubgraph,
        trip_count: int | None,
        keep_going: bool,
        state: list[Any],
        outer: list[Any],
        outputs: Sequence[Any],
        xp: Any,
    ) -> None:
        """The loop on one bound body: its inputs written in place (outer values once, carried results copied
        back into the carried inputs), scan results written into their slot of the output, nothing allocated."""
        carried_count = len(state)
        ins, outs = bound.input_buffers, bound.output_buffers
        condition, carried_in = ins[1], ins[2 : 2 + carried_count]
        for buffer, value in zip(ins[2:], [*state, *outer]):
            buffer[...] = value
        condition[...] = True
        scans = outs[1 + carried_count :]
        kinds = list(self.params.get("scan_kinds") or ["concatenate"] * len(scans))
        slots = [
            out if kind == "last" else out.reshape(-1)[: (out.size // max(item.size, 1)) * item.size].reshape(
                (out.size // max(item.size, 1), *item.shape)
            )
            for out, item, kind in zip(outputs[carried_count:], scans, kinds)
        ]
        with bound.running():
            iteration = self._iterate(bound, trip_count, keep_going, slots, kinds)
        for out, buffer in zip(outputs, carried_in):
            out[...] = buffer
        for slot, kind in zip(slots, kinds):
            if kind == "last" and not iteration:
                slot[...] = 0
            elif kind == "reverse" and iteration > 1:
                slot[:iteration] = slot[iteration - 1 :: -1].copy()
        stacked = [t for t, kind in zip(self.param("shapes")[carried_count:], kinds) if kind != "last"]
        self.write_sizes({int(t[0][1]): iteration for t in stacked if t and t[0][0] == "s"}, outputs)

    def _iterate(
        self, bound: BoundSubgraph, trip_count: int | None, keep_going: bool, slots: list[Any], kinds: list[str]
    ) -> int:
        """Launch the bound body until the trip count or its condition ends the loop; the iterations run."""
        has_cond, while_first = bool(self.params.get("has_cond")), bool(self.params.get("while_first"))
        carried_count = int(self.param("num_carried"))
        ins, outs = bound.input_buffers, bound.output_buffers
        counter, condition, carried_in = ins[0], ins[1], ins[2 : 2 + carried_count]
        scans = outs[1 + carried_count :]
        stream = bound.stream()
        iteration = 0
        while (trip_count is None or iteration < trip_count) and keep_going:
            if scans:
                self._check_limit(iteration)
            counter[...] = iteration
            bound.launch(stream)
            flag = bool(_scalar(outs[0]))
            if while_first and not flag:
                break
            condition[...] = flag
            keep_going = flag or not has_cond
            for buffer, result in zip(carried_in, outs[1 : 1 + carried_count]):
                buffer[...] = result
            for number, (slot, result, kind) in enumerate(zip(slots, scans, kinds)):
                if kind == "last":
                    slot[...] = result
                elif iteration < len(slot):
                    slot[iteration] = result
                else:
                    raise ExecutionError(
                        f"{self.label}: scan output {number} has more than the {len(slot)} iterations its "
                        "buffer was planned for"
                    )
            iteration += 1
        return iteration


@register_operator
class IfOperator(ControlFlowOperator):
    """ONNX If: inputs ``cond outer...``; params ``then_inputs`` / ``else_inputs`` list the outer
    inputs (positions) each branch reads, in its subgraph's input order."""

    kind = "if"

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        branch = "then" if bool(_scalar(inputs[0])) else "else"
        arrays = [inputs[p] for p in self.param(f"{branch}_inputs")]
        subgraph = self.subgraph(f"{branch}_branch")
        bound = subgraph.bound(arrays, xp)
        if bound is None:  # results of data-dependent shapes
            self.write_results(subgraph.run(arrays, xp), outputs, xp)
            return
        for buffer, array in zip(bound.input_buffers, arrays):
            buffer[...] = array
        bound.launch(bound.stream())  # inside this engine's run: its backend and error state hold
        self.write_results(bound.output_buffers, outputs, xp)


@register_operator
class ScanOperator(ControlFlowOperator):
    """ONNX Scan (opset 9 on): inputs ``states... scan_inputs... outer...``; results: final states,
    then scan outputs. Params: ``num_states``, ``num_scan_inputs``, ``input_axes``,
    ``input_directions``, ``output_axes``, ``output_directions``, and ``batched``
    (opset 8: axis 0 of every input is a batch the body runs over, one sequence per element)."""

    kind = "scan"

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        states_count, scan_count = int(self.param("num_states")), int(self.param("num_scan_inputs"))
        states = list(inputs[:states_count])
        scanned = list(inputs[states_count : states_count + scan_count])
        outer = list(inputs[states_count + scan_count :])
        if not self.params.get("batched"):
            self.write_results(self._scan(states, scanned, outer, xp), outputs, xp)
            return
        per_batch = [
            self._scan([s[b] for s in states], [x[b] for x in scanned], outer, xp) for b in range(states[0].shape[0])
        ]
        self.write_results([xp.stack(list(parts)) for parts in zip(*per_batch)], outputs, xp)

    def _scan(self, states: list[Any], scanned: list[Any], outer: list[Any], xp: Any) -> list[Any]:
        input_axes = [int(a) for a in self.param("input_axes")]
        directions = [int(d) for d in self.param("input_directions")]
        lengths = {x.shape[axis] for x, axis in zip(scanned, input_axes)}
        if len(lengths) > 1:
            raise ExecutionError(f"{self.label}: the scan inputs have different lengths {sorted(lengths)}")
        length = lengths.pop() if lengths else 0
        body = self.subgraph("body")
        collected: list[list[Any]] = []
        for step in range(length):
            slices = [
                xp.take(x, length - 1 - step if direction else step, axis=axis)
                for x, axis, direction in zip(scanned, input_axes, directions)
            ]
            results = body.run([*states, *slices, *outer], xp)
            states = list(results[: len(states)])
            for index, value in enumerate(results[len(states) :]):
                if len(collected) <= index:
                    collected.append([])
                collected[index].append(xp.asarray(value))
        output_axes = [int(a) for a in self.param("output_axes")]
        output_directions = [int(d) for d in self.param("output_directions")]
        finished = []
        shapes = self.param("shapes")[len(states) :]
        for index, (axis, direction) in enumerate(zip(output_axes, output_directions)):
            values = collected[index] if index < len(collected) else []
            if direction:
                values = values[::-1]
            if values:
                finished.append(xp.stack(values, axis=axis))
            else:
                finished.append(xp.zeros([0] * len(shapes[index]), dtype=np.float32))
        return [*states, *finished]
