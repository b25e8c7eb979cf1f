"""The importer registry: one function per ONNX op type, and the context it gets.

An importer turns one ONNX node into layers of the network::

    @register_importer("Relu")
    def import_relu(ctx: ImportContext, inputs: list[ITensor | None]) -> list[ITensor]:
        return [ctx.network.add_activation(inputs[0], ActivationType.RELU).get_output(0)]

``inputs`` holds one entry per node input, None where an optional input is
omitted (empty name). The importer returns one tensor per node output (None
for outputs it does not produce). Opset-dependent semantics read ``ctx.opset``.
Bad nodes raise :class:`OnnxImportError` through ``ctx.fail``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import numpy as np

from ...core.errors import PlugrtError
from ...core.logger import Severity
from ...core.types import DataType
from ...network.layer_enums import ActivationType, ElementWiseOperation, UnaryOperation
from ...network.tensor import ITensor
from ...shape.expr import IDimensionExpr
from ..shape_inference import NetworkShapes, TensorInfo
from ..types import to_supported_array

__all__ = [
    "ImportContext",
    "Importer",
    "OnnxImportError",
    "importer_for",
    "node_label",
    "register_importer",
    "registered_ops",
]


class OnnxImportError(PlugrtError, ValueError):
    """An ONNX node could not be imported (names node, op type and the reason)."""


Importer = Callable[["ImportContext", list[Any]], list[Any]]
_IMPORTERS: dict[tuple[str, str], Importer] = {}


def register_importer(op_type: str, domain: str = "") -> Callable[[Importer], Importer]:
    """Decorator registering the importer of ``op_type`` in ``domain``; duplicates raise."""

    def decorate(fn: Importer) -> Importer:
        key = (domain, op_type)
        if key in _IMPORTERS and _IMPORTERS[key] is not fn:
            raise PlugrtError(f"an importer for ONNX op {op_type!r} (domain {domain!r}) is already registered")
        _IMPORTERS[key] = fn
        return fn

    return decorate


def importer_for(op_type: str, domain: str = "") -> Importer | None:
    """The importer of ``op_type`` (``ai.onnx`` is the same domain as ``""``), or None."""
    _load_builtin_importers()
    if domain == "ai.onnx":
        domain = ""
    return _IMPORTERS.get((domain, op_type))


def registered_ops() -> list[str]:
    """Op types with a built-in importer (default domain)."""
    _load_builtin_importers()
    return sorted(op for domain, op in _IMPORTERS if domain == "")


def _load_builtin_importers() -> None:
    from . import builtin  # noqa: F401  (registers the built-in importers)


def node_label(node: Any) -> str:
    """How messages name a node: ``node 'name' (Op)``, or ``node (Op -> 'first output')`` when unnamed."""
    if node.name:
        return f"node {node.name!r} ({node.op_type})"
    outputs = [o for o in node.output if o]
    return f"node ({node.op_type} -> {outputs[0]!r})" if outputs else f"node ({node.op_type})"


class ImportContext:
    """What an importer works with: the network, the node, its attributes, the opset.

    Beyond attributes and tensors, it answers what TensorRT's ``ITensor.shape``
    answers during import (:meth:`shape_of`, :meth:`rank_of`, :meth:`dtype_of`,
    :meth:`values_of`), and adds the layers importers keep needing
    (:meth:`reshape`, :meth:`broadcast`, :meth:`cast`, :meth:`elementwise` ...),
    each named after the node.
    """

    def __init__(
        self,
        network: Any,
        node: Any,
        opset: int,
        logger: Any,
        constants: dict[int, np.ndarray],
        shapes: NetworkShapes | None = None,
    ) -> None:
        self.network = network
        self.node = node
        self.opset = opset
        self.logger = logger
        #: id(ITensor) -> value, for tensors known at build time (initializers, Constant nodes, folded shapes)
        self._constants = constants
        self._attrs = {a.name: a for a in node.attribute}
        self.shapes = shapes if shapes is not None else NetworkShapes()
        #: the number of layers before this node's: the node's layers come after (constant folding)
        self.first_layer = network.num_layers
        #: the import of the graph this node is in (set by the parser): ``tensor(name)`` resolves the
        #: outer-scope names a subgraph reads, ``dispatch(node, opset, depth)`` imports a node into it
        self.graph_import: Any = None

    # --- attributes ----------------------------------------------------------------
    def has_attr(self, name: str) -> bool:
        """Whether the node sets attribute ``name``."""
        return name in self._attrs

    def attr(self, name: str, default: Any = None) -> Any:
        """Attribute ``name`` as a Python value (ints, floats, str, lists, NumPy arrays for tensors)."""
        from onnx import helper, numpy_helper

        if name not in self._attrs:
            return default
        value = helper.get_attribute_value(self._attrs[name])
        if isinstance(value, bytes):
            return value.decode("utf-8")
        if hasattr(value, "data_type") and hasattr(value, "dims"):
            return numpy_helper.to_array(value)
        if isinstance(value, list) and value and isinstance(value[0], bytes):
            return [v.decode("utf-8") for v in value]
        return value

    def required_attr(self, name: str) -> Any:
        """Attribute ``name``; a clear error when the node lacks it."""
        if name not in self._attrs:
            self.fail(f"required attribute {name!r} is missing")
        return self.attr(name)

    # --- tensors -------------------------------------------------------------------
    def input(self, inputs: Sequence[Any], index: int = 0, what: str = "") -> Any:
        """Node input ``index``; omitted, it fails naming the position (and ``what`` the input is)."""
        tensor = inputs[index] if index < len(inputs) else None
        if tensor is None:
            self.fail(f"input {index} ({what}) is missing" if what else f"input {index} is missing")
        return tensor

    def constant(self, value: Any, dtype: Any = None) -> Any:
        """A constant tensor holding ``value`` (its value stays known to later importers).

        Values of types plugrt lacks are converted as the importer converts ONNX
        tensors (float64 to float32, int16/uint16 to int32, uint32/uint64 to int64).
        """
        array = np.asarray(value, dtype=dtype)
        supported = to_supported_array(array)
        if supported is None:
            self.fail(f"constant of NumPy type {array.dtype} has no plugrt DataType")
        array = np.require(supported, requirements="C")  # keeps 0-d values 0-d
        layer = self.network.add_constant(array.shape, array)
        layer.name = self.layer_name("constant")
        tensor = layer.get_output(0)
        self._constants[id(tensor)] = array
        return tensor

    def value_of(self, tensor: Any) -> np.ndarray | None:
        """The build-time value of ``tensor`` if known (initializer, Constant, folded), else None.

        Small int tensors computed from static shapes (a Shape op's output, say)
        are known too, through the layers' value rules.
        """
        if tensor is None:
            return None
        known = self._constants.get(id(tensor))
        if known is not None:
            return known
        try:
            value = self.shapes.info(tensor).constant_value()
        except PlugrtError:
            return None
        if value is not None:
            self._constants[id(tensor)] = value
        return value

    def remember(self, tensor: Any, value: np.ndarray) -> None:
        """Record that ``tensor`` always holds ``value`` (constant folding in importers)."""
        self._constants[id(tensor)] = np.asarray(value)

    def remembered(self, tensor: Any) -> np.ndarray | None:
        """The value recorded for ``tensor`` (an initializer, a constant, a folded value), else None."""
        return self._constants.get(id(tensor))

    def forget(self, tensor: Any) -> None:
        """Drop all that is known about ``tensor`` (its layer left the network)."""
        self._constants.pop(id(tensor), None)
        self.shapes.forget(tensor)

    def info(self, tensor: Any) -> TensorInfo:
        """Type, symbolic shape and shape-tensor values of ``tensor`` (rule errors name this node)."""
        try:
            return self.shapes.info(tensor)
        except PlugrtError as exc:
            self.fail(f"cannot infer the shape of {getattr(tensor, 'name', tensor)!r}: {exc}")
            raise  # unreachable: fail raises

    def shape_of(self, tensor: Any) -> list[IDimensionExpr]:
        """The shape of ``tensor`` as dimension expressions."""
        return list(self.info(tensor).shape)

    def dims_of(self, tensor: Any) -> list[int]:
        """The shape of ``tensor`` with -1 where a dimension is only known at run time."""
        return self.info(tensor).dims

    def rank_of(self, tensor: Any) -> int:
        """The number of dimensions of ``tensor``."""
        return self.info(tensor).rank

    def dtype_of(self, tensor: Any) -> DataType:
        """The element type of ``tensor``."""
        return self.info(tensor).dtype

    def declared_type(self, name: str) -> int | None:
        """The ONNX element type graph input or initializer ``name`` declares (None for other tensors)."""
        graph = self.graph_import
        if graph is None or not name:
            return None
        if name in graph.initializers:
            return int(graph.initializers[name].data_type)
        declared = graph.parser.input_types.get(name)
        return None if declared is None else int(declared)

    def values_of(self, tensor: Any) -> list[IDimensionExpr] | None:
        """The values of a shape tensor as expressions (None when not known before the build)."""
        return self.info(tensor).values

    def op(
        self,
        kind: str,
        inputs: list[Any],
        params: dict[str, Any] | None = None,
        weights: dict[str, np.ndarray] | None = None,
        num_outputs: int = 1,
    ) -> list[Any]:
        """Add an operator layer; returns its output tensors."""
        layer = self.network.add_operator(kind, inputs, params or {}, weights or {}, num_outputs)
        layer.name = self.layer_name(kind)
        return [layer.get_output(i) for i in range(num_outputs)]

    def layer_name(self, suffix: str = "") -> str:
        """A unique, readable layer name for this node."""
        base = self.node.name or f"{self.node.op_type}_{self.node.output[0] if self.node.output else ''}"
        name = f"{base}" if not suffix else f"{base}/{suffix}"
        count = self.network.num_layers
        return f"{name}#{count}"

    def fail(self, reason: str) -> NoReturn:
        """Raise :class:`OnnxImportError` naming this node."""
        raise OnnxImportError(f"{node_label(self.node)}: {reason}")

    # --- messages ------------------------------------------------------------------
    def warn(self, message: str) -> None:
        """Log a WARNING naming this node."""
        self.log(Severity.WARNING, message)

    def log(self, severity: Severity, message: str) -> None:
        """Log ``message`` at ``severity``, prefixed with the node's name and op type."""
        text = f"{node_label(self.node)}: {message}"
        emit = getattr(self.logger, "emit", None)
        if emit is not None:
            emit(severity, text)
        elif self.logger is not None:
            self.logger.log(severity, text)

    # --- helpers for importers -------------------------------------------------------
    def axis(self, axis: int, rank: int, what: str = "axis") -> int:
        """``axis`` in ``[-rank, rank)`` made non-negative; out of range fails."""
        axis = int(axis)
        if not -rank <= axis < max(rank, 1) or (rank == 0 and axis not in (0, -1)):
            self.fail(f"{what} {axis} is out of range for a tensor of rank {rank} (valid: {-rank}..{rank - 1})")
        return axis + rank if axis < 0 else axis

    def named(self, layer: Any, suffix: str = "") -> Any:
        """Name ``layer`` after this node; returns it."""
        layer.name = self.layer_name(suffix or type(layer).__name__.removeprefix("I").removesuffix("Layer").lower())
        return layer

    def identity(self, tensor: Any) -> Any:
        """A copy of ``tensor`` (a new tensor)."""
        return self.named(self.network.add_identity(tensor)).get_output(0)

    def reshape(self, tensor: Any, dims: Sequence[int] | Any, zero_is_placeholder: bool = True) -> Any:
        """``tensor`` reshaped: ``dims`` are ints (0 copies, -1 is inferred) or an int shape tensor."""
        layer = self.named(self.network.add_shuffle(tensor), "reshape")
        layer.zero_is_placeholder = zero_is_placeholder
        if isinstance(dims, ITensor):
            layer.set_input(1, dims)
        else:
            layer.reshape_dims = [int(d) for d in dims]
        return layer.get_output(0)

    def transpose(self, tensor: Any, perm: Sequence[int]) -> Any:
        """``tensor`` with its axes permuted (``numpy.transpose``)."""
        layer = self.named(self.network.add_shuffle(tensor), "transpose")
        layer.first_transpose = [int(p) for p in perm]
        return layer.get_output(0)

    def unsqueeze_to(self, tensor: Any, rank: int) -> Any:
        """``tensor`` with size-1 dimensions prepended up to ``rank`` (NumPy broadcasting's alignment)."""
        own = self.rank_of(tensor)
        extra = rank - own
        if extra <= 0:
            return tensor
        value = self.value_of(tensor)
        if value is not None and value.size > 1:  # a weight: a view of the same array, not a folded copy
            return self.constant(value.reshape((1,) * extra + value.shape))
        # Append the ones (0 copies each existing dimension), then move them to the front:
        # a reshape that needs no shape tensor, so it also works for dynamic dimensions.
        start = self.network.num_layers
        layer = self.named(self.network.add_shuffle(tensor), "unsqueeze")
        layer.reshape_dims = [0] * own + [1] * extra
        layer.second_transpose = list(range(own, rank)) + list(range(own))
        return self.folded([layer.get_output(0)], since=start)[0]

    def broadcast(self, *tensors: Any) -> list[Any]:
        """The tensors brought to one rank for multidirectional broadcasting."""
        rank = max(self.rank_of(t) for t in tensors)
        return [self.unsqueeze_to(t, rank) for t in tensors]

    def cast(self, tensor: Any, dtype: DataType) -> Any:
        """``tensor`` converted to ``dtype`` (itself when it already has that type)."""
        if self.dtype_of(tensor) == dtype:
            return tensor
        start = self.network.num_layers
        return self.folded([self.named(self.network.add_cast(tensor, dtype)).get_output(0)], since=start)[0]

    def elementwise(self, a: Any, b: Any, op: ElementWiseOperation) -> Any:
        """``op(a, b)`` with NumPy broadcasting (ranks aligned first)."""
        a, b = self.broadcast(a, b)
        return self.named(self.network.add_elementwise(a, b, op), op.name.lower()).get_output(0)

    def unary(self, tensor: Any, op: UnaryOperation) -> Any:
        """``op(tensor)``."""
        return self.named(self.network.add_unary(tensor, op), op.name.lower()).get_output(0)

    def activation(self, tensor: Any, kind: ActivationType, alpha: float = 0.0, beta: float = 0.0) -> Any:
        """An activation of ``tensor`` with TensorRT's ``alpha``/``beta`` meanings."""
        layer = self.named(self.network.add_activation(tensor, kind), kind.name.lower())
        layer.alpha, layer.beta = float(alpha), float(beta)
        return layer.get_output(0)

    def scalar(self, value: float | int | bool, like: Any) -> Any:
        """A constant of ``like``'s type and rank (all dimensions 1) holding ``value``."""
        dtype = self.dtype_of(like).nptype()
        return self.constant(np.full((1,) * self.rank_of(like), value, dtype=dtype))

    def folded(self, outputs: Sequence[Any], limit: int | None = None, since: int | None = None) -> list[Any]:
        """``outputs`` as constants when the layers added for them compute them from known values, else as given.

        The layers added since layer index ``since`` (default: since this node's
        import began) are run now by their operators' kernels; when each can run
        (every value it reads known, at most ``limit`` known elements read from
        outside them), they leave the network (see :mod:`.folding`).
        """
        from .folding import fold_layers

        folded = fold_layers(self, self.first_layer if since is None else since, outputs, limit)
        return list(outputs) if folded is None else folded
