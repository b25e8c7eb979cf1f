"""Shapes and types of a network's tensors while it is being imported.

TensorRT answers ``tensor.shape`` during network construction; importers need
the same (ranks for broadcasting, negative axes, static sizes for folding). This
runs each layer's rules -- the very rules the builder runs later -- on symbolic
shapes, lazily and once per tensor: a standard layer's operator through
:func:`plugrt.ops.rules.output_info`, a plugin layer through its family's
adapter (the network's plugin is asked, as TensorRT asks it; these calls are
not recorded as build-phase calls). Network inputs get the builder's symbols
(``"name[axis]"``), so an expression seen here means the same at build time.
"""

from __future__ import annotations

from typing import Any

from ..builder.profiles import symbol_name
from ..core.errors import ShapeError
from ..interfaces.adapters import adapter_for_plugin
from ..network.layer import IPluginV2Layer, IPluginV3Layer
from ..network.tensor import ITensor
from ..ops.rules import TensorInfo, output_info
from ..shape.builder import constant, symbol

__all__ = ["NetworkShapes", "TensorInfo"]


class NetworkShapes:
    """Lazy, cached shape and type inference over an :class:`INetworkDefinition`."""

    def __init__(self) -> None:
        self._info: dict[int, TensorInfo] = {}

    def info(self, tensor: ITensor) -> TensorInfo:
        """Type, shape and values of ``tensor``; rule errors raise :class:`PlugrtError`."""
        known = self._info.get(id(tensor))
        if known is not None:
            return known
        # Walk producers iteratively: deep chains must not hit the recursion limit.
        stack: list[ITensor] = [tensor]
        while stack:
            current = stack[-1]
            if id(current) in self._info:
                stack.pop()
                continue
            layer = current.producer
            if layer is None:
                self._info[id(current)] = _input_info(current)
                stack.pop()
                continue
            pending = [t for t in _layer_inputs(layer) if t is not None and id(t) not in self._info]
            if pending:
                if len(stack) > 100_000:
                    raise ShapeError("the network is too deep to infer shapes")
                stack.extend(pending)
                continue
            self._infer_layer(layer)
            stack.pop()
        return self._info[id(tensor)]

    def forget(self, tensor: ITensor) -> None:
        """Drop what is known about ``tensor`` (after its producer changed)."""
        self._info.pop(id(tensor), None)

    def _infer_layer(self, layer: Any) -> None:
        if any(t is None for t in layer._inputs):
            raise ShapeError(f"layer {layer.name!r} has an unset input")
        infos = [self._info[id(t)] for t in layer._inputs]
        if isinstance(layer, (IPluginV2Layer, IPluginV3Layer)):
            shape_inputs = [self._info[id(t)] for t in getattr(layer, "shape_inputs", [])]
            adapter = adapter_for_plugin(layer.plugin, layer.name, None)
            outputs = adapter.network_outputs(
                layer.plugin, [(i.dtype, i.shape) for i in infos], [i.values for i in shape_inputs]
            )
            results = [TensorInfo(dtype, shape) for dtype, shape in outputs]
        else:
            op = layer.to_operator()
            op.name = layer.name
            results = output_info(op, infos)
        if len(results) != layer.num_outputs:
            raise ShapeError(
                f"layer {layer.name!r}: rules describe {len(results)} outputs, the layer has {layer.num_outputs}"
            )
        for output, result in zip(layer._outputs, results):
            self._info[id(output)] = result


def _layer_inputs(layer: Any) -> list[ITensor | None]:
    return list(layer._inputs) + list(getattr(layer, "shape_inputs", []))


def _input_info(tensor: ITensor) -> TensorInfo:
    shape = [constant(d) if d >= 0 else symbol(symbol_name(tensor.name, k)) for k, d in enumerate(tensor.shape)]
    return TensorInfo(tensor.dtype, shape, None)
