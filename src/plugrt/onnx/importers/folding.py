"""Constant folding at import: a node's layers run by their operators' own kernels.

An importer adds its layers as usual and hands its outputs to
:meth:`ImportContext.folded`. When every layer added since the node began
(or since a given layer index) reads only values known at import --
initializers, constants, values folded before -- each is run now, in order,
by :func:`plugrt.ops.rules.evaluate` (its operator's rules and NumPy kernel, as
the CPU engine runs it). The layers then leave the network and the outputs
become constants, so later importers see their values. Otherwise nothing changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...network.layer import IPluginV2Layer, IPluginV3Layer
from ...ops.rules import evaluate

if TYPE_CHECKING:
    from .base import ImportContext

__all__ = ["fold_layers"]


def fold_layers(ctx: ImportContext, start: int, outputs: Sequence[Any], limit: int | None) -> list[Any] | None:
    """Constants for ``outputs``, computed by running the layers from index ``start`` on; None when they cannot be.

    They cannot when a layer reads a value not known at import, is a plugin,
    or fails to run; or when the known values they read from outside hold more
    than ``limit`` elements (None: no limit).
    """
    network = ctx.network
    layers = [network.get_layer(i) for i in range(start, network.num_layers)]
    if not layers or any(isinstance(layer, (IPluginV2Layer, IPluginV3Layer)) for layer in layers):
        return None
    values: dict[int, np.ndarray] = {}
    read_outside = 0
    for layer in layers:
        arrays = []
        for tensor in layer._inputs:
            value = values.get(id(tensor))
            if value is None:
                value = ctx.value_of(tensor)
                if value is None:
                    return None
                read_outside += int(value.size)
                if limit is not None and read_outside > limit:
                    return None
            arrays.append(value)
        results = _run(layer, arrays, ctx)
        if results is None:
            return None
        values.update((id(t), r) for t, r in zip(layer._outputs, results))
    if any(t is not None and id(t) not in values for t in outputs):
        return None
    computed = [None if t is None else values[id(t)] for t in outputs]
    for layer in network.discard_layers_from(start):
        for tensor in layer._outputs:
            ctx.forget(tensor)
    return [None if value is None else ctx.constant(value) for value in computed]


def _run(layer: Any, arrays: list[np.ndarray], ctx: ImportContext) -> list[np.ndarray] | None:
    """The layer's outputs for these input values (constants as remembered); None when it does not run."""
    known = [ctx.remembered(t) for t in layer._outputs]
    if all(v is not None for v in known):
        return known  # type: ignore[return-value]
    try:
        op = layer.to_operator()
        op.name = layer.name
        return evaluate(op, arrays)
    except Exception:  # the layer stays and reports its problem when the network is built
        return None
