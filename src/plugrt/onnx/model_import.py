"""One parse: an ONNX model's graph imported into a network (used by :class:`~plugrt.OnnxParser`).

Checks the opset and the graph, declares inputs, makes initializers into
constants on first use, imports nodes in topological order (importer, plugin,
or ONNX function body), binds every tensor to its ONNX name and marks the
outputs. Problems become the parser's error records.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from ..core.errors import CreatorNotFoundError, NetworkError, PlugrtError, ShapeError, TypeMismatchError
from ..core.logger import Severity
from ..network.standard_layers import IConstantLayer
from ..network.tensor import ITensor
from .attribute_types import check_attribute_types
from .errors import ErrorCode
from .external_data import load_external_data
from .functions import expand_node, function_opset, schema_function
from .graph import GraphError, sorted_nodes
from .importers.base import ImportContext, importer_for, node_label
from .plugin_fallback import import_plugin, wants_plugin
from .shape_inference import NetworkShapes
from .types import WIDENED, onnx_type_name, to_datatype, to_supported_array

__all__ = ["MIN_OPSET", "ModelImport"]

#: The oldest default-domain opset the importers implement.
MIN_OPSET = 7


class ModelImport:
    """One parse: the model's tensors mapped to the network's."""

    def __init__(self, parser: Any, model: Any, path: str | None) -> None:
        self.parser = parser
        self.network = parser.network
        self.logger = parser.logger
        self.model = model
        self.path = path
        self.tensors: dict[str, ITensor] = {}
        self.named: set[int] = set()
        self.failed: set[str] = set()
        self.constants: dict[int, np.ndarray] = {}
        self.shapes = NetworkShapes()
        self.initializers: dict[str, Any] = {}
        #: initializers read from external files straight into arrays (by name)
        self.external: dict[str, np.ndarray] = {}
        self.expansions = 0

    def warn(self, message: str) -> None:
        if self.logger is not None:
            self.logger.emit(Severity.WARNING, message)

    def run(self) -> None:
        model = self.model
        if not model.HasField("graph"):
            raise GraphError("the model has no graph (empty or not an ONNX model)")
        if model.functions:
            model = self.model = _inline_functions(model)
        graph = model.graph
        opset = self.default_opset(model)
        if opset is None:
            return
        if not graph.output:
            self.parser._error(ErrorCode.INVALID_GRAPH, "the graph has no outputs (an empty graph)", func="parseGraph")
            return
        if self.path is None:
            self.external = load_external_data(model, None, "bytes")
        else:  # the model file's folder, or the folder the caller named
            folder = self.path if os.path.isdir(self.path) else os.path.dirname(os.path.abspath(self.path))
            self.external = load_external_data(model, folder, repr(self.path))
        self.initializers = {t.name: t for t in graph.initializer}
        for value in graph.input:
            if value.name not in self.initializers:
                self.add_input(value)
        order = sorted_nodes(graph, set(self.initializers) | {v.name for v in graph.input})
        self.parser._last_nodes = list(graph.node)
        for problem in order.problems:
            self.parser._error(ErrorCode.INVALID_GRAPH, problem.message, problem.index, problem.node, "parseGraph")
        importable = set(order.indices)
        for index, node in enumerate(graph.node):
            if index not in importable:
                self.failed.update(name for name in node.output if name)
        for index in order.indices:
            self.import_node(index, graph.node[index], opset)
        for value in graph.output:
            self.mark_output(value)

    # --- model-level checks --------------------------------------------------------------
    def default_opset(self, model: Any) -> int | None:
        latest = onnx.defs.onnx_opset_version()
        versions = [op.version for op in model.opset_import if op.domain in ("", "ai.onnx")]
        if not versions:
            if any(n.domain in ("", "ai.onnx") for n in model.graph.node):
                self.parser._error(
                    ErrorCode.INVALID_GRAPH,
                    "the model imports no opset of the default ONNX domain (opset_import is missing)",
                    func="importModel",
                )
                return None
            return latest
        version = int(versions[0])
        if not MIN_OPSET <= version <= latest:
            self.parser._error(
                ErrorCode.UNSUPPORTED_GRAPH,
                f"the model uses opset {version} of the default domain; plugrt supports opsets "
                f"{MIN_OPSET} to {latest} (onnx {onnx.__version__}); convert it with onnx.version_converter",
                func="importModel",
            )
            return None
        return version

    def add_input(self, value: Any) -> None:
        name = value.name
        kind = value.type.WhichOneof("value")
        if kind != "tensor_type":
            raise GraphError(f"graph input {name!r} is a {kind or 'value without a type'}; only tensors are supported")
        elem = value.type.tensor_type.elem_type
        dtype = to_datatype(elem)
        if dtype is None:
            raise GraphError(f"graph input {name!r} has type {onnx_type_name(elem)}, which plugrt does not support")
        if elem in WIDENED:
            self.warn(
                f"graph input {name!r} is {onnx_type_name(elem)}, which TensorRT and plugrt lack; it is imported as "
                f"{dtype.name} (plugrt.compile and the ONNX backend convert arrays at the boundary)"
            )
        if not value.type.tensor_type.HasField("shape"):
            raise GraphError(f"graph input {name!r} has no shape (its rank is unknown); give it a shape")
        dims = [
            d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else -1
            for d in value.type.tensor_type.shape.dim
        ]
        self.parser.input_types[name] = elem
        tensor = self.network.add_input(name, dtype, dims)
        self.tensors[name] = tensor
        self.named.add(id(tensor))

    # --- tensors -----------------------------------------------------------------------------
    def tensor(self, name: str) -> ITensor:
        found = self.tensors.get(name)
        if found is not None:
            return found
        proto = self.initializers.get(name)
        if proto is None:
            raise GraphError(f"tensor {name!r} is not produced by any node, input or initializer")
        tensor = self.initializer(proto)
        self.tensors[name] = tensor
        return tensor

    def initializer(self, proto: Any) -> ITensor:
        if proto.data_type == TensorProto.STRING:
            raise GraphError(f"initializer {proto.name!r} holds strings, which plugrt does not support")
        try:
            array = self.external.get(proto.name)
            if array is None:
                array = numpy_helper.to_array(proto)
        except Exception as exc:
            raise GraphError(f"initializer {proto.name!r} cannot be read: {exc}") from exc
        converted = to_supported_array(np.asarray(array))
        if converted is None:
            raise GraphError(
                f"initializer {proto.name!r} has type {onnx_type_name(proto.data_type)}, which plugrt does not support"
            )
        converted = np.require(converted, requirements="C")
        layer = self.network.add_constant(converted.shape, converted)
        layer.name = f"initializer {proto.name}"
        tensor = layer.get_output(0)
        self.rename(tensor, proto.name)
        self.constants[id(tensor)] = converted
        return tensor

    def rename(self, tensor: ITensor, name: str) -> None:
        if id(tensor) in self.named or tensor.is_network_input:
            return
        try:
            tensor.name = name
        except NetworkError:
            return
        self.named.add(id(tensor))

    # --- nodes -------------------------------------------------------------------------------
    def import_node(self, index: int, node: Any, opset: int) -> None:
        if any(name in self.failed for name in node.input if name):
            self.failed.update(name for name in node.output if name)
            return
        try:
            self.dispatch(node, opset, 0)
        except GraphError as exc:
            self.node_error(ErrorCode.INVALID_GRAPH, index, node, str(exc))
        except CreatorNotFoundError as exc:
            self.node_error(ErrorCode.UNSUPPORTED_NODE, index, node, str(exc))
        except ShapeError as exc:
            self.node_error(ErrorCode.UNSUPPORTED_NODE_SHAPE, index, node, str(exc))
        except TypeMismatchError as exc:
            self.node_error(ErrorCode.UNSUPPORTED_NODE_DATATYPE, index, node, str(exc))
        except PlugrtError as exc:
            self.node_error(ErrorCode.UNSUPPORTED_NODE, index, node, str(exc))
        except RecursionError:
            self.node_error(ErrorCode.INTERNAL_ERROR, index, node, "the node's graph is nested too deeply")
        except Exception as exc:  # a safety net: an importer bug is a parse error, never an exception
            self.node_error(ErrorCode.INTERNAL_ERROR, index, node, f"{type(exc).__name__}: {exc}")

    def dispatch(self, node: Any, opset: int, depth: int) -> None:
        """Import one node: its importer, else a registered plugin, else its ONNX function body."""
        inputs = [self.tensor(name) if name else None for name in node.input]
        ctx = ImportContext(self.network, node, opset, self.logger, self.constants, self.shapes)
        ctx.graph_import = self
        importer = importer_for(node.op_type, node.domain)
        if importer is not None and not wants_plugin(node):
            check_attribute_types(node, opset)
            self.bind_outputs(node, importer(ctx, inputs))
            return
        body = None
        if importer is None and not wants_plugin(node) and not _has_creator(node) and depth < _MAX_FUNCTION_DEPTH:
            body = schema_function(node, opset, [self.known(t) for t in inputs])
        if body is None:
            self.bind_outputs(node, import_plugin(ctx, inputs, explicit=importer is not None))
            return
        function, schema = body
        inner_opset = function_opset(function, opset)
        self.expansions += 1
        prefix = f"{node.name or node.op_type}#{self.expansions}/"
        for inner in expand_node(node, function, schema, prefix):
            try:
                self.dispatch(inner, inner_opset, depth + 1)
            except PlugrtError as exc:
                raise type(exc)(f"in its ONNX function body, {exc}") from exc
        missing = [name for name in node.output if name and name not in self.tensors]
        if missing:
            raise GraphError(f"its ONNX function body does not produce {missing}")

    def known(self, tensor: ITensor | None) -> Any:
        if tensor is None:
            return None
        try:
            return self.shapes.info(tensor)
        except PlugrtError:
            return None

    def node_error(self, code: ErrorCode, index: int, node: Any, message: str) -> None:
        self.failed.update(name for name in node.output if name)
        self.parser._error(code, message.removeprefix(f"{node_label(node)}: "), index, node, "importNode")

    def bind_outputs(self, node: Any, outputs: Iterable[Any]) -> None:
        produced = list(outputs)
        for position, name in enumerate(node.output):
            if not name:
                continue
            tensor = produced[position] if position < len(produced) else None
            if tensor is None:
                raise GraphError(f"the importer does not produce output {position} ({name!r})")
            self.tensors[name] = tensor
            self.rename(tensor, name)

    # --- outputs -----------------------------------------------------------------------------
    def mark_output(self, value: Any) -> None:
        name = value.name
        if name in self.failed:
            return
        tensor = self.tensors.get(name)
        if tensor is None and name in self.initializers:
            try:
                tensor = self.tensor(name)
            except PlugrtError as exc:
                self.parser._error(ErrorCode.INVALID_GRAPH, str(exc), func="markOutputs")
                return
        if tensor is None:
            self.parser._error(
                ErrorCode.INVALID_GRAPH, f"graph output {name!r} is not produced by any node", func="markOutputs"
            )
            return
        if value.type.HasField("tensor_type"):
            self.parser.output_types[name] = value.type.tensor_type.elem_type
        if tensor.is_network_input and tensor.name == name:
            self.parser._error(
                ErrorCode.UNSUPPORTED_GRAPH,
                f"graph output {name!r} is the graph input of the same name; a network output needs its own tensor "
                "(insert an Identity node with another output name)",
                func="markOutputs",
            )
            return
        if (
            tensor.is_network_input
            or tensor.is_network_output
            or tensor.name != name
            or isinstance(tensor.producer, IConstantLayer)
        ):
            if tensor.name == name:
                self.named.discard(id(tensor))
                tensor.name = f"{name} (before output copy)"
            layer = self.network.add_identity(tensor)
            layer.name = f"output {name}"
            tensor = layer.get_output(0)
            tensor.name = name
            self.named.add(id(tensor))
            self.tensors[name] = tensor
        self.network.mark_output(tensor)


_MAX_FUNCTION_DEPTH = 8


def _has_creator(node: Any) -> bool:
    """Whether a creator is registered under the key the plugin fallback would look up."""
    from ..interfaces.registry import get_plugin_registry

    attrs = {a.name: a for a in node.attribute}
    version = attrs["plugin_version"].s.decode("utf-8", "replace") if "plugin_version" in attrs else "1"
    namespace = attrs["plugin_namespace"].s.decode("utf-8", "replace") if "plugin_namespace" in attrs else ""
    return any(
        (c.name, c.plugin_version, c.plugin_namespace) == (node.op_type, version, namespace)
        for c in get_plugin_registry().all_creators
    )


def _inline_functions(model: Any) -> Any:
    """The model with its local functions inlined, except those a registered plugin implements.

    As in TensorRT's parser, a plugin of the function's name takes precedence over its body.
    """
    from onnx.inliner import inline_selected_functions

    from ..interfaces.registry import get_plugin_registry

    names = {c.name for c in get_plugin_registry().all_creators}
    keep = [(f.domain, f.name) for f in model.functions if f.name in names]
    try:
        return inline_selected_functions(model, keep, exclude=True)
    except Exception as exc:
        raise GraphError(f"the model's local functions cannot be inlined: {exc}") from exc
