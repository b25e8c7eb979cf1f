"""Shapes and types of a network's tensors while it is being imported.

TensorRT answers ``tensor.shape`` during network construction; importers need
the same (ranks for broadcasting, negative axes, static sizes for folding). This
runs each layer's rules -- the very rules the builder runs later -- on symbolic
shapes, lazily and once per tensor. Network inputs get the builder's symbols
(``"name[axis]"``), so an expression seen here means the same at build time.

Plugin layers are asked through their shape hooks directly (as TensorRT asks the
network's plugin object); these calls are not recorded as build-phase calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..builder.profiles import symbol_name
from ..core.dims import Dims
from ..core.errors import PlugrtError, ShapeError
from ..core.types import DataType, nptype
from ..interfaces.v2 import IPluginV2DynamicExt, IPluginV2Ext
from ..interfaces.v3 import PluginCapabilityType
from ..network.layer import IPluginV2Layer, IPluginV3Layer
from ..network.tensor import ITensor
from ..shape.builder import DimsExprs, IExprBuilder, constant, symbol
from ..shape.expr import IDimensionExpr

__all__ = ["NetworkShapes", "TensorInfo"]


@dataclass(frozen=True)
class TensorInfo:
    """What is known about a tensor before building: type, shape and (for shape tensors) values."""

    dtype: DataType
    shape: list[IDimensionExpr]
    values: list[IDimensionExpr] | None = None

    @property
    def rank(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def dims(self) -> list[int]:
        """The shape with -1 where a dimension is not a build-time constant."""
        return [d.get_constant_value() if d.is_constant() else -1 for d in self.shape]

    def constant_value(self) -> np.ndarray | None:
        """The tensor's value when every element is a known constant (small int shape tensors)."""
        if self.values is None or self.rank > 1 or not all(v.is_constant() for v in self.values):
            return None
        if not all(d.is_constant() for d in self.shape):
            return None
        try:
            dtype = nptype(self.dtype)
        except PlugrtError:
            return None
        data = np.array([v.get_constant_value() for v in self.values], dtype=dtype)
        return data.reshape(self.dims) if self.rank == 1 else data.reshape(())


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
        inputs = [t for t in layer._inputs]
        if any(t is None for t in inputs):
            raise ShapeError(f"layer {layer.name!r} has an unset input")
        infos = [self._info[id(t)] for t in inputs]
        if isinstance(layer, IPluginV2Layer):
            results = _plugin_v2_rules(layer, infos)
        elif isinstance(layer, IPluginV3Layer):
            shape_infos = [self._info[id(t)] for t in layer.shape_inputs]
            results = _plugin_v3_rules(layer, infos, shape_infos)
        else:
            op = layer.to_operator()
            op.name = layer.name
            types = op.output_types([i.dtype for i in infos])
            shapes = op.output_shapes([i.shape for i in infos], [i.values for i in infos])
            values = op.output_values([i.shape for i in infos], [i.values for i in infos])
            results = [TensorInfo(t, list(s), None if v is None else list(v)) for t, s, v in zip(types, shapes, values)]
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


def _plugin_v2_rules(layer: IPluginV2Layer, infos: list[TensorInfo]) -> list[TensorInfo]:
    plugin = layer.plugin
    types = [i.dtype for i in infos]
    count = plugin.num_outputs
    if isinstance(plugin, IPluginV2DynamicExt):
        builder = IExprBuilder(owner=layer.name)
        shapes = [
            list(plugin.get_output_dimensions(k, [DimsExprs(i.shape) for i in infos], builder)) for k in range(count)
        ]
        out_types = [plugin.get_output_datatype(k, types) for k in range(count)]
        return [TensorInfo(t, s) for t, s in zip(out_types, shapes)]
    if not infos or not infos[0].shape:
        raise ShapeError(f"plugin layer {layer.name!r}: an IPluginV2 input needs a batch dimension")
    batch = infos[0].shape[0]
    static = [Dims(i.dims[1:]) for i in infos]
    out_types = (
        [plugin.get_output_data_type(k, types) for k in range(count)]
        if isinstance(plugin, IPluginV2Ext)
        else [types[0] if types else DataType.FLOAT] * count
    )
    results = []
    for k in range(count):
        dims = Dims(plugin.get_output_shape(k, static))
        results.append(TensorInfo(out_types[k], [batch] + [constant(d) for d in dims]))
    return results


def _plugin_v3_rules(layer: IPluginV3Layer, infos: list[TensorInfo], shape_infos: list[TensorInfo]) -> list[TensorInfo]:
    build = layer.plugin.get_capability_interface(PluginCapabilityType.BUILD)
    types = list(build.get_output_data_types([i.dtype for i in infos]))
    values = []
    for k, info in enumerate(shape_infos):
        if info.values is None:
            raise ShapeError(f"plugin layer {layer.name!r}: shape input {k} has no values known before the build")
        values.append(DimsExprs(info.values))
    builder = IExprBuilder(owner=layer.name)
    shapes = build.get_output_shapes([DimsExprs(i.shape) for i in infos], values, builder)
    return [TensorInfo(t, list(s)) for t, s in zip(types, shapes)]
