"""The ``scan`` operator (ONNX Scan) on its bound body, the loop's mechanism.

Per sequence (the one sequence, or each batch element of an opset-8 scan) a step writes each scanned input's
slice into the body's buffer, launches the body's kernels, copies the states back as one block and writes
each result into its place in the stacked outputs, through views made when the operator is bound. Bodies
whose results depend on data run on fresh arrays each step instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import ExecutionError
from .base import register_operator
from .subgraph import BodyOperator, BoundSubgraph

__all__ = ["ScanOperator"]


class _BoundScan:
    """A scan's body bound for its shapes, and what each step touches, made once (at bind): per sequence (the
    one sequence, or each batch element of an opset-8 scan) the scanned inputs and the stacked outputs as
    views with the scanned axis first, the states carried from step to step as one block copy."""

    def __init__(
        self, op: ScanOperator, bound: BoundSubgraph, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any
    ) -> None:
        states, scans = int(op.param("num_states")), int(op.param("num_scan_inputs"))
        self.bound = bound
        self.inputs, self.outputs = inputs, outputs
        ins, outs = bound.input_buffers, bound.output_buffers
        self.states = ins[:states]
        self.outer = list(zip(ins[states + scans :], inputs[states + scans :]))
        self.carry = bound.carry(0, 0, states)
        in_axes = [int(a) for a in op.param("input_axes")]
        out_axes = [int(a) for a in op.param("output_axes")]
        in_reverse = [bool(int(d)) for d in op.param("input_directions")]
        out_reverse = [bool(int(d)) for d in op.param("output_directions")]
        batched = bool(op.params.get("batched"))
        picks: list[Any] = list(range(inputs[0].shape[0])) if batched else [None]
        #: per sequence: (initial states, [(body buffer, scanned view, reversed)], final states' targets,
        #: [(stacked view, body result, reversed)])
        self.sequences = []
        for b in picks:

            def pick(array: Any, b: Any = b) -> Any:
                return array if b is None else array[b]

            scanned = [
                (buffer, xp.moveaxis(pick(x), axis, 0), rev)
                for buffer, x, axis, rev in zip(ins[states:], inputs[states : states + scans], in_axes, in_reverse)
            ]
            stacked = [
                (xp.moveaxis(pick(out), axis, 0), result, rev)
                for out, result, axis, rev in zip(outputs[states:], outs[states:], out_axes, out_reverse)
            ]
            self.sequences.append(
                ([pick(a) for a in inputs[:states]], scanned, [pick(o) for o in outputs[:states]], stacked)
            )
        self.length = int(inputs[states].shape[in_axes[0] + (1 if batched else 0)])
        self.stream = -1
        self.launch: Any = None

    def fits(self) -> bool:
        """Whether every step's values go straight between the views and the body: the states keep their shapes
        and types, each result has the shape and type of one step of its stacked output."""
        outs = self.bound.output_buffers
        if any(a.shape != b.shape or a.dtype != b.dtype for a, b in zip(self.states, outs)):
            return False
        _, scanned, _, stacked = self.sequences[0]
        if any(view.shape[0] != self.length for _, view, _ in scanned):
            return False
        if any(b.shape != view.shape[1:] or b.dtype != view.dtype for b, view, _ in scanned):
            return False
        return all(view.shape[1:] == result.shape and view.dtype == result.dtype for view, result, _ in stacked)


@register_operator
class ScanOperator(BodyOperator):
    """ONNX Scan (opset 9 on): inputs ``states... scan_inputs... outer...``; results: final states,
    then scan outputs. Params: ``num_states``, ``num_scan_inputs``, ``input_axes``,
    ``input_directions``, ``output_axes``, ``output_directions``, and ``batched``
    (opset 8: axis 0 of every input is a batch the body runs over, one sequence per element).

    As the loop's, the body is built and bound for the operator's shapes at :meth:`bind`; a step writes each
    scanned input's slice into the body's buffer, launches the body's kernels and writes each result into
    its place in the stacked output, the states carried as one copy.
    """

    kind = "scan"

    def bind_body(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any) -> _BoundScan | None:
        """The bound scan for these arrays, or None where the body's results depend on data or do not fit."""
        states, scans = int(self.param("num_states")), int(self.param("num_scan_inputs"))
        lead = 1 if self.params.get("batched") else 0
        if lead and (
            not states or any(a.shape[:1] != inputs[0].shape[:1] for a in (*inputs[: states + scans], *outputs))
        ):
            return None
        axes = [int(a) for a in self.param("input_axes")]
        formal = [xp.empty(a.shape[lead:], a.dtype) for a in inputs[:states]]
        for x, axis in zip(inputs[states : states + scans], axes):
            shape = x.shape[lead:]
            formal.append(xp.empty(shape[:axis] + shape[axis + 1 :], x.dtype))
        bound = self.subgraph("body").bound([*formal, *inputs[states + scans :]], xp)
        if bound is None:
            return None
        scan = _BoundScan(self, bound, inputs, outputs, xp)
        return scan if scan.fits() else None

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        scan = self.bound_body(inputs, outputs, xp)
        if scan is not None:
            self._run_bound(scan)
            return
        states_count, scan_count = int(self.param("num_states")), int(self.param("num_scan_inputs"))
        states = list(inputs[:states_count])
        scanned = list(inputs[states_count : states_count + scan_count])
        outer = list(inputs[states_count + scan_count :])
        if not self.params.get("batched"):
            self.write_results(self._scan_steps(states, scanned, outer, xp), outputs, xp)
            return
        per_batch = [
            self._scan_steps([s[b] for s in states], [x[b] for x in scanned], outer, xp)
            for b in range(states[0].shape[0])
        ]
        self.write_results([xp.stack(list(parts)) for parts in zip(*per_batch)], outputs, xp)

    def _run_bound(self, scan: _BoundScan) -> None:
        """Every sequence on the bound body (inside the engine's run: its backend and error state hold)."""
        for buffer, value in scan.outer:
            buffer[...] = value
        stream = scan.bound.stream()
        if scan.stream != stream:
            scan.launch, scan.stream = scan.bound.launcher(stream), stream
        launch, carry, length, last = scan.launch, scan.carry, scan.length, scan.length - 1
        for initial, scanned, finals, stacked in scan.sequences:
            for buffer, value in zip(scan.states, initial):
                buffer[...] = value
            for step in range(length):
                for buffer, view, reverse in scanned:
                    buffer[...] = view[last - step if reverse else step]
                launch()
                if carry is not None:
                    carry()
                for view, result, reverse in stacked:
                    view[last - step if reverse else step] = result
            for out, buffer in zip(finals, scan.states):
                out[...] = buffer

    def _scan_steps(self, states: list[Any], scanned: list[Any], outer: list[Any], xp: Any) -> list[Any]:
        """One sequence with the body run on fresh arrays each step (bodies whose results depend on data)."""
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
