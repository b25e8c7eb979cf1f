"""Spatial reductions as global pooling: ``ReduceMean`` / ``ReduceMax`` over the two spatial axes of an ``[N, C, H, W]``
tensor, keeping them (how ``torch.onnx.export`` writes ``adaptive_avg_pool2d(x, 1)`` and ``x.mean((2, 3),
keepdim=True)`` at opset 18), become the ``global_pooling`` layer that ``GlobalAveragePool`` / ``GlobalMaxPool``
import as.

The two compute the same values (an average may differ by a few ulp: its sum runs over the ``H*W`` values as one
axis). What it buys: global pooling takes a channels-last input (``builder/layouts.py``), so the convolution
before it (MobileNetV2's and ResNet-18's last) stays in the channels-last run and hands its result over instead of
reordering it into an NCHW buffer for the reduction; and a squeeze-and-excitation block written with
``ReduceMean`` is found by the ``squeeze_excitation`` rule, which anchors on global pooling.
"""

from __future__ import annotations

from ...engine.plan import LayerPlan
from .graph import FLOAT_TYPES, Fusion, LayerGraph

__all__ = ["spatial_pooling"]

#: the reduce operations that are a global pooling mode
_MODES = {"AVG": "AVERAGE", "MAX": "MAX"}
#: the axes bitmask of H and W in a rank-4 tensor
_SPATIAL = 0b1100


def spatial_pooling(graph: LayerGraph, step: int) -> Fusion | None:
    """The ``reduce`` at ``step`` as a ``global_pooling`` layer of the same name, where it is one (see the
    module's note)."""
    layer = graph.layer(step)
    if layer.kind != "reduce" or len(layer.inputs) != 1 or not graph.fusable(step):
        return None
    mode = _MODES.get(str(layer.params.get("op")))
    if mode is None or not layer.params.get("keep_dims") or int(layer.params.get("axes", 0)) != _SPATIAL:
        return None
    x = graph.tensors[layer.inputs[0]]
    if len(x.shape) != 4 or x.dtype not in FLOAT_TYPES:
        return None
    pooled = LayerPlan(layer.name, "global_pooling", list(layer.inputs), list(layer.outputs), params={"mode": mode})
    return Fusion([step], pooled)
