"""Control flow: ``loop`` (ONNX Loop), ``if`` (ONNX If) and ``scan`` (ONNX Scan).

Each is one operator whose kernel runs sub-engines built from its subgraphs
(:mod:`plugrt.ops.subgraph`); the loop and the scan are in :mod:`.control_flow_loop` and
:mod:`.control_flow_scan`. Inputs are the node's inputs followed by the
outer-scope values the subgraphs read; results whose sizes depend on the data
(the scan outputs of a loop that may stop early, a branch-dependent dimension)
are data-dependent sizes, resolved after the step like NonZero's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..backends.registry import backend_for
from ..nodes.base import Binding
from .base import register_operator
from .control_flow_loop import LoopOperator
from .control_flow_scan import ScanOperator
from .subgraph import BoundSubgraph, ControlFlowOperator

__all__ = ["IfOperator", "LoopOperator", "ScanOperator"]


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

    def direct_launch(
        self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any
    ) -> tuple[Callable[..., Any], tuple[Any, ...]] | None:
        """:meth:`run` over the bound arrays as one call: the condition read, then the taken branch's copies in,
        kernels and copies out, without :meth:`run`'s lookups; a branch not yet bound since the operator was
        (or one whose results depend on data) goes through :meth:`run`."""
        condition = inputs[0]
        current_stream = backend_for(xp).current_stream

        def launch() -> None:
            plan = self._branches.get("then" if bool(condition.item()) else "else")
            if plan is None or plan.copies_out is None or plan.stream != int(current_stream()):
                self.run(inputs, outputs, xp)
                return
            for buffer, array in plan.copies_in:
                buffer[...] = array
            plan.launch()
            for out, result in plan.copies_out:
                out[...] = result

        return launch, ()

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        branch = "then" if bool(inputs[0].item()) else "else"
        args = getattr(self, "_bound_args", None)
        kept = args is not None and inputs is args[0] and outputs is args[1]  # the arrays of the last bind
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
