"""Type round trips: a HALF tensor widened to FLOAT, then converted back to HALF for a reader.

Exports of fp16 models keep FLOAT islands (torch's exporter casts attention scores, values and residuals to
FLOAT in BERT's first layer); a build with ``BuilderFlag.FP16`` runs those layers in HALF again, so the
tensor goes HALF → FLOAT (the export's ``Cast``) → HALF (the builder's reformat). HALF → FLOAT → HALF is
exact, so the reformat's readers read the HALF source instead, bit for bit; the cast goes too when nothing
else reads it (at once: the rules after ask whether the source has other readers). With the casts gone, the patterns around them (the attention, the
residual LayerNorm) are what the fusion rules look for.
"""

from __future__ import annotations

from ...core.types import DataType
from .graph import LayerGraph

__all__ = ["drop_round_trips"]

#: the layers that widen a tensor without changing it otherwise
_WIDENING = ("cast", "reformat")


def drop_round_trips(graph: LayerGraph) -> list[str]:
    """Make the readers of every HALF reformat of a widened HALF tensor read that tensor; the layers removed (the
    reformats, and the widening layers nobody reads any more), by name."""
    dropped: list[str] = []
    for step in graph.steps():
        layer = graph.layers[step]
        if layer is None or layer.kind != "reformat" or layer.params.get("dst_type") != DataType.HALF.name:
            continue
        if "scale" in layer.params or len(layer.inputs) != 1 or not graph.fusable(step):
            continue
        wide, narrow = layer.inputs[0], layer.outputs[0]
        widening = graph.producer_layer(wide)
        if widening is None or widening.kind not in _WIDENING or len(widening.inputs) != 1 or "scale" in widening.params:
            continue
        source = widening.inputs[0]
        same = graph.tensors[source]
        if same.dtype != DataType.HALF or graph.tensors[wide].dtype != DataType.FLOAT:
            continue
        if same.format != graph.tensors[narrow].format or not graph.shape_equal(source, narrow):
            continue
        if not graph.private(narrow):  # an engine output keeps the layer that writes it
            continue
        graph.redirect(narrow, source)
        graph.remove(step)
        dropped.append(layer.name)
        if not graph.read_by(wide) and graph.private(wide):  # now, not at dead-layer removal: the rules that
            widening_step = graph.producer[wide]  # follow ask who else reads the source
            dropped.append(widening.name)
            graph.remove(widening_step)
    return dropped
