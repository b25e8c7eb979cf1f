"""The interior of a network-API loop or conditional as an ONNX subgraph, and what it computes.

The subgraph's nodes are the interior layers' operators (nodes of plugrt's own
domain, :mod:`plugrt.onnx.importers.operator_nodes`) plus a few ONNX nodes the
lowering adds (iterator slices, result copies). :func:`analyse` imports it once
with the shapes the builder knows for the operator's inputs, giving each
result's type and its shape as templates (:func:`plugrt.ops.subgraph.template_dim`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper

from ..core.errors import BuildError, PlugrtError
from ..core.logger import Logger, Severity
from ..core.types import DataType
from ..network.layer import ILayer, IPluginV2Layer, IPluginV3Layer
from ..network.tensor import ITensor
from ..shape.expr import IDimensionExpr
from .profiles import symbol_name

__all__ = ["BodyGraph", "Template", "analyse", "elem_type", "input_templates", "shown"]

Template = list[Any]


def elem_type(dtype: DataType) -> int:
    """The ONNX element type of ``dtype``."""
    return int(helper.np_dtype_to_tensor_dtype(np.dtype(dtype.nptype())))


class BodyGraph:
    """An ONNX graph being written: inputs with types and shapes, nodes, results."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.inputs: list[onnx.ValueInfoProto] = []
        self.positions: list[int | None] = []  # the operator input each graph input stands for
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.results: list[str] = []

    def add_input(self, name: str, dtype: DataType, shape: Sequence[IDimensionExpr], position: int | None) -> None:
        dims = [d.get_constant_value() if d.is_constant() else f"{name}_{k}" for k, d in enumerate(shape)]
        self.inputs.append(helper.make_tensor_value_info(name, elem_type(dtype), dims))
        self.positions.append(position)

    def add_layers(self, layers: Sequence[ILayer]) -> None:
        """One node per interior layer (its operator), producers first."""
        from ..onnx.importers.operator_nodes import operator_node

        for layer in layers:
            if isinstance(layer, (IPluginV2Layer, IPluginV3Layer)):
                raise BuildError(f"{self.owner}: plugin layer {layer.name!r} inside it is not supported")
            op = layer.to_operator()
            inputs = [t.name for t in layer._inputs if t is not None]
            outputs = [t.name for t in layer._outputs]
            self.nodes.append(operator_node(op.kind, dict(op.params), dict(op.weights), inputs, outputs))

    def constant(self, name: str, value: np.ndarray) -> str:
        self.initializers.append(onnx.numpy_helper.from_array(value, name))
        return name

    def add_result(self, tensor_name: str) -> None:
        """A result copying ``tensor_name`` (results get names of their own)."""
        name = f"{self.owner} result {len(self.results)}"
        self.nodes.append(helper.make_node("Identity", [tensor_name], [name]))
        self.results.append(name)

    def model(self) -> onnx.ModelProto:
        from ..onnx.importers.operator_nodes import OPERATOR_DOMAIN

        outputs = [onnx.ValueInfoProto(name=name) for name in self.results]
        graph = helper.make_graph(self.nodes, "body", self.inputs, outputs, self.initializers)
        opsets = [helper.make_opsetid("", 17), helper.make_opsetid(OPERATOR_DOMAIN, 1)]
        return helper.make_model(graph, opset_imports=opsets, producer_name="plugrt network control flow")


def analyse(body: BodyGraph, model: onnx.ModelProto) -> list[tuple[DataType, list[Template | None]]]:
    """Import ``model`` once; per result its type and shape templates (None where not expressible)."""
    from ..onnx.importers.operator_nodes import ensure_operator_importers
    from ..onnx.importers.subgraphs import _template
    from ..onnx.parser import OnnxParser
    from ..onnx.shape_inference import NetworkShapes
    from .builder import Builder

    ensure_operator_importers()
    logger = Logger(Severity.INTERNAL_ERROR)
    network = Builder(logger).create_network(0)
    parser = OnnxParser(network, logger)
    if not parser.parse(model.SerializeToString()):
        errors = "; ".join(str(parser.get_error(i).desc()) for i in range(parser.num_errors))
        raise BuildError(f"{body.owner}: its layers cannot be built: {errors}")
    symbols: dict[str, Template] = {}
    for value, position in zip(model.graph.input, body.positions):
        if position is not None:
            for axis in range(len(value.type.tensor_type.shape.dim)):
                symbols[symbol_name(value.name, axis)] = ["i", position, axis]
    shapes = NetworkShapes()
    outputs = {network.get_output(i).name: network.get_output(i) for i in range(network.num_outputs)}
    found = []
    for name in body.results:
        try:
            info = shapes.info(outputs[name])
        except PlugrtError as exc:
            raise BuildError(f"{body.owner}: {exc}") from None
        found.append((info.dtype, [_template(d, symbols) for d in info.shape]))
    return found


def input_templates(shape: Sequence[IDimensionExpr], position: int) -> list[Template | None]:
    """The shape of operator input ``position`` as templates (constants where known)."""
    return [
        ["c", d.get_constant_value()] if d.is_constant() else ["i", position, axis] for axis, d in enumerate(shape)
    ]


def shown(tensor: ITensor, dtype: DataType, dims: Sequence[Template | None]) -> str:
    """How messages show a result: ``'name' (FLOAT [2, 3])``."""
    text = ", ".join("?" if d is None else str(d[1]) if d[0] == "c" else "…" for d in dims)
    return f"{tensor.name!r} ({dtype.name} [{text}])"
