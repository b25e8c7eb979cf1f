"""The built layer list as a graph the optimizer rewrites: who produces and who reads each tensor.

A rule (``builder/fusion.py``) looks at an anchor layer and may return a :class:`Fusion`:
layers that become one new layer, placed where the last of them was (every input
is ready there). :meth:`LayerGraph.apply` checks that the fused layers' results
are read only by each other, except the new layer's outputs, then makes the
rewrite; :meth:`LayerGraph.compact` drops what no layer uses any more and renumbers
the tensors.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...core.types import DataType
from ...engine.plan import LayerPlan, TensorPlan

__all__ = ["FLOAT_TYPES", "Fusion", "LayerGraph", "folded_batch_norm"]

FLOAT_TYPES = (DataType.FLOAT, DataType.HALF)


def folded_batch_norm(layer: LayerPlan) -> bool:
    """True for an inference batch normalization that is ``x * scale + shift`` by per-channel weights (one input,
    one output: ``ops/normalization.py``)."""
    return (
        layer.kind == "batch_normalization"
        and not layer.params.get("training_mode", False)
        and {"scale", "shift"} <= set(layer.weights)
        and len(layer.inputs) == 1
        and len(layer.outputs) == 1
    )


@dataclass
class Fusion:
    """Replace the layers at ``steps`` by ``layer`` (its outputs are some of theirs)."""

    steps: list[int]
    layer: LayerPlan


class LayerGraph:
    """Layers, tensors, engine I/O and weights of one build, with producer and reader maps kept current."""

    def __init__(
        self,
        layers: list[LayerPlan],
        tensors: list[TensorPlan],
        io: list[int],
        weights: dict[str, np.ndarray],
        gpu: bool = False,
    ) -> None:
        #: the build is for a GPU (a rule may fuse there in some types only)
        self.gpu = gpu
        self.layers: list[LayerPlan | None] = list(layers)
        self.tensors = tensors
        self.io = list(io)
        self.weights = weights
        self._io = set(io)
        self.producer: dict[int, int] = {}
        self.readers: dict[int, list[int]] = {}
        self._index()

    def _index(self) -> None:
        self.producer = {}
        self.readers = {}
        for step, layer in enumerate(self.layers):
            if layer is not None:
                self._enter(step, layer)

    def _enter(self, step: int, layer: LayerPlan) -> None:
        for o in layer.outputs:
            self.producer[o] = step
        for i in (*layer.inputs, *layer.shape_inputs):
            self.readers.setdefault(i, []).append(step)

    def _leave(self, step: int) -> None:
        """Take the layer at ``step`` out of the maps (a rewrite changes only the layers it touches)."""
        layer = self.layers[step]
        if layer is None:
            return
        for o in layer.outputs:
            if self.producer.get(o) == step:
                del self.producer[o]
        for i in (*layer.inputs, *layer.shape_inputs):
            readers = self.readers[i]
            readers.remove(step)
            if not readers:
                del self.readers[i]

    # --- questions rules ask -------------------------------------------------------------
    def layer(self, step: int) -> LayerPlan:
        """The layer at ``step`` (which must not have been fused away)."""
        found = self.layers[step]
        assert found is not None, f"step {step} was fused away"
        return found

    def steps(self) -> list[int]:
        """The steps that still hold a layer, in order."""
        return [step for step, layer in enumerate(self.layers) if layer is not None]

    def private(self, tensor: int) -> bool:
        """True for an internal tensor (not an engine input, output or constant)."""
        return self.tensors[tensor].role == "internal" and tensor not in self._io

    def read_by(self, tensor: int) -> set[int]:
        """The steps that read ``tensor``."""
        return set(self.readers.get(tensor, ()))

    def only_reader(self, tensor: int) -> int | None:
        """The one step reading private ``tensor`` (perhaps more than once), else None."""
        readers = self.read_by(tensor)
        if len(readers) != 1 or not self.private(tensor):
            return None
        return next(iter(readers))

    def producer_layer(self, tensor: int) -> LayerPlan | None:
        """The layer writing ``tensor`` (None for engine inputs)."""
        step = self.producer.get(tensor)
        return None if step is None else self.layers[step]

    def value(self, tensor: int) -> np.ndarray | None:
        """The value of a tensor a constant layer stores, else None."""
        layer = self.producer_layer(tensor)
        if layer is None or layer.kind != "constant" or "value" not in layer.weights:
            return None
        stored = self.weights.get(layer.weights["value"])
        return None if stored is None else np.asarray(stored)

    def scalar(self, tensor: int) -> float | None:
        """The value of a one-element float constant, else None."""
        value = self.value(tensor)
        if value is None or value.size != 1 or value.dtype.kind != "f":
            return None
        return float(value.reshape(-1)[0])

    def add_weight(self, name: str, array: np.ndarray) -> str:
        """Store ``array`` as a new weight under ``name`` (``name#1``, ``name#2``, ... where that is taken); its key."""
        key, number = name, 0
        while key in self.weights:
            number += 1
            key = f"{name}#{number}"
        self.weights[key] = array
        return key

    def shape_equal(self, a: int, b: int) -> bool:
        """True when tensors ``a`` and ``b`` have the same shape expressions."""
        sa, sb = self.tensors[a].shape, self.tensors[b].shape
        return len(sa) == len(sb) and all(p == q for p, q in zip(sa, sb))

    def fusable(self, step: int) -> bool:
        """True for a standard layer a rule may take: no plugin, no shape inputs, no data-dependent sizes."""
        layer = self.layers[step]
        return layer is not None and not layer.is_plugin and not layer.shape_inputs and not layer.size_outputs

    # --- rewriting ------------------------------------------------------------------------
    def apply(self, fusion: Fusion) -> bool:
        """Make ``fusion`` if it is sound (else leave the graph as it was); True when made."""
        if not self.sound(fusion):
            return False
        steps = sorted(set(fusion.steps))
        for s in steps:
            self._leave(s)
        for s in steps[:-1]:
            self.layers[s] = None
        self.layers[steps[-1]] = fusion.layer
        self._enter(steps[-1], fusion.layer)
        return True

    def sound(self, fusion: Fusion) -> bool:
        """Whether ``fusion`` may be made: fusable steps whose outputs nobody else reads, but those the fused
        layer writes again."""
        steps = sorted(set(fusion.steps))
        if not steps or any(not self.fusable(s) for s in steps):
            return False
        inside = set(steps)
        kept = set(fusion.layer.outputs)
        for s in steps:
            for o in self.layer(s).outputs:
                if o in kept:
                    # the new layer writes it at the last step: an earlier step's output may be kept when the layers
                    # outside that read it come after (attention's scores, the sum a residual LayerNorm keeps)
                    if self.producer.get(o) != steps[-1] and any(r < steps[-1] for r in self.read_by(o) - inside):
                        return False
                elif not self.private(o) or not self.read_by(o) <= inside:
                    return False
        return kept <= {o for s in steps for o in self.layer(s).outputs}

    def remove(self, step: int) -> None:
        """Drop the layer at ``step`` (its outputs must be read by nobody)."""
        self._leave(step)
        self.layers[step] = None

    def redirect(self, old: int, new: int) -> None:
        """Make every layer that reads tensor ``old`` read ``new`` instead (same type, format and shape)."""
        for step in self.readers.pop(old, []):
            layer = self.layer(step)
            layer.inputs = [new if i == old else i for i in layer.inputs]
            layer.shape_inputs = [new if i == old else i for i in layer.shape_inputs]
            self.readers.setdefault(new, []).append(step)

    def compact(self) -> tuple[list[LayerPlan], list[TensorPlan], list[int]]:
        """The layers left, the tensors they and the engine I/O use (renumbered), and the I/O."""
        layers = [layer for layer in self.layers if layer is not None]
        used = set(self.io)
        for layer in layers:
            used.update((*layer.inputs, *layer.outputs, *layer.shape_inputs))
        new_index: dict[int, int] = {}
        tensors: list[TensorPlan] = []
        for index, tensor in enumerate(self.tensors):
            if index in used:
                new_index[index] = len(tensors)
                tensors.append(tensor)
        for layer in layers:
            layer.inputs = [new_index[i] for i in layer.inputs]
            layer.outputs = [new_index[o] for o in layer.outputs]
            layer.shape_inputs = [new_index[i] for i in layer.shape_inputs]
        return layers, tensors, [new_index[i] for i in self.io]
