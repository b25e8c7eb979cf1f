"""Lowering the network API's loops and conditionals to the control-flow operators.

Each ``ILoop`` / ``IIfConditional`` becomes one layer running the ``loop`` /
``if`` operator (:mod:`plugrt.ops.control_flow`, the operators ONNX's Loop and
If import to). Its interior is found by data flow: the layers computed from the
construct's recurrences, iterators or inputs that its next values, outputs or
condition need; they are written as an ONNX subgraph (:mod:`.control_flow_body`)
the operator builds and runs. Layers that do not depend on the construct run
outside it, once. :func:`lower_control_flow` returns the lowered layers keyed by
the tensors they produce (the loop and conditional outputs); the build walks
them in place of the boundary layers and calls :meth:`LoweredLayer.resolve`
once their inputs are built.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.dims import Dims
from ..core.errors import BuildError
from ..core.types import DataType
from ..network.control_flow import (
    IIfConditional,
    IIfConditionalBoundaryLayer,
    IIfConditionalInputLayer,
    IIteratorLayer,
    ILoop,
    ILoopBoundaryLayer,
    IRecurrenceLayer,
)
from ..network.definition import INetworkDefinition
from ..network.layer import ILayer
from ..network.operator_layer import IOperatorLayer
from ..network.tensor import ITensor

__all__ = ["Interior", "LoweredLayer", "Lowering", "given", "lower_control_flow", "owner_label", "read"]

Construct = ILoop | IIfConditional


def owner_label(construct: Construct) -> str:
    """How messages name a construct: ``loop 'name'`` or ``conditional 'name'``."""
    return f"{'loop' if isinstance(construct, ILoop) else 'conditional'} {construct.name!r}"


def _construct_of(layer: ILayer | None) -> Construct | None:
    if isinstance(layer, ILoopBoundaryLayer):
        return layer.loop
    if isinstance(layer, IIfConditionalBoundaryLayer):
        return layer.conditional
    return None


def _is_seed_layer(layer: ILayer) -> bool:
    return isinstance(layer, (IRecurrenceLayer, IIteratorLayer, IIfConditionalInputLayer))


def given(layer: ILayer, index: int) -> bool:
    """Whether input ``index`` of ``layer`` is set."""
    return index < layer.num_inputs and layer._inputs[index] is not None


def read(layer: ILayer, index: int) -> ITensor:
    """Input ``index`` of ``layer``; an unset one raises :class:`BuildError` naming the layer."""
    tensor = layer._inputs[index] if index < layer.num_inputs else None
    if tensor is None:
        raise BuildError(f"layer {layer.name!r}: input {index} is not set")
    return tensor


class Interior:
    """The layers of one construct (or one branch) between its seeds and ``sinks``, producers first."""

    def __init__(self, construct: Construct, seeds: Sequence[ITensor], sinks: Sequence[ITensor]) -> None:
        self.construct = construct
        self.seeds = {id(t) for t in seeds}
        self.layers: list[ILayer] = []
        self.outer: list[ITensor] = []
        self._inside: dict[int, bool] = {}
        self._outer_ids: set[int] = set()
        for sink in sinks:
            if not self.inside(sink):
                self._note_outer(sink)

    @property
    def tensors(self) -> set[int]:
        """Ids of the tensors computed inside (seeds included)."""
        return {key for key, inside in self._inside.items() if inside} | self.seeds

    def _note_outer(self, tensor: ITensor) -> None:
        if id(tensor) not in self._outer_ids:
            self._outer_ids.add(id(tensor))
            self.outer.append(tensor)

    def inside(self, tensor: ITensor) -> bool:
        """Whether ``tensor`` is computed inside (walks its producers once)."""
        if id(tensor) in self.seeds:
            return True
        known = self._inside.get(id(tensor))
        if known is not None:
            return known
        producer = tensor.producer
        if producer is None:
            self._inside[id(tensor)] = False
            return False
        other = _construct_of(producer)
        if other is not None:
            if other is not self.construct and _is_seed_layer(producer):
                raise BuildError(
                    f"layers of {owner_label(other)} are used in {owner_label(self.construct)}: tensor {tensor.name!r} of "
                    f"layer {producer.name!r} (nested loops and conditionals are not supported)"
                )
            self._inside[id(tensor)] = False
            return False
        flags = [self.inside(t) if t is not None else False for t in producer._inputs]
        result = any(flags)
        for output in producer._outputs:
            self._inside[id(output)] = result
        if result:
            for t, flag in zip(producer._inputs, flags):
                if t is not None and not flag:
                    self._note_outer(t)
            self.layers.append(producer)
        return result


class LoweredLayer(IOperatorLayer):
    """The layer a loop or conditional becomes: its operator's params are worked out when its inputs are built."""

    def __init__(
        self, network: Any, construct: Construct, kind: str, inputs: list[ITensor], outputs: list[ITensor], plan: Any
    ) -> None:
        super().__init__(network, list(inputs), kind, {}, {}, 0)
        self.construct = construct
        self.name = construct.name
        self._outputs = list(outputs)
        self.plan = plan

    def resolve(self, state: Any) -> None:
        """Fill in params and weights from the built types and shapes of the inputs; may add size outputs."""
        infos = []
        for position, tensor in enumerate(self._inputs):
            index = state.input_index(self, position, tensor)
            infos.append((state.declared(index), state.tensors[index].shape, state.values[index]))
        params, weights, sizes = self.plan(infos)
        self.params, self.weights = params, weights
        self._outputs = self._outputs[: len(params["types"])]
        self._outputs += [ITensor(f"{self.name} size {k}", DataType.INT64, Dims(), self) for k in range(sizes)]


class Lowering:
    """The lowered layers, keyed by the ids of the tensors they produce, and the check of what leaves them."""

    def __init__(self) -> None:
        self.producers: dict[int, LoweredLayer] = {}
        self.owner: dict[int, Construct] = {}
        self.allowed: dict[int, set[int]] = {}  # boundary layer id -> the interior tensors it may read

    def check(self, network: INetworkDefinition) -> None:
        """No tensor computed inside a construct is read outside it (the outputs need), nor is a network output."""
        for tensor in network._outputs:
            if id(tensor) in self.owner:
                raise BuildError(
                    f"network output {tensor.name!r} is computed inside {owner_label(self.owner[id(tensor)])}; mark "
                    "the construct's output instead"
                )
        stack = list(network._outputs)
        seen: set[int] = set()
        while stack:
            tensor = stack.pop()
            if id(tensor) in seen:
                continue
            seen.add(id(tensor))
            layer = self.producers.get(id(tensor), tensor.producer)
            if layer is None:
                continue
            for read in [*layer._inputs, *getattr(layer, "shape_inputs", [])]:
                if read is None:
                    continue
                if id(read) in self.owner:
                    self._escape(read, layer)
                stack.append(read)

    def _escape(self, tensor: ITensor, layer: ILayer) -> None:
        inner = self.owner[id(tensor)]
        if isinstance(layer, LoweredLayer):
            raise BuildError(
                f"layers of {owner_label(inner)} are used in {owner_label(layer.construct)}: it reads {tensor.name!r} "
                "(nested loops and conditionals are not supported)"
            )
        raise BuildError(
            f"tensor {tensor.name!r} is computed inside {owner_label(inner)} but layer {layer.name!r} outside it "
            "reads it; values leave a loop through add_loop_output and a conditional through add_output"
        )


def lower_control_flow(network: INetworkDefinition) -> Lowering:
    """Lower every loop and conditional of ``network``; misuse raises :class:`BuildError` naming it."""
    lowering = Lowering()
    constructs: list[Construct] = [*getattr(network, "_loops", []), *getattr(network, "_conditionals", [])]
    for construct in constructs:
        if isinstance(construct, ILoop):
            from .control_flow_loop import lower_loop  # imports onnx: only for networks with loops

            lowered, inside = lower_loop(network, construct)
        else:
            from .control_flow_if import lower_conditional

            lowered, inside = lower_conditional(network, construct)
        for key in inside:
            if key in lowering.owner and lowering.owner[key] is not construct:
                raise BuildError(
                    f"layers of {owner_label(lowering.owner[key])} are used in {owner_label(construct)} "
                    "(nested loops and conditionals are not supported)"
                )
            lowering.owner[key] = construct
        if lowered is not None:
            for tensor in lowered._outputs:
                lowering.producers[id(tensor)] = lowered
    return lowering
