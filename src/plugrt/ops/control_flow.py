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

from ..core.errors import ExecutionError, PlugrtError
from ..nodes.base import Binding
from .base import register_operator
from .subgraph import BoundSubgraph, ControlFlowOperator

__all__ = ["IfOperator", "LoopOperator", "ScanOperator"]


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

    The body is built and bound for the operator's input shapes when the operator is (:meth:`bind`); a run
    then writes the inputs into the body's buffers once and launches the body's kernels per iteration.
    """

    kind = "loop"

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        self._loop: _BoundLoop | None = None

    def bind(self, inputs: Sequence[Binding], outputs: Sequence[Binding], workspace: int) -> None:
        """Keep the arrays and bind the body for these shapes (built now where it was not yet)."""
        super().bind(inputs, outputs, workspace)
        ins, outs, xp = self._bound_args
        try:
            self._loop = self._bind_body(ins, outs, xp)
        except PlugrtError:
            self._loop = None  # the run builds it again and reports why it cannot

    def _bind_body(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any) -> _BoundLoop | None:
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
        loop = self._loop
        if loop is None or loop.inputs is not inputs or loop.outputs is not outputs:
            loop = self._bind_body(inputs, outputs, xp)
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


class _BoundBranch:
    """One branch of an ``if`` bound for the operator's arrays: its inputs and its results as pairs of arrays
    to copy, made when the branch is first taken after a bind."""

    def __init__(self, op: IfOperator, bound: BoundSubgraph, arrays: Sequence[Any], outputs: Sequence[Any]) -> None:
        self.bound = bound
        self.copies_in = list(zip(bound.input_buffers, arrays))
        fixed = all(dim[0] != "s" for template in op.param("shapes") for dim in template)
        same = all(out.shape == result.shape for out, result in zip(outputs, bound.output_buffers))
        #: (output, result) pairs copied after the branch ran; None: through write_results (sizes to write)
        self.copies_out = list(zip(outputs, bound.output_buffers)) if fixed and same else None
        self.stream = -1
        self.launch: Any = None


@register_operator
class IfOperator(ControlFlowOperator):
    """ONNX If: inputs ``cond outer...``; params ``then_inputs`` / ``else_inputs`` list the outer
    inputs (positions) each branch reads, in its subgraph's input order.

    A branch is built for the operator's input shapes when first taken and bound with its copies once per
    bind of the operator; a run reads the condition, copies the branch's inputs in, launches its kernels and
    copies its results out."""

    kind = "if"

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        #: per branch taken since the last bind: its binding, or None where its results depend on data
        self._branches: dict[str, _BoundBranch | None] = {}

    def bind(self, inputs: Sequence[Binding], outputs: Sequence[Binding], workspace: int) -> None:
        super().bind(inputs, outputs, workspace)
        self._branches = {}

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        branch = "then" if bool(inputs[0].item()) else "else"
        kept = inputs is self._bound_args[0] and outputs is self._bound_args[1] if hasattr(self, "_bound_args") else False
        if kept and branch in self._branches:
            plan = self._branches[branch]
        else:
            plan = self._bind_branch(branch, inputs, outputs, xp)  # a branch that cannot be built raises here
            if kept:
                self._branches[branch] = plan
        if plan is None:  # results of data-dependent shapes
            arrays = [inputs[p] for p in self.param(f"{branch}_inputs")]
            self.write_results(self.subgraph(f"{branch}_branch").run(arrays, xp), outputs, xp)
            return
        for buffer, array in plan.copies_in:
            buffer[...] = array
        stream = plan.bound.stream()
        if plan.stream != stream:
            plan.launch, plan.stream = plan.bound.launcher(stream), stream
        plan.launch()  # inside this engine's run: its backend and error state hold
        if plan.copies_out is None:
            self.write_results(plan.bound.output_buffers, outputs, xp)
            return
        for out, result in plan.copies_out:
            out[...] = result

    def _bind_branch(self, branch: str, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any) -> _BoundBranch | None:
        arrays = [inputs[p] for p in self.param(f"{branch}_inputs")]
        bound = self.subgraph(f"{branch}_branch").bound(arrays, xp)
        return None if bound is None else _BoundBranch(self, bound, arrays, outputs)


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
class ScanOperator(ControlFlowOperator):
    """ONNX Scan (opset 9 on): inputs ``states... scan_inputs... outer...``; results: final states,
    then scan outputs. Params: ``num_states``, ``num_scan_inputs``, ``input_axes``,
    ``input_directions``, ``output_axes``, ``output_directions``, and ``batched``
    (opset 8: axis 0 of every input is a batch the body runs over, one sequence per element).

    As the loop's, the body is built and bound for the operator's shapes at :meth:`bind`; a step writes each
    scanned input's slice into the body's buffer, launches the body's kernels and writes each result into
    its place in the stacked output, the states carried as one copy.
    """

    kind = "scan"

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        self._scan: _BoundScan | None = None

    def bind(self, inputs: Sequence[Binding], outputs: Sequence[Binding], workspace: int) -> None:
        """Keep the arrays and bind the body for these shapes (built now where it was not yet)."""
        super().bind(inputs, outputs, workspace)
        try:
            self._scan = self._bind_body(*self._bound_args)
        except PlugrtError:
            self._scan = None  # the run builds it again and reports why it cannot

    def _bind_body(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any) -> _BoundScan | None:
        """The bound scan for these arrays, or None where the body's results depend on data or do not fit."""
        states, scans = int(self.param("num_states")), int(self.param("num_scan_inputs"))
        lead = 1 if self.params.get("batched") else 0
        if lead and (not states or any(a.shape[:1] != inputs[0].shape[:1] for a in (*inputs[: states + scans], *outputs))):
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
        scan = self._scan
        if scan is None or scan.inputs is not inputs or scan.outputs is not outputs:
            scan = self._bind_body(inputs, outputs, xp)
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
