"""GELU and hard-swish as exported: a region of elementwise layers computing one of them of one tensor,
as one activation.

Exporters spell GELU many ways: ``x * 0.5 * (1 + Erf(x / 1.4142))`` with the division a
product by 0.7071, the 0.5 taken before or after, the products in any order (torch's dynamo
and TorchScript exporters differ), and the tanh form
``0.5 * x * (1 + Tanh(0.7979 * (x + 0.044715 * x^3)))`` with ``x^3`` a ``Pow`` or two
products. Rather than list the spellings, the rule finds, from each ``Erf`` or ``Tanh``
layer, the regions of float elementwise layers that read one tensor ``x`` (and one-element
constants) and end in one result every other layer of the region alone reads, evaluates
each region in float64 at 169 points of ``x`` in [-30, 30], and takes the largest whose
values are GELU's (erf form through ``Erf``, tanh form through ``Tanh``) within 1e-5
relative (1e-3 in HALF, whose constants are rounded to 11 bits). That region becomes one
``activation`` layer of type ``GELU_ERF`` or ``GELU_TANH`` (the kernels ONNX ``Gelu``
imports to), named ``"GELU_ERF [<first> .. <last>, N layers]"``.

Hard-swish, ``x * clip(x + 3, 0, 6) / 6`` (PaddlePaddle's ``Add, Clip, Mul, Div``, ONNX
``HardSwish`` imported as ``x * HardSigmoid(x)``, MobileNetV3's ``x * ReLU6(x + 3) / 6``), is
found the same way from each ``Clip`` or ``HardSigmoid`` layer by the ``hard_swish`` rule and
becomes one ``HARD_SWISH`` activation (in Paddle's order of operations: bit-identical to it).

The fused kernel computes GELU with exact constants, so results differ from the layers'
by their float32 roundings: a few units in the last place (the tests hold them to
2e-6 relative plus 1e-6 absolute in FLOAT).
"""

from __future__ import annotations

import math

import numpy as np

from ...core.errors import PlugrtError
from ...core.types import DataType
from ...engine.plan import LayerPlan
from ...ops.base import create_operator
from ...ops.unary import erf_fallback
from .chains import fused_name, is_elementwise
from .graph import Fusion, LayerGraph

__all__ = ["gelu", "hard_swish"]

#: where regions are compared with GELU
_PROBE = np.concatenate([np.linspace(-8.0, 8.0, 161), [-30.0, -20.0, -12.0, -10.0, 10.0, 12.0, 20.0, 30.0]])
_TOLERANCE, _HALF_TOLERANCE = 1e-5, 1e-3
#: how far back from Erf/Tanh the region's input may be, and the largest region
_DEPTH, _MAX_LAYERS = 6, 24


def _references() -> dict[str, np.ndarray]:
    x = _PROBE
    cdf = 0.5 * (1.0 + erf_fallback(np, x / math.sqrt(2.0)))
    tanh = 0.5 * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    return {"GELU_ERF": x * cdf, "GELU_TANH": x * tanh, "HARD_SWISH": x * np.clip(x + 3.0, 0.0, 6.0) / 6.0}


_REFERENCES = _references()


def _anchor_kind(layer: LayerPlan) -> str | None:
    """The activation a region through ``layer`` may compute, or None."""
    if layer.kind == "unary" and layer.params.get("op") == "ERF":
        return "GELU_ERF"
    if layer.kind == "activation" and layer.params.get("type") == "TANH":
        return "GELU_TANH"
    if layer.kind == "activation" and layer.params.get("type") in ("CLIP", "HARD_SIGMOID"):
        return "HARD_SWISH"
    return None


def _roots(graph: LayerGraph, anchor: int) -> list[int]:
    """Tensors the region's input may be: the non-constant inputs of the anchor and of its elementwise ancestors."""
    found: list[int] = []
    frontier, seen = [anchor], {anchor}
    for _ in range(_DEPTH):
        following: list[int] = []
        for step in frontier:
            for tensor in graph.layer(step).inputs:
                if graph.scalar(tensor) is not None or tensor in found:
                    continue
                found.append(tensor)
                producer = graph.producer.get(tensor)
                if producer is not None and producer not in seen and is_elementwise(graph, producer):
                    seen.add(producer)
                    following.append(producer)
        frontier = following
    return found


def _region(graph: LayerGraph, root: int) -> list[int]:
    """The elementwise layers computed from ``root`` and one-element constants alone (in step order)."""
    known, region = {root}, set[int]()
    work = [root]
    while work and len(region) < _MAX_LAYERS:
        tensor = work.pop()
        for step in sorted(graph.read_by(tensor)):
            if step in region or not is_elementwise(graph, step):
                continue
            layer = graph.layer(step)
            if all(i in known or graph.scalar(i) is not None for i in layer.inputs):
                region.add(step)
                known.add(layer.outputs[0])
                work.append(layer.outputs[0])
    return sorted(region)


def _cone(graph: LayerGraph, region: list[int], sink: int) -> list[int]:
    """The layers of ``region`` that ``sink``'s result depends on (``sink`` included)."""
    members, cone, work = set(region), {sink}, [sink]
    while work:
        for tensor in graph.layer(work.pop()).inputs:
            producer = graph.producer.get(tensor)
            if producer in members and producer not in cone:
                cone.add(producer)
                work.append(producer)
    return sorted(cone)


def _closed(graph: LayerGraph, cone: list[int]) -> bool:
    """True when every result in ``cone`` but the last is private and read only inside it."""
    inside = set(cone)
    return all(graph.private(o) and graph.read_by(o) <= inside for s in cone[:-1] for o in graph.layer(s).outputs)


def _evaluate(graph: LayerGraph, cone: list[int], root: int) -> np.ndarray | None:
    """The cone's result in float64 with ``root`` = the probe points (None when a kernel refuses)."""
    rank = len(graph.tensors[root].shape)
    values = {root: _PROBE.reshape((1,) * (rank - 1) + (-1,))}
    try:
        with np.errstate(all="ignore"):
            for step in cone:
                layer = graph.layer(step)
                inputs: list[np.ndarray] = []
                for tensor in layer.inputs:
                    known = values.get(tensor)
                    if known is None:
                        stored = graph.value(tensor)
                        if stored is None:
                            return None
                        known = stored.astype(np.float64)
                    inputs.append(known)
                out = np.empty(np.broadcast_shapes(*(a.shape for a in inputs)), np.float64)
                op = create_operator(layer.kind, layer.params, {})
                op.prepare([a.shape for a in inputs], [out.shape])
                op.run(inputs, [out], np)
                values[layer.outputs[0]] = out
    except (PlugrtError, ValueError, TypeError, ArithmeticError):  # a layer this evaluation cannot run is no GELU
        return None
    return values[graph.layer(cone[-1]).outputs[0]].reshape(-1)


def _matches(result: np.ndarray, kind: str, tolerance: float) -> bool:
    reference = _REFERENCES[kind]
    return result.shape == reference.shape and bool(
        np.all(np.abs(result - reference) <= tolerance * np.maximum(1.0, np.abs(reference)))
    )


def gelu(graph: LayerGraph, step: int) -> Fusion | None:
    """The largest GELU region through the ``Erf``/``Tanh`` layer at ``step``, as one activation layer."""
    kind = _anchor_kind(graph.layer(step))
    return _activation_region(graph, step, kind) if kind in ("GELU_ERF", "GELU_TANH") else None


def hard_swish(graph: LayerGraph, step: int) -> Fusion | None:
    """The largest hard-swish region through the ``Clip``/``HardSigmoid`` layer at ``step``, as one activation."""
    kind = _anchor_kind(graph.layer(step))
    return _activation_region(graph, step, kind) if kind == "HARD_SWISH" else None


def _activation_region(graph: LayerGraph, step: int, kind: str) -> Fusion | None:
    """The largest region through the anchor at ``step`` computing activation ``kind``, as one layer."""
    if not is_elementwise(graph, step):
        return None
    # HALF constants are rounded to 11 bits (1.4142 is 1.4141): a looser match
    tolerance = _TOLERANCE if graph.tensors[graph.layer(step).outputs[0]].dtype == DataType.FLOAT else _HALF_TOLERANCE
    best: tuple[list[int], int] | None = None
    for root in _roots(graph, step):
        region = _region(graph, root)
        if step not in region:
            continue
        for sink in region:
            if sink < step or not graph.shape_equal(graph.layer(sink).outputs[0], root):
                continue
            cone = _cone(graph, region, sink)
            if step not in cone or not _closed(graph, cone) or (best is not None and len(cone) <= len(best[0])):
                continue
            result = _evaluate(graph, cone, root)
            if result is not None and _matches(result, kind, tolerance):
                best = (cone, root)
    if best is None:
        return None
    cone, root = best
    fused = LayerPlan(
        fused_name(kind, graph, cone),
        "activation",
        [root],
        [graph.layer(cone[-1]).outputs[0]],
        params={"type": kind, "alpha": 0.0, "beta": 0.0},
    )
    return Fusion(cone, fused)
