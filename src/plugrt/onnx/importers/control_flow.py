"""Control flow: ``Loop``, ``If``, ``Scan``.

Each node becomes one operator (:mod:`plugrt.ops.control_flow`) whose subgraphs
are stored as self-contained ONNX models: the outer-scope names a subgraph
reads become extra inputs of the operator and of the stored model. At import
each subgraph is imported once with the outer shapes (so a body that plugrt
cannot import fails here, naming the node), which gives the result types and
the shape templates (:mod:`.subgraphs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import GraphProto, TensorProto

from ...core.types import DataType
from ...network.tensor import ITensor
from ...shape.expr import IDimensionExpr
from ..scopes import rename_free_names
from .base import ImportContext, OnnxImportError, register_importer
from .subgraphs import Sizes, Subgraph, Template, emit, unknown_shape
from .tensor import add_op

__all__ = ["DECIDED_BY_DIMENSIONS", "UNBOUNDED_LOOP_LIMIT"]

#: Iterations the scan outputs are planned for when its trip count is unknown at build time.
UNBOUNDED_LOOP_LIMIT = 1024
#: What the error of an ``If`` says when its branches differ in rank and its condition follows from input
#: dimensions: imported again with those dimensions fixed, it is decided (``plugrt.compile`` does so)
DECIDED_BY_DIMENSIONS = "its condition follows from input dimensions"


@register_importer("Loop")
def import_loop(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    body = Subgraph(ctx, ctx.required_attr("body"), "body")
    trip, cond = [*inputs, None, None][:2]
    carried = inputs[2:]
    if any(t is None for t in carried):
        ctx.fail("a loop-carried initial value is missing")
    scan_count = len(body.graph.output) - 1 - len(carried)
    if scan_count < 0 or len(body.graph.input) != 2 + len(carried):
        ctx.fail(
            f"its body takes {len(body.graph.input)} inputs and returns {len(body.graph.output)} results; with "
            f"{len(carried)} loop-carried values it must take {2 + len(carried)} and return at least {1 + len(carried)}"
        )
    op_inputs = [t for t in (trip, cond) if t is not None] + carried + body.outer_tensors
    first_carried = len(op_inputs) - len(carried) - len(body.outer_tensors)
    formal: list[tuple[DataType | None, Sequence[IDimensionExpr] | None]] = [
        (DataType.INT64, []), (DataType.BOOL, [])
    ]
    formal += [(ctx.dtype_of(t), ctx.shape_of(t)) for t in carried]
    model = body.model(formal)
    positions: list[int | None] = [None, None, *range(first_carried, len(op_inputs))]
    results = body.analyse(model, positions)
    sizes = Sizes()
    # The number of iterations: exact when the trip count is known and nothing can stop the loop earlier.
    trip_value = ctx.value_of(trip) if trip is not None else None
    limit: int | None = None
    if trip_value is not None:
        bound: Template = ["c", max(int(np.asarray(trip_value).reshape(-1)[0]), 0)]
    elif trip is not None and ctx.values_of(trip):
        bound = ["v", 0]
    else:
        limit = UNBOUNDED_LOOP_LIMIT
        bound = ["c", limit]
        if scan_count:
            ctx.warn(
                f"its trip count is not known at build time; its scan outputs are planned for at most {limit} "
                "iterations (more is an error at run time)"
            )
    iterations = bound if cond is None and limit is None else sizes.new(bound) if scan_count else bound
    types: list[DataType] = []
    shapes: list[Template] = []
    for index, (dtype, dims) in enumerate(results[1:]):
        if index < len(carried):
            initial = _input_templates(ctx, carried[index], first_carried + index)
            if dims != initial:
                ctx.fail(
                    f"loop-carried value {index} changes shape in the body ({_shown(initial)} -> {_shown(dims)}); "
                    "plugrt needs loop-carried shapes that stay the same"
                )
            types.append(ctx.dtype_of(carried[index]))
            shapes.append(initial)
        else:
            if any(d is None for d in dims):
                unknown_shape(ctx, "body", index + 1)
            types.append(dtype)
            shapes.append([iterations, *dims])
    params = {
        "has_trip_count": trip is not None,
        "has_cond": cond is not None,
        "num_carried": len(carried),
        "num_scan": scan_count,
        "iteration_limit": limit,
    }
    return emit(ctx, "loop", op_inputs, types, shapes, sizes, params, {"body": body.weight(model)})


def _input_templates(ctx: ImportContext, tensor: ITensor, position: int) -> list[Template | None]:
    """The shape of operator input ``position`` as templates (constants where known)."""
    return [["c", d.get_constant_value()] if d.is_constant() else ["i", position, axis]
            for axis, d in enumerate(ctx.shape_of(tensor))]


def _shown(dims: Sequence[Template | None]) -> str:
    return "[" + ", ".join("?" if d is None else str(d[1]) if d[0] == "c" else "…" for d in dims) + "]"


@register_importer("If")
def import_if(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    cond = inputs[0] if inputs else None
    if cond is None:
        ctx.fail("the condition input is missing")
    taken = _known_branch(ctx, cond)
    if taken is not None:  # decided at build time: the branch's nodes join the graph, as TensorRT's parser does
        return _inline(ctx, ctx.required_attr("then_branch" if taken else "else_branch"))
    selected = _select_constants(ctx, cond)
    if selected is not None:
        return selected
    branches = {name: Subgraph(ctx, ctx.required_attr(f"{name}_branch"), f"{name} branch") for name in ("then", "else")}
    op_inputs: list[ITensor] = [cond]
    position_of: dict[str, int] = {}
    for branch in branches.values():
        for name, tensor in zip(branch.outer, branch.outer_tensors):
            if name not in position_of:
                position_of[name] = len(op_inputs)
                op_inputs.append(tensor)
    models, results, params = {}, {}, {}
    failed: dict[str, OnnxImportError] = {}
    for name, branch in branches.items():
        models[name] = branch.model([])
        positions: list[int | None] = [position_of[n] for n in branch.outer]
        params[f"{name}_inputs"] = positions
        try:
            results[name] = branch.analyse(models[name], positions)
        except OnnxImportError as exc:
            failed[name] = exc
    if len(failed) == 2:
        raise failed["then"]
    for name, error in failed.items():  # only the branch taken runs: this one fails at run time if it is taken
        other = "else" if name == "then" else "then"
        ctx.warn(f"its {name} branch cannot run at these input shapes ({error}); the node's results are its "
                 f"{other} branch's, and taking the {name} branch is an error at run time")
        results[name] = results[other]
    then_results, else_results = results["then"], results["else"]
    if len(then_results) != len(else_results):
        ctx.fail(f"its branches return {len(then_results)} and {len(else_results)} results; they must agree")
    sizes = Sizes()
    types, shapes = [], []
    for index, ((then_type, then_dims), (else_type, else_dims)) in enumerate(zip(then_results, else_results)):
        if then_type != else_type:
            ctx.fail(f"result {index} is {then_type.name} in the then branch and {else_type.name} in the else branch")
        if len(then_dims) != len(else_dims):
            hint = (
                f"; {DECIDED_BY_DIMENSIONS}: fix them in the profile (min == max, e.g. "
                "plugrt.compile(..., shapes=...)) so that the branch is chosen when the network is built"
                if ctx.values_of(cond) else ""
            )
            ctx.fail(
                f"result {index} has rank {len(then_dims)} in the then branch and {len(else_dims)} in the other{hint}"
            )
        dims = []
        for first, second in zip(then_dims, else_dims):
            if first is None or second is None:
                unknown_shape(ctx, "branches", index)
            dims.append(first if first == second else sizes.new(["op", "MAX", first, second]))
        types.append(then_type)
        shapes.append(dims)
    weights = {f"{name}_branch": branches[name].weight(models[name]) for name in branches}
    return emit(ctx, "if", op_inputs, types, shapes, sizes, params, weights)


def _inline(ctx: ImportContext, graph: GraphProto) -> list[ITensor]:
    """Import ``graph``'s nodes into the graph being imported; its results are the node's outputs."""
    importer = ctx.graph_import
    if importer is None:
        ctx.fail("its branch needs the graph it is in, but the importer was given none")
    prefix = ctx.layer_name("branch") + "/"
    local = {t.name for t in graph.initializer} | {o for n in graph.node for o in n.output if o}

    def rename(name: str) -> str:
        return prefix + name if name in local else name

    for proto in graph.initializer:
        copy = TensorProto()
        copy.CopyFrom(proto)
        copy.name = rename(proto.name)
        importer.initializers[copy.name] = copy
    for node in graph.node:
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        copy.input[:] = [rename(n) if n else n for n in node.input]
        copy.output[:] = [rename(n) if n else n for n in node.output]
        rename_free_names(copy, rename)
        importer.dispatch(copy, ctx.opset, 1)
    return [importer.tensor(rename(value.name)) for value in graph.output]


def _select_constants(ctx: ImportContext, cond: ITensor) -> list[ITensor] | None:
    """An If whose branches only name values known at build (``Constant``/``Identity`` nodes, as exporters
    write ``x = a if c else b``) as one ``where`` per result, choosing by the condition; None otherwise."""
    branches = [ctx.required_attr(f"{name}_branch") for name in ("then", "else")]
    if any(n.op_type not in ("Constant", "Identity") for graph in branches for n in graph.node):
        return None
    if len(branches[0].output) != len(branches[1].output) or ctx.rank_of(cond) != 0:
        return None
    results = [_inline(ctx, graph) for graph in branches]  # constants only: they fold, nothing runs
    values = [[ctx.value_of(t) for t in tensors] for tensors in results]
    if any(v is None for vs in values for v in vs) or any(
        np.shape(a) != np.shape(b) or np.asarray(a).dtype != np.asarray(b).dtype for a, b in zip(*values)
    ):
        return None  # the If imports as a node; the inlined constants nobody reads are dropped at build
    return [add_op(ctx, "where", [cond, then, other])[0] for then, other in zip(*results)]


def _known_branch(ctx: ImportContext, cond: ITensor) -> bool | None:
    value = ctx.value_of(cond)
    if value is None or np.asarray(value).size != 1:
        return None
    return bool(np.asarray(value).reshape(-1)[0])


@register_importer("Scan")
def import_scan(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    body = Subgraph(ctx, ctx.required_attr("body"), "body")
    scan_count = int(ctx.required_attr("num_scan_inputs"))
    batched = ctx.opset < 9
    if batched:
        if inputs and inputs[0] is not None:
            lengths = ctx.value_of(inputs[0])
            if lengths is None:
                ctx.fail("sequence_lens must be known at build time (plugrt runs every sequence to its full length)")
        inputs = inputs[1:]
    if any(t is None for t in inputs):
        ctx.fail("an input is missing")
    states_count = len(inputs) - scan_count
    if states_count < 0:
        ctx.fail(f"num_scan_inputs is {scan_count}, but the node has only {len(inputs)} inputs")
    outputs_count = len(body.graph.output) - states_count
    if outputs_count < 0 or len(body.graph.input) != len(inputs):
        ctx.fail(
            f"its body takes {len(body.graph.input)} inputs and returns {len(body.graph.output)} results; the node "
            f"has {states_count} states and {scan_count} scan inputs"
        )
    directions = list(ctx.attr("scan_input_directions", ctx.attr("directions", [0] * scan_count)))
    input_axes = [0] * scan_count if batched else list(ctx.attr("scan_input_axes", [0] * scan_count))
    output_axes = [0] * outputs_count if batched else list(ctx.attr("scan_output_axes", [0] * outputs_count))
    output_directions = list(ctx.attr("scan_output_directions", [0] * outputs_count))
    lead = 1 if batched else 0
    input_axes = [ctx.axis(a, ctx.rank_of(t) - lead) for a, t in zip(input_axes, inputs[states_count:])]
    if len(directions) != scan_count or len(output_directions) != outputs_count:
        ctx.fail("scan_input_directions / scan_output_directions must have one entry per scan input / output")
    formal: list[tuple[DataType | None, Sequence[IDimensionExpr] | None]] = []
    positions: list[int | list[Template] | None] = []
    for index, tensor in enumerate(inputs):
        shape = ctx.shape_of(tensor)[lead:]
        # the body sees one element of the batch (opset 8) and one step of each scan input
        kept = list(range(lead, lead + len(shape)))
        if index >= states_count:
            axis = input_axes[index - states_count]
            shape = shape[:axis] + shape[axis + 1 :]
            kept = kept[:axis] + kept[axis + 1 :]
        formal.append((ctx.dtype_of(tensor), shape))
        positions.append([["i", index, k] for k in kept])
    model = body.model(formal)
    positions += list(range(len(inputs), len(inputs) + len(body.outer)))
    results = body.analyse(model, positions)
    if scan_count == 0:
        ctx.fail("a Scan needs at least one scan input")
    length: Template = ["i", states_count, input_axes[0] + lead]
    types: list[DataType] = []
    shapes: list[Template] = []
    batch: list[Template] = [["i", 0, 0]] if batched else []
    for index, (dtype, found) in enumerate(results):
        dims: list[Template] = [d for d in found if d is not None]
        if len(dims) != len(found):
            unknown_shape(ctx, "body", index)
        if index < states_count:
            shapes.append([*batch, *dims])
        else:
            axis = ctx.axis(output_axes[index - states_count], len(dims) + 1)
            shapes.append([*batch, *dims[:axis], length, *dims[axis:]])
        types.append(dtype if index >= states_count else ctx.dtype_of(inputs[index]))
    params = {
        "num_states": states_count,
        "num_scan_inputs": scan_count,
        "input_axes": input_axes,
        "input_directions": directions,
        "output_axes": [ctx.axis(a, len(results[states_count + k][1]) + 1) for k, a in enumerate(output_axes)],
        "output_directions": output_directions,
        "batched": batched,
    }
    if batched and states_count == 0:
        ctx.fail("an opset-8 Scan needs a state (its batch size comes from the states)")
    return emit(ctx, "scan", [*inputs, *body.outer_tensors], types, shapes, Sizes(), params,
                 {"body": body.weight(model)})

