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

from collections.abc import Callable
from typing import Any

import numpy as np

from ...core.errors import PlugrtError

__all__ = ["ImportContext", "Importer", "OnnxImportError", "importer_for", "register_importer", "registered_ops"]


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


class ImportContext:
    """What an importer works with: the network, the node, its attributes, the opset."""

    def __init__(self, network: Any, node: Any, opset: int, logger: Any, constants: dict[int, np.ndarray]) -> None:
        self.network = network
        self.node = node
        self.opset = opset
        self.logger = logger
        #: id(ITensor) -> value, for tensors known at build time (initializers, Constant nodes, folded shapes)
        self._constants = constants
        self._attrs = {a.name: a for a in node.attribute}

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
    def constant(self, value: Any, dtype: Any = None) -> Any:
        """A constant tensor holding ``value`` (its value stays known to later importers)."""
        array = np.ascontiguousarray(np.asarray(value, dtype=dtype))
        layer = self.network.add_constant(array.shape, array)
        tensor = layer.get_output(0)
        self._constants[id(tensor)] = array
        return tensor

    def value_of(self, tensor: Any) -> np.ndarray | None:
        """The build-time value of ``tensor`` if known (initializer, Constant, folded), else None."""
        if tensor is None:
            return None
        return self._constants.get(id(tensor))

    def remember(self, tensor: Any, value: np.ndarray) -> None:
        """Record that ``tensor`` always holds ``value`` (constant folding in importers)."""
        self._constants[id(tensor)] = np.asarray(value)

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

    def fail(self, reason: str) -> None:
        """Raise :class:`OnnxImportError` naming this node."""
        raise OnnxImportError(f"node {self.node.name!r} ({self.node.op_type}): {reason}")
