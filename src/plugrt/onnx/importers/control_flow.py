"""Control flow: ``Loop``, ``If``, ``Scan``.

Each node becomes one operator (:mod:`plugrt.ops.control_flow`) whose subgraphs
are stored as self-contained ONNX models: the outer-scope names a subgraph
reads become extra inputs of the operator and of the stored model. At import
each subgraph is imported once with the outer shapes (so a body that plugrt
cannot import fails here, naming the node), which gives the result types and
the shape templates: per dimension a constant, an input's dimension, an
expression of those, or a data-dependent size with a bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import GraphProto, TensorProto, helper, numpy_helper

from ...builder.profiles import symbol_name
from ...core.errors import PlugrtError
from ...core.logger import Logger, Severity
from ...core.types import DataType
from ...network.tensor import ITensor
from ...shape.expr import IDimensionExpr
from ..scopes import free_names, rename_free_names
from ..shape_inference import NetworkShapes
from .base import ImportContext, register_importer

__all__ = ["UNBOUNDED_LOOP_LIMIT"]

#: Iterations the scan outputs of a loop are planned for when its trip count is unknown at build time.
UNBOUNDED_LOOP_LIMIT = 1024

Template = list[Any]


def _elem_type(dtype: DataType) -> int:
    return int(helper.np_dtype_to_tensor_dtype(np.dtype(dtype.nptype())))


def _value_info(name: str, elem_type: int, shape: Sequence[IDimensionExpr] | None) -> onnx.ValueInfoProto:
    dims = None if shape is None else [d.get_constant_value() if d.is_constant() else f"{name}_{k}"
                                       for k, d in enumerate(shape)]
    return helper.make_tensor_value_info(name, elem_type, dims)


class Subgraph:
    """One subgraph made self-contained: its formal inputs, then the outer names it reads."""

    def __init__(self, ctx: ImportContext, graph: GraphProto, what: str) -> None:
        self.ctx = ctx
        self.graph = graph
        self.what = what
        if ctx.graph_import is None:
            ctx.fail(f"its {what} needs the graph it is in, but the importer was given none")
        #: outer names the subgraph reads as inputs, and those known at build time (copied in as initializers)
        self.outer: list[str] = []
        self.outer_tensors: list[ITensor] = []
        self.known: dict[str, np.ndarray] = {}
        for name in free_names(graph):
            try:
                tensor = ctx.graph_import.tensor(name)
            except PlugrtError as exc:
                ctx.fail(f"its {what} reads {name!r}: {exc}")
            value = ctx.value_of(tensor)
            if value is not None:
                self.known[name] = np.asarray(value)
            else:
                self.outer.append(name)
                self.outer_tensors.append(tensor)

    def model(self, formal: Sequence[tuple[DataType | None, Sequence[IDimensionExpr] | None]]) -> onnx.ModelProto:
        """The subgraph as a model; ``formal`` gives type and shape of each formal input (None: as declared)."""
        graph = GraphProto()
        graph.CopyFrom(self.graph)
        if len(graph.input) != len(formal):
            self.ctx.fail(f"its {self.what} has {len(graph.input)} inputs; {len(formal)} are expected")
        for value, (dtype, shape) in zip(graph.input, formal):
            declared = value.type.tensor_type.elem_type if value.type.HasField("tensor_type") else 0
            elem = declared or (_elem_type(dtype) if dtype is not None else TensorProto.FLOAT)
            value.CopyFrom(_value_info(value.name, elem, shape))
        for name, tensor in zip(self.outer, self.outer_tensors):
            info = self.ctx.info(tensor)
            graph.input.append(_value_info(name, _elem_type(info.dtype), info.shape))
        for name, value in self.known.items():
            graph.initializer.append(numpy_helper.from_array(value, name))
        # Results get their own names: a body may return an input or an outer value directly.
        outputs = list(graph.output)
        del graph.output[:]
        for index, value in enumerate(outputs):
            name = f"{self.what} result {index}"
            graph.node.append(helper.make_node("Identity", [value.name], [name]))
            elem = value.type.tensor_type.elem_type if value.type.HasField("tensor_type") else 0
            # without a declared type the result keeps the type plugrt computes
            graph.output.append(helper.make_tensor_value_info(name, elem, None) if elem else onnx.ValueInfoProto(name=name))
        opsets = [helper.make_opsetid("", self.ctx.opset)]
        return helper.make_model(graph, opset_imports=opsets, producer_name="plugrt subgraph")

    def analyse(
        self, model: onnx.ModelProto, positions: Sequence[int | list[Template] | None]
    ) -> list[tuple[DataType, list[Template | None]]]:
        """Import ``model`` once; per result its type and its shape templates.

        ``positions[i]`` is the operator input that model input ``i`` stands for
        (None for inputs such as the iteration number, a list of templates for
        an input whose dimensions are some of an input's); templates are None where
        a dimension is not expressible in the operator's inputs.
        """
        from ...builder.builder import Builder
        from ..parser import OnnxParser

        logger = Logger(Severity.INTERNAL_ERROR)  # problems are raised, naming the node
        network = Builder(logger).create_network(0)
        parser = OnnxParser(network, logger)
        if not parser.parse(model.SerializeToString()):
            errors = "; ".join(str(parser.get_error(i).desc()) for i in range(parser.num_errors))
            self.ctx.fail(f"its {self.what} cannot be imported: {errors}")
        symbols: dict[str, Template] = {}
        for index, value in enumerate(model.graph.input):
            position = positions[index] if index < len(positions) else None
            if position is None:
                continue
            for axis in range(len(value.type.tensor_type.shape.dim)):
                symbols[symbol_name(value.name, axis)] = (
                    ["i", position, axis] if isinstance(position, int) else position[axis]
                )
        shapes = NetworkShapes()
        outputs = {network.get_output(i).name: network.get_output(i) for i in range(network.num_outputs)}
        found = []
        for value in model.graph.output:
            tensor = outputs.get(value.name)
            if tensor is None:
                self.ctx.fail(f"its {self.what} does not produce {value.name!r}")
            try:
                info = shapes.info(tensor)
            except PlugrtError as exc:
                self.ctx.fail(f"its {self.what}: {exc}")
            found.append((info.dtype, [_template(d, symbols) for d in info.shape]))
        return found

    def weight(self, model: onnx.ModelProto) -> np.ndarray:
        return np.frombuffer(model.SerializeToString(), dtype=np.uint8).copy()


def _template(expr: IDimensionExpr, symbols: dict[str, Template]) -> Template | None:
    if expr.is_constant():
        return ["c", expr.get_constant_value()]
    if expr.is_size_tensor():
        return None
    if expr.symbol:
        return symbols.get(expr.symbol)
    op = getattr(expr, "_op", None)
    args: tuple[IDimensionExpr, ...] = getattr(expr, "_args", ())
    if op is None or len(args) != 2:
        return None
    first, second = _template(args[0], symbols), _template(args[1], symbols)
    if first is None or second is None:
        return None
    return ["op", op.name, first, second]


class Sizes:
    """Numbers the data-dependent sizes of one operator."""

    def __init__(self) -> None:
        self.count = 0

    def new(self, upper: Template) -> Template:
        self.count += 1
        return ["s", self.count - 1, upper]


def _outer_shape(ctx: ImportContext, tensor: ITensor) -> list[IDimensionExpr]:
    return ctx.shape_of(tensor)


def _emit(ctx: ImportContext, kind: str, inputs: list[ITensor], types: list[DataType], shapes: list[Template],
          sizes: Sizes, params: dict[str, Any], weights: dict[str, np.ndarray]) -> list[ITensor]:
    params = {**params, "types": [t.name for t in types], "shapes": shapes, "num_sizes": sizes.count}
    outputs = ctx.op(kind, inputs, params, weights, num_outputs=len(types) + sizes.count)
    return outputs[: len(types)]


def _unknown(ctx: ImportContext, what: str, index: int) -> None:
    ctx.fail(
        f"the shape of result {index} of its {what} depends on values in a way plugrt cannot express at build "
        "time (each dimension must be a constant or follow from the node's input shapes)"
    )


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
    formal += [(ctx.dtype_of(t), _outer_shape(ctx, t)) for t in carried]
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
                _unknown(ctx, "body", index + 1)
            types.append(dtype)
            shapes.append([iterations, *dims])
    params = {
        "has_trip_count": trip is not None,
        "has_cond": cond is not None,
        "num_carried": len(carried),
        "num_scan": scan_count,
        "iteration_limit": limit,
    }
    return _emit(ctx, "loop", op_inputs, types, shapes, sizes, params, {"body": body.weight(model)})


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
    branches = {name: Subgraph(ctx, ctx.required_attr(f"{name}_branch"), f"{name} branch") for name in ("then", "else")}
    op_inputs: list[ITensor] = [cond]
    position_of: dict[str, int] = {}
    for branch in branches.values():
        for name, tensor in zip(branch.outer, branch.outer_tensors):
            if name not in position_of:
                position_of[name] = len(op_inputs)
                op_inputs.append(tensor)
    models, results, params = {}, {}, {}
    for name, branch in branches.items():
        models[name] = branch.model([])
        positions: list[int | None] = [position_of[n] for n in branch.outer]
        results[name] = branch.analyse(models[name], positions)
        params[f"{name}_inputs"] = positions
    then_results, else_results = results["then"], results["else"]
    if len(then_results) != len(else_results):
        ctx.fail(f"its branches return {len(then_results)} and {len(else_results)} results; they must agree")
    sizes = Sizes()
    types, shapes = [], []
    for index, ((then_type, then_dims), (else_type, else_dims)) in enumerate(zip(then_results, else_results)):
        if then_type != else_type:
            ctx.fail(f"result {index} is {then_type.name} in the then branch and {else_type.name} in the else branch")
        if len(then_dims) != len(else_dims):
            ctx.fail(f"result {index} has rank {len(then_dims)} in the then branch and {len(else_dims)} in the other")
        dims = []
        for first, second in zip(then_dims, else_dims):
            if first is None or second is None:
                _unknown(ctx, "branches", index)
            dims.append(first if first == second else sizes.new(["op", "MAX", first, second]))
        types.append(then_type)
        shapes.append(dims)
    weights = {f"{name}_branch": branches[name].weight(models[name]) for name in branches}
    return _emit(ctx, "if", op_inputs, types, shapes, sizes, params, weights)


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
        shape = _outer_shape(ctx, tensor)[lead:]
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
            _unknown(ctx, "body", index)
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
    return _emit(ctx, "scan", [*inputs, *body.outer_tensors], types, shapes, Sizes(), params,
                 {"body": body.weight(model)})

