"""TensorRT's loops (``ILoop``) and conditionals (``IIfConditional``) in the network API.

A loop or conditional is a set of *boundary layers* added through its object;
the layers between them are ordinary layers of the network. When the network
is built, the builder finds each construct's interior by data flow (the layers
computed from its recurrences, iterators or inputs that its outputs need) and
runs it as one control-flow operator (:mod:`plugrt.builder.control_flow`).
"""

from __future__ import annotations

from typing import Any

from ..core.enums import TrtEnum
from ..core.errors import NetworkError, TypeMismatchError
from .layer import ILayer, LayerType
from .tensor import ITensor

__all__ = [
    "IConditionLayer",
    "IIfConditional",
    "IIfConditionalBoundaryLayer",
    "IIfConditionalInputLayer",
    "IIfConditionalOutputLayer",
    "IIteratorLayer",
    "ILoop",
    "ILoopBoundaryLayer",
    "ILoopOutputLayer",
    "IRecurrenceLayer",
    "ITripLimitLayer",
    "LoopOutput",
    "TripLimit",
]


class TripLimit(TrtEnum):
    """How a trip limit ends a loop: after a count of iterations, or when a condition is false."""

    COUNT = 0
    WHILE = 1


class LoopOutput(TrtEnum):
    """What a loop output holds: the last value, or every iteration's value concatenated (or in reverse order)."""

    LAST_VALUE = 0
    CONCATENATE = 1
    REVERSE = 2


class ILoopBoundaryLayer(ILayer):
    """A layer marking the edge of a loop; ``loop`` is the loop it belongs to."""

    def __init__(self, loop: ILoop, inputs: list[ITensor | None], num_outputs: int) -> None:
        super().__init__(loop._network, inputs, num_outputs)
        self._loop = loop

    @property
    def loop(self) -> ILoop:
        """The loop this layer belongs to."""
        return self._loop


class IRecurrenceLayer(ILoopBoundaryLayer):
    """A loop-carried value: input 0 is its initial value, input 1 (``set_input(1, next)``) its next value.

    Its output is the value at the start of each iteration.
    """

    layer_type = LayerType.RECURRENCE


class ITripLimitLayer(ILoopBoundaryLayer):
    """How many times the loop runs: a 0-d INT32/INT64 count, or a 0-d BOOL condition tested before each iteration."""

    layer_type = LayerType.TRIP_LIMIT

    def __init__(self, loop: ILoop, tensor: ITensor, kind: TripLimit) -> None:
        super().__init__(loop, [tensor], 0)
        self.kind = kind


class IIteratorLayer(ILoopBoundaryLayer):
    """Slice ``i`` (or ``M - 1 - i`` with ``reverse``) of its input along ``axis`` in iteration ``i``."""

    layer_type = LayerType.ITERATOR

    def __init__(self, loop: ILoop, tensor: ITensor, axis: int, reverse: bool) -> None:
        super().__init__(loop, [tensor], 1)
        self.axis = int(axis)
        self.reverse = bool(reverse)


class ILoopOutputLayer(ILoopBoundaryLayer):
    """An output of the loop; for CONCATENATE/REVERSE, ``set_input(1, length)`` gives the length along ``axis``."""

    layer_type = LayerType.LOOP_OUTPUT

    def __init__(self, loop: ILoop, tensor: ITensor, kind: LoopOutput, axis: int) -> None:
        super().__init__(loop, [tensor], 1)
        self.kind = kind
        self.axis = int(axis)


class ILoop:
    """A loop of a network (``INetworkDefinition.add_loop``); its boundary layers define it."""

    def __init__(self, network: Any, index: int) -> None:
        self._network = network
        self.name = f"(Unnamed Loop* {index})"
        self._layers: list[ILoopBoundaryLayer] = []

    def _add(self, layer: ILoopBoundaryLayer) -> Any:
        self._layers.append(layer)
        return self._network._add_layer(layer)

    def _tensor(self, tensor: Any, where: str) -> ITensor:
        return self._network._check_tensor(tensor, f"loop {self.name!r} {where}")

    def add_recurrence(self, initial_value: ITensor) -> IRecurrenceLayer:
        """A loop-carried value starting at ``initial_value``; give its next value with ``set_input(1, next)``."""
        return self._add(IRecurrenceLayer(self, [self._tensor(initial_value, "add_recurrence")], 1))

    def add_trip_limit(self, tensor: ITensor, kind: TripLimit) -> ITripLimitLayer:
        """Limit the iterations: ``TripLimit.COUNT`` (a 0-d integer) or ``TripLimit.WHILE`` (a 0-d BOOL)."""
        if not isinstance(kind, TripLimit):
            raise TypeMismatchError(f"loop {self.name!r} add_trip_limit: kind must be a TripLimit, got {kind!r}")
        given = [layer for layer in self._layers if isinstance(layer, ITripLimitLayer) and layer.kind == kind]
        if given:
            raise NetworkError(f"loop {self.name!r} already has a {kind} trip limit (layer {given[0].name!r})")
        return self._add(ITripLimitLayer(self, self._tensor(tensor, "add_trip_limit"), kind))

    def add_iterator(self, tensor: ITensor, axis: int = 0, reverse: bool = False) -> IIteratorLayer:
        """Iterate over ``tensor`` along ``axis`` (backwards with ``reverse``, which needs a COUNT trip limit)."""
        return self._add(IIteratorLayer(self, self._tensor(tensor, "add_iterator"), axis, reverse))

    def add_loop_output(self, tensor: ITensor, kind: LoopOutput, axis: int = 0) -> ILoopOutputLayer:
        """An output of the loop computed from ``tensor``, a tensor of the loop."""
        if not isinstance(kind, LoopOutput):
            raise TypeMismatchError(f"loop {self.name!r} add_loop_output: kind must be a LoopOutput, got {kind!r}")
        return self._add(ILoopOutputLayer(self, self._tensor(tensor, "add_loop_output"), kind, axis))

    def __repr__(self) -> str:
        return f"<ILoop {self.name!r}>"


class IIfConditionalBoundaryLayer(ILayer):
    """A layer marking the edge of a conditional; ``conditional`` is the one it belongs to."""

    def __init__(self, conditional: IIfConditional, inputs: list[ITensor | None], num_outputs: int) -> None:
        super().__init__(conditional._network, inputs, num_outputs)
        self._conditional = conditional

    @property
    def conditional(self) -> IIfConditional:
        """The conditional this layer belongs to."""
        return self._conditional


class IConditionLayer(IIfConditionalBoundaryLayer):
    """The condition (a 0-d BOOL) choosing the branch."""

    layer_type = LayerType.CONDITION


class IIfConditionalInputLayer(IIfConditionalBoundaryLayer):
    """A value entering the conditional; layers of either branch read its output."""

    layer_type = LayerType.CONDITIONAL_INPUT


class IIfConditionalOutputLayer(IIfConditionalBoundaryLayer):
    """An output of the conditional: input 0 when the condition is true, input 1 when it is false."""

    layer_type = LayerType.CONDITIONAL_OUTPUT


class IIfConditional:
    """An if-then-else of a network (``INetworkDefinition.add_if_conditional``); only the chosen branch runs."""

    def __init__(self, network: Any, index: int) -> None:
        self._network = network
        self.name = f"(Unnamed Conditional* {index})"
        self._layers: list[IIfConditionalBoundaryLayer] = []

    def _add(self, layer: IIfConditionalBoundaryLayer) -> Any:
        self._layers.append(layer)
        return self._network._add_layer(layer)

    def _tensor(self, tensor: Any, where: str) -> ITensor:
        return self._network._check_tensor(tensor, f"conditional {self.name!r} {where}")

    @property
    def condition(self) -> IConditionLayer | None:
        """The condition layer, once :meth:`set_condition` was called."""
        return next((layer for layer in self._layers if isinstance(layer, IConditionLayer)), None)

    def set_condition(self, condition: ITensor) -> IConditionLayer:
        """Choose the branch by ``condition``, a 0-d BOOL tensor computed outside the conditional."""
        tensor = self._tensor(condition, "set_condition")
        known = self.condition
        if known is not None:
            known._inputs[0] = tensor
            return known
        return self._add(IConditionLayer(self, [tensor], 0))

    def add_input(self, input: ITensor) -> IIfConditionalInputLayer:  # noqa: A002 - TensorRT's name
        """A value both branches may read (through the returned layer's output)."""
        return self._add(IIfConditionalInputLayer(self, [self._tensor(input, "add_input")], 1))

    def add_output(self, true_subgraph_output: ITensor, false_subgraph_output: ITensor) -> IIfConditionalOutputLayer:
        """An output: ``true_subgraph_output`` when the condition holds, else ``false_subgraph_output``."""
        tensors = [self._tensor(true_subgraph_output, "add_output"), self._tensor(false_subgraph_output, "add_output")]
        return self._add(IIfConditionalOutputLayer(self, list(tensors), 1))

    def __repr__(self) -> str:
        return f"<IIfConditional {self.name!r}>"
