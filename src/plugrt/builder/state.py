"""The build's state: the engine tensors and layers made so far, and the tensor bookkeeping every layer shares.

Tensors are added as layers are walked; each has a stored type and format (what
the memory holds) and, for plugin outputs stored in another type than the network
declares (HALF under FP16), a declared type consumers see. ``converted`` inserts a
``reformat`` layer where a consumer reads another type or format (once per tensor
and target; a constant layer's value is converted here, at build, into a constant of
the new type, and a reformat of another constant is itself a constant, run once per
context); ``bind_outputs`` makes a layer's output tensors.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backends.base import Backend
from ..core.dims import Dims
from ..core.errors import BuildError
from ..core.logger import ILogger, Severity
from ..core.types import DataType, TensorFormat
from ..engine.plan import LayerPlan, TensorPlan, holds_shape_values
from ..network.definition import INetworkDefinition
from ..network.layer import ILayer
from ..network.tensor import ITensor
from ..nodes.base import Node
from ..nodes.ports import BuildRequest, Port
from ..ops.reformat import Reformat
from ..shape.expr import IDimensionExpr
from .config import BuilderFlag, IBuilderConfig
from .int8 import tensor_scale
from .profiles import ResolvedProfile
from .qdq import ExplicitInt8

__all__ = ["BuildState", "Pending"]

#: A built layer whose node finishes (serializes) after every layer is built.
Pending = tuple[LayerPlan, Node, BuildRequest, list[Port]]


class BuildState:
    """Everything one build has made so far; the passes of :mod:`plugrt.builder.compile` read and extend it."""

    def __init__(
        self,
        network: INetworkDefinition,
        config: IBuilderConfig,
        logger: ILogger,
        backend: Backend | None = None,
        calibrated: dict[str, float] | None = None,
    ) -> None:
        self.network = network
        self.backend = backend
        self.config = config
        self.logger = logger
        #: BuilderFlag.INT8: layers with INT8 kernels run in INT8 where scales are known (builder/int8.py)
        self.int8 = config.get_flag(BuilderFlag.INT8)
        #: tensor name -> amax from the calibrator (dynamic ranges set on tensors win)
        self.calibrated = dict(calibrated or {})
        #: tensor -> its INT8 scale, where known
        self.scales: dict[int, float] = {}
        #: the products Q/DQ pairs put in INT8, and the layers they leave unread (builder/qdq.py)
        self.explicit = ExplicitInt8()
        #: tensor id -> the layers reading it (made on first use, builder/int8.py)
        self.readers: dict[int, list[ILayer]] | None = None
        self.tensors: list[TensorPlan] = []
        self.values: list[list[IDimensionExpr] | None] = []
        self.index: dict[int, int] = {}
        self.layers: list[LayerPlan] = []
        self.weights: dict[str, np.ndarray] = {}
        self.pending: list[Pending] = []
        self.begun: list[Node] = []
        self.conversions: dict[tuple[int, DataType, TensorFormat], int] = {}
        #: layer name -> the time of each tactic the builder timed for it, in seconds (builder/tactics.py)
        self.tactic_times: dict[str, dict[int, float]] = {}
        #: The type the network declares for a plugin output stored in another type (the plugin chose
        #: it, e.g. HALF under BuilderFlag.FP16): consumers and network outputs see the declared type.
        self.declared_types: dict[int, DataType] = {}
        self.profiles: list[ResolvedProfile] = []
        #: (plugin identity, timing_cache_id, I/O descriptors) → chosen tactic; TensorRT's timing cache
        self.timing_cache: dict[Any, int] | None = (
            None if config.get_flag(BuilderFlag.DISABLE_TIMING_CACHE) else {}
        )
        #: plugin layer → {output position: input position} it computes in place
        self.aliases: dict[int, dict[int, int]] = {}
        #: tensor → the tensor whose memory it shares (an in-place plugin output → its input)
        self.shares: dict[int, int] = {}

    def add_tensor(
        self,
        name: str,
        dtype: DataType,
        fmt: TensorFormat,
        shape: list[IDimensionExpr],
        role: str,
        values: list[IDimensionExpr] | None = None,
    ) -> int:
        self.tensors.append(TensorPlan(name, dtype, fmt, list(shape), role, _stored_values(dtype, fmt, shape, values)))
        self.values.append(values)
        return len(self.tensors) - 1

    def port(self, index: int) -> Port:
        t = self.tensors[index]
        return Port(
            list(t.shape),
            [self.ranges(t.shape, p) for p in range(len(self.profiles))],
            t.dtype,
            t.format,
            self.values[index],
            self.scales.get(index, 1.0),
        )

    def ranges(self, shape: list[IDimensionExpr], profile: int) -> tuple[Dims, Dims, Dims]:
        env = self.profiles[profile]
        lows, opts, highs = [], [], []
        for dim in shape:
            lo, hi = dim.bounds(env.low, env.high)
            lows.append(max(lo, 0))
            opts.append(max(dim.evaluate(env.opt), 0))
            highs.append(max(hi, 0))
        return Dims(lows), Dims(opts), Dims(highs)

    def converted(self, index: int, dtype: DataType, fmt: TensorFormat, consumer: str) -> int:
        source = self.tensors[index]
        if (source.dtype, source.format) == (dtype, fmt):
            return index
        key = (index, dtype, fmt)
        if key not in self.conversions:
            name = f"{source.name} [{dtype.name}/{fmt.name}]"
            # a converted constant is a constant: computed once per context, never per inference
            role = "constant" if source.role == "constant" else "internal"
            out = self.add_tensor(name, dtype, fmt, source.shape, role, self.values[index])
            params: dict[str, Any] = {"dst_type": dtype.name, "src_format": source.format.name, "dst_format": fmt.name}
            if source.role == "constant" and dtype == DataType.HALF and source.dtype == DataType.FLOAT:
                params["saturate"] = True  # TensorRT clamps FP32 weights into the half range
            if DataType.INT8 in (source.dtype, dtype) and source.dtype != dtype:
                scale = self.scales.get(index)
                if scale is None and self.int8:
                    self.logger.emit(
                        Severity.WARNING,
                        f"tensor {source.name!r} has no INT8 scale (no dynamic range, not calibrated); its INT8 "
                        f"conversion for {consumer!r} uses scale 1; set one with ITensor.set_dynamic_range",
                    )
                if scale is not None:
                    params["scale"] = scale
                    self.scales[out] = scale
            layer_name = f"Reformat {source.name} {source.dtype.name}/{source.format.name} -> {dtype.name}/{fmt.name}"
            stored = self._stored_value(index)
            if stored is not None and "scale" not in params and source.format == fmt == TensorFormat.LINEAR:
                # converted here, once, as TensorRT stores FP16 weights: the plan holds the converted value
                weight = f"{len(self.layers)}/value"
                self.weights[weight] = _convert_on_host(stored, params)
                shape = {"shape": list(stored.shape)}
                self.layers.append(LayerPlan(layer_name, "constant", [], [out], params=shape, weights={"value": weight}))
            else:
                self.layers.append(LayerPlan(layer_name, "reformat", [index], [out], params=params))
            self.logger.emit(
                Severity.VERBOSE, f"inserted a reformat of {source.name!r} to {dtype.name}/{fmt.name} for {consumer!r}"
            )
            self.conversions[key] = out
        return self.conversions[key]

    def _stored_value(self, index: int) -> np.ndarray | None:
        """The value of tensor ``index`` when a constant layer of this build stores it, else None."""
        for layer in reversed(self.layers):
            if index in layer.outputs:
                key = layer.weights.get("value") if layer.kind == "constant" else None
                return None if key is None else self.weights.get(key)
        return None

    def declared(self, index: int) -> DataType:
        """The type the network declares for tensor ``index`` (its stored type may differ)."""
        return self.declared_types.get(index, self.tensors[index].dtype)

    def input_index(self, layer: ILayer, position: int, tensor: ITensor | None) -> int:
        if tensor is None:
            raise BuildError(f"layer {layer.name!r}: input {position} is not set")
        if id(tensor) not in self.index:
            raise BuildError(f"layer {layer.name!r}: input {position} ({tensor.name!r}) is not produced by any layer")
        return self.index[id(tensor)]

    def bind_outputs(
        self,
        layer: ILayer,
        types: list[DataType],
        formats: list[TensorFormat],
        shapes: list[list[IDimensionExpr]],
        values: list[Any],
        role: str = "internal",
        declared: list[DataType] | None = None,
    ) -> list[int]:
        if not len(types) == len(shapes) == layer.num_outputs:
            raise BuildError(
                f"layer {layer.name!r}: rules gave {len(types)} types and {len(shapes)} shapes for {layer.num_outputs} outputs"
            )
        outputs = []
        for i, tensor in enumerate(layer._outputs):
            index = self.add_tensor(tensor.name, types[i], formats[i], shapes[i], role, values[i])
            if declared is not None and declared[i] != types[i]:
                self.declared_types[index] = declared[i]
            dims = [d.get_constant_value() if d.is_constant() else -1 for d in shapes[i]]
            tensor.set_inferred(types[i] if declared is None else declared[i], dims)
            self.index[id(tensor)] = index
            self.note_scale(index, tensor)
            outputs.append(index)
        return outputs

    # --- INT8 scales ----------------------------------------------------------------
    def note_scale(self, index: int, tensor: ITensor) -> None:
        """Record the INT8 scale of ``tensor`` (dynamic range or calibration) for engine tensor ``index``."""
        scale = tensor_scale(tensor, self.calibrated)
        if scale is not None:
            self.scales[index] = scale



def _stored_values(
    dtype: DataType, fmt: TensorFormat, shape: list[IDimensionExpr], values: list[IDimensionExpr] | None
) -> list[IDimensionExpr] | None:
    """The values the plan keeps for a tensor: a shape tensor's (other tensors' stay with the build)."""
    return list(values) if values is not None and holds_shape_values(dtype, fmt, shape, len(values)) else None


def _convert_on_host(value: np.ndarray, params: dict[str, Any]) -> np.ndarray:
    """``value`` converted as the reformat operator with ``params`` converts it (saturating where it says so)."""
    converter = Reformat(dict(params))
    converter.prepare([value.shape], [value.shape])
    result = np.empty(value.shape, DataType[params["dst_type"]].nptype())
    converter.run([value], [result])
    return result
