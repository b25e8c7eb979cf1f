"""Importing a model with some input dimensions fixed: the dimensions a profile fixes (min == max) or those of
the first call, written into a copy of the model as constants so that shape-only conditions (an ``If`` on a
dimension, whose branches may even differ in rank) are decided when the network is built."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import onnx

__all__ = ["FixedDims", "fixed_dims", "graph_inputs", "graph_of", "with_fixed_dims"]

#: per input name: its rank and the fixed dimensions (axis -> size)
FixedDims = dict[str, tuple[int, dict[int, int]]]
ShapeRange = tuple[Sequence[int], Sequence[int], Sequence[int]]


def fixed_dims(shapes: Mapping[str, ShapeRange] | None) -> FixedDims:
    """Per input, its rank and the dimensions ``shapes`` fixes (min == max): they are imported as constants."""
    fixed: FixedDims = {}
    for name, value in (shapes or {}).items():
        try:
            low, _, high = (tuple(int(d) for d in s) for s in value)
        except (TypeError, ValueError):
            continue  # malformed: _check_ranges names it
        dims = {axis: a for axis, (a, b) in enumerate(zip(low, high)) if a == b}
        if dims and len(low) == len(high):
            fixed[name] = (len(low), dims)
    return fixed


def with_fixed_dims(model: onnx.ModelProto, fixed: FixedDims) -> onnx.ModelProto:
    """``model``, or a copy whose dynamic input dimensions that the profile fixes are constants.

    Importing with them known lets shape-only conditions (an ``If`` on a dimension, whose branches
    may even differ in rank) be decided when the network is built, as they are for static inputs.
    """

    def changes(value: onnx.ValueInfoProto) -> list[tuple[int, int]]:
        rank, dims = fixed.get(value.name, (-1, {}))
        declared = value.type.tensor_type.shape.dim if value.type.HasField("tensor_type") else []
        if len(declared) != rank:
            return []  # a rank the profile does not match: the profile check names it
        return [(axis, size) for axis, size in dims.items() if not declared[axis].HasField("dim_value")]

    if not any(changes(value) for value in model.graph.input):
        return model
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for value in copy.graph.input:
        for axis, size in changes(value):
            dim = value.type.tensor_type.shape.dim[axis]
            dim.Clear()
            dim.dim_value = size
    return copy


def graph_of(model: Any) -> onnx.GraphProto | None:
    """The graph of ``model`` (a path, bytes or ``ModelProto``; external weights not read), None if unreadable."""
    try:
        if isinstance(model, onnx.ModelProto):
            return model.graph
        if isinstance(model, (str, os.PathLike)):
            return onnx.load(os.fspath(model), load_external_data=False).graph
        return onnx.load_from_string(bytes(model)).graph
    except Exception:
        return None


def graph_inputs(graph: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    """The graph's inputs that are not initializers."""
    weights = {t.name for t in graph.initializer}
    return [v for v in graph.input if v.name not in weights and v.type.HasField("tensor_type")]
