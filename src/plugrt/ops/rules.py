"""Running one operator: its rules on what is known of its inputs, and its kernel on NumPy values.

:func:`output_info` runs an operator's type, shape and shape-value rules for
given input types, shapes and values (:class:`TensorInfo`); network shape
inference and the standard layers' checks at ``add_*`` call it.
:func:`evaluate` runs the operator's kernel over NumPy arrays, as the CPU
engine would (buffers allocated here, ``prepare`` then ``run``); the ONNX
importer folds constants with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..core.errors import PlugrtError, ShapeError
from ..core.types import DataType, from_nptype, nptype
from ..shape import constant
from ..shape.expr import IDimensionExpr
from .base import Operator

__all__ = ["TensorInfo", "evaluate", "output_info"]

#: Larger int tensors are data, not shapes: :func:`evaluate` gives no values of them to the rules.
_MAX_VALUES = 64


@dataclass(frozen=True)
class TensorInfo:
    """What is known about a tensor before it is computed: type, shape and (for shape tensors) values."""

    dtype: DataType
    shape: list[IDimensionExpr]
    values: list[IDimensionExpr] | None = None

    @property
    def rank(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def dims(self) -> list[int]:
        """The shape with -1 where a dimension is not a build-time constant."""
        return [d.get_constant_value() if d.is_constant() else -1 for d in self.shape]

    def constant_value(self) -> np.ndarray | None:
        """The tensor's value when every element is a known constant (small int shape tensors)."""
        if self.values is None or self.rank > 1 or not all(v.is_constant() for v in self.values):
            return None
        if not all(d.is_constant() for d in self.shape):
            return None
        try:
            dtype = nptype(self.dtype)
        except PlugrtError:
            return None
        data = np.array([v.get_constant_value() for v in self.values], dtype=dtype)
        return data.reshape(self.dims) if self.rank == 1 else data.reshape(())


def output_info(op: Operator, inputs: Sequence[TensorInfo]) -> list[TensorInfo]:
    """The operator's outputs for these inputs: its type, shape and value rules, run once each.

    Rule errors raise :class:`PlugrtError` (others become :class:`ShapeError`
    naming the operator); rules that disagree on the number of outputs raise too.
    """
    shapes_in = [i.shape for i in inputs]
    values_in = [i.values for i in inputs]
    try:
        types = op.output_types([i.dtype for i in inputs])
        shapes = op.output_shapes(shapes_in, values_in)
        values = op.output_values(shapes_in, values_in)
    except PlugrtError:
        raise
    except Exception as exc:
        raise ShapeError(f"{op.name or op.kind} ({op.kind}): {type(exc).__name__}: {exc}") from exc
    if len(types) != len(shapes):
        raise ShapeError(
            f"{op.name or op.kind} ({op.kind}): the type rule gives {len(types)} outputs, the shape rule {len(shapes)}"
        )
    values = list(values) + [None] * (len(shapes) - len(values))
    return [TensorInfo(t, list(s), None if v is None else list(v)) for t, s, v in zip(types, shapes, values)]


def evaluate(op: Operator, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The operator's outputs for these input values, computed by its kernel with NumPy.

    Outputs of data-dependent size are computed at their declared upper bound
    and cut to the sizes the kernel wrote. Errors of the rules or the kernel propagate.
    """
    infos = [TensorInfo(from_nptype(a.dtype), [constant(d) for d in a.shape], _values(a)) for a in arrays]
    outputs = output_info(op, infos)
    upper = {e.symbol: e.size_bounds[1].evaluate({}) for e in op.size_exprs.values()}
    buffers = [np.empty(tuple(d.evaluate(upper) for d in o.shape), dtype=nptype(o.dtype)) for o in outputs]
    inputs = [np.require(a, requirements="C") for a in arrays]  # keeps 0-d values 0-d
    op.prepare([a.shape for a in inputs], [b.shape for b in buffers])
    with np.errstate(all="ignore"):
        op.run(inputs, buffers, np)
    if not op.size_exprs:
        return buffers
    sizes = {e.symbol: int(buffers[k].reshape(-1)[0]) for k, e in op.size_exprs.items()}
    results = []
    for info, buffer in zip(outputs, buffers):
        shape = tuple(d.evaluate(sizes) for d in info.shape)
        results.append(buffer.reshape(-1)[: int(np.prod(shape, dtype=np.int64))].reshape(shape).copy())
    return results


def _values(array: np.ndarray) -> list[IDimensionExpr] | None:
    """The values of a small int tensor of rank <= 1 as constants (what shape rules read), else None."""
    if array.ndim <= 1 and array.dtype.kind in "iu" and array.size <= _MAX_VALUES:
        return [constant(int(v)) for v in array.reshape(-1)]
    return None
