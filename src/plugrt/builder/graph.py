"""Graph checks: which layers feed the outputs, in an order where producers come first."""

from __future__ import annotations

from collections.abc import Mapping

from ..core.errors import BuildError
from ..network.definition import INetworkDefinition
from ..network.layer import ILayer

__all__ = ["topological_layers"]


def topological_layers(network: INetworkDefinition, producers: Mapping[int, ILayer] | None = None) -> list[ILayer]:
    """Layers the outputs depend on, producers first; a cycle raises :class:`BuildError`.

    ``producers`` replaces the producer of tensors (by id): the layers loops and conditionals are lowered to.
    """
    replaced = producers or {}
    state: dict[int, int] = {}  # 1 = on the stack, 2 = done
    order: list[ILayer] = []
    for output in network._outputs:
        first = replaced.get(id(output), output.producer)
        if first is None:
            continue
        stack: list[tuple[ILayer, int]] = [(first, 0)]
        while stack:
            layer, position = stack.pop()
            if position == 0:
                if state.get(id(layer)) == 2:
                    continue
                state[id(layer)] = 1
            inputs = list(layer._inputs) + list(getattr(layer, "shape_inputs", []))
            if position < len(inputs):
                stack.append((layer, position + 1))
                tensor = inputs[position]
                producer = replaced.get(id(tensor), tensor.producer) if tensor is not None else None
                if producer is not None:
                    if state.get(id(producer)) == 1:
                        raise BuildError(
                            f"the network has a cycle: layer {producer.name!r} depends on its own output "
                            f"through layer {layer.name!r}"
                        )
                    if state.get(id(producer)) != 2:
                        stack.append((producer, 0))
                continue
            state[id(layer)] = 2
            order.append(layer)
    return order
