"""What the control-flow importers share: subgraphs made self-contained, analysed once, emitted as one operator.

A subgraph's outer-scope names become extra inputs of the operator and of the
stored model (values known at build time are copied in as initializers).
Importing the model once with the outer shapes gives the result types and the
shape templates: per dimension a constant (``["c", n]``), an operator input's
dimension (``["i", input, axis]``), an operation of two templates, or a
data-dependent size with a bound (``["s", index, upper]``).
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
from ..scopes import free_names
from ..shape_inference import NetworkShapes
from .base import ImportContext

__all__ = ["Sizes", "Subgraph", "Template", "emit", "unknown_shape"]

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


def emit(
    ctx: ImportContext,
    kind: str,
    inputs: list[ITensor],
    types: list[DataType],
    shapes: list[Template],
    sizes: Sizes,
    params: dict[str, Any],
    weights: dict[str, np.ndarray],
) -> list[ITensor]:
    """The operator ``kind`` with these result types and shape templates; its outputs, without the size outputs."""
    params = {**params, "types": [t.name for t in types], "shapes": shapes, "num_sizes": sizes.count}
    outputs = ctx.op(kind, inputs, params, weights, num_outputs=len(types) + sizes.count)
    return outputs[: len(types)]


def unknown_shape(ctx: ImportContext, what: str, index: int) -> None:
    """Fail: result ``index`` of ``what`` has a dimension no template expresses."""
    ctx.fail(
        f"the shape of result {index} of its {what} depends on values in a way plugrt cannot express at build "
        "time (each dimension must be a constant or follow from the node's input shapes)"
    )
