"""The shuffle operator: transpose, reshape, transpose (TensorRT's IShuffleLayer).

A reshape dimension of 0 copies the input dimension at the same index (when
``zero_is_placeholder``), and one -1 is inferred from the volume. The reshape
dimensions come from ``reshape_dims`` or from a second input whose values are
known at build time (a shape tensor computed from shapes and constants); a
non-constant value is used as a dimension as it is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import NetworkError, ShapeError, TypeMismatchError
from ..core.types import DataType, TensorFormat
from ..nodes.base import Binding
from ..shape import DimensionOperation, IDimensionExpr, constant, operation
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .elementwise import label
from .hand_over import HandOver, hand_over
from .params import ints, param
from .torch_cpu import runs_on, view

__all__ = ["ShuffleOperator"]


@register_operator
class ShuffleOperator(Operator):
    """params: ``first_transpose``, ``second_transpose`` (lists), ``zero_is_placeholder`` (bool)
    and, when set, ``reshape_dims`` (list)."""

    kind = "shuffle"
    first: list[int] = param(ints, key="first_transpose", default=())
    second: list[int] = param(ints, key="second_transpose", default=())
    reshape: list[int] | None = param(ints, key="reshape_dims", default=None)
    zero_is_placeholder: bool = param(bool, default=True)

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        self._prepared: tuple[tuple[int, ...], tuple[int, ...]] | None = None
        self._p1: tuple[int, ...] | None = None
        self._p2_inverse: tuple[int, ...] | None = None
        self._moved: tuple[int, ...] = ()
        self._mid: tuple[int, ...] = ()
        self._handed: HandOver | None = None

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        self._check_count(len(input_types))
        if len(input_types) == 2 and input_types[1] not in (DataType.INT32, DataType.INT64):
            raise TypeMismatchError(
                f"{label(self)}: the reshape dimensions input must be INT32 or INT64, got {input_types[1].name}"
            )
        return [input_types[0]]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        self._check_count(len(input_shapes))
        shape = input_shapes[0]
        moved = [shape[p] for p in self._perm(self.first, len(shape), "first_transpose")]
        spec = self._reshape_spec(input_values)
        mid = moved if spec is None else self._reshape(moved, spec)
        return [[mid[p] for p in self._perm(self.second, len(mid), "second_transpose")]]

    def output_values(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs | None]:
        value = input_values[0] if input_values else None
        if value is None or len(input_shapes[0]) > 1:
            return [None]
        out = self.output_shapes(input_shapes, input_values)[0]
        return [list(value) if len(out) <= 1 else None]

    def _check_count(self, count: int) -> None:
        if count not in (1, 2):
            raise NetworkError(f"{label(self)}: shuffle takes 1 input (or 2 with reshape dimensions), got {count}")

    def _perm(self, perm: list[int], rank: int, what: str) -> list[int]:
        full = perm[:rank] + list(range(len(perm), rank))
        if sorted(full) != list(range(rank)):
            raise ShapeError(f"{label(self)}: {what} {perm} is not a permutation of the input's {rank} dimensions")
        return full

    def _reshape_spec(self, input_values: Sequence[ShapeExprs | None]) -> ShapeExprs | None:
        if len(input_values) == 2:
            if input_values[1] is None:
                raise NetworkError(
                    f"{label(self)}: the reshape dimensions input is not known when the network is built; "
                    "dynamic reshape from a runtime tensor is not supported yet (compute it from shapes and constants)"
                )
            return list(input_values[1])
        return None if self.reshape is None else [constant(d) for d in self.reshape]

    def _reshape(self, moved: ShapeExprs, spec: ShapeExprs) -> ShapeExprs:
        dims: list[IDimensionExpr | None] = []
        inferred: int | None = None
        for index, dim in enumerate(spec):
            value = dim.get_constant_value() if dim.is_constant() else None
            if value == 0 and self.zero_is_placeholder:
                if index >= len(moved):
                    raise ShapeError(
                        f"{label(self)}: reshape dimension {index} is 0 (copy the input's) "
                        f"but the input has rank {len(moved)}"
                    )
                dims.append(moved[index])
            elif value == -1:
                if inferred is not None:
                    raise ShapeError(f"{label(self)}: reshape dimensions {spec} have more than one -1")
                inferred = index
                dims.append(None)
            elif value is not None and value < 0:
                raise ShapeError(f"{label(self)}: reshape dimension {index} is {value}; it must be >= -1")
            else:
                dims.append(dim)
        others = [d for d in dims if d is not None]
        total, known = _volume(moved), _volume(others)
        if inferred is not None:
            if any(d.is_constant() and d.get_constant_value() == 0 for d in others):
                raise ShapeError(f"{label(self)}: cannot infer the -1 in {spec}: the other dimensions have volume 0")
            if total.is_constant() and known.is_constant() and total.get_constant_value() % known.get_constant_value():
                raise ShapeError(
                    f"{label(self)}: cannot reshape {total} elements to {spec}: {total} is not divisible by {known}"
                )
            dims[inferred] = _quotient(moved, others)
        elif total.is_constant() and known.is_constant() and total != known:
            raise ShapeError(f"{label(self)}: cannot reshape {moved} ({total} elements) to {spec} ({known} elements)")
        return [d for d in dims if d is not None]

    def prepare(self, input_shapes: Sequence[tuple[int, ...]], output_shapes: Sequence[tuple[int, ...]]) -> None:
        shape, out = tuple(input_shapes[0]), tuple(output_shapes[0])
        p1 = self._perm(self.first, len(shape), "first_transpose")
        p2 = self._perm(self.second, len(out), "second_transpose")
        self._p1 = None if p1 == sorted(p1) else tuple(p1)
        self._moved = tuple(shape[p] for p in p1)
        inverse = [p2.index(axis) for axis in range(len(p2))]
        self._p2_inverse = None if p2 == sorted(p2) else tuple(inverse)
        self._mid = tuple(out[i] for i in inverse)
        self._prepared = (shape, out)

    def bind(self, inputs: Sequence[Binding], outputs: Sequence[Binding], workspace: int) -> None:
        """As any operator's; an output stored ``HWC`` (a reshape the channels-last layout pass made of a
        transpose, ``builder/layouts.py``) is written in its stored order and its hand-over slot emptied at
        each run, so that a channels-last reader takes the buffer (see ``ops/hand_over.py``)."""
        super().bind(inputs, outputs, workspace)
        stored = outputs[0].format == TensorFormat.HWC
        self._handed = hand_over(outputs[0].array) if stored else None

    def direct_launch(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any) -> Any:
        """On a GPU with PyTorch, a transpose as torch's ``copy_`` of the permuted view into the output (1.6-2.2x
        CuPy's strided assignment on an H200: ``benchmarks/gpu_transpose_copy.py``); None elsewhere, and where the
        reshape between the two transposes is no view of the permuted input."""
        x, out = inputs[0], outputs[0]
        if xp is np or (self._p1 is None and self._p2_inverse is None) or x.size == 0 or not runs_on(xp):
            return None
        try:
            source = view(x)
            if self._p1 is not None:
                source = source.permute(*self._p1)
            if self._p2_inverse is None:
                target = view(out).view(self._moved)
            else:
                target, source = view(out).permute(*self._p2_inverse), source.view(self._mid)
        except (RuntimeError, TypeError):  # a reshape that needs a copy, a type torch does not view
            return None
        handed = self._handed
        if handed is None:
            return target.copy_, (source,)

        def copy_stored(given: Any) -> None:  # (an output stored HWC: its slot emptied, the buffer holds it)
            target.copy_(given)
            handed.tensor = None

        return copy_stored, (source,)

    def views_input(self) -> bool:
        """A reshape without transposes."""
        return list(self.first) == sorted(self.first) and list(self.second) == sorted(self.second)

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x, out = inputs[0], outputs[0]
        if self._prepared != (x.shape, out.shape):
            self.prepare([x.shape], [out.shape])
        source = x if self._p1 is None else x.transpose(self._p1)
        if self._p2_inverse is None:
            out.reshape(self._moved)[...] = source
        else:
            out.transpose(self._p2_inverse)[...] = source.reshape(self._mid)
        if self._handed is not None:
            self._handed.tensor = None


def _volume(dims: Sequence[IDimensionExpr]) -> IDimensionExpr:
    """The product of ``dims``: constants folded first, then the symbolic factors."""
    total = constant(math.prod(d.get_constant_value() for d in dims if d.is_constant()))
    for dim in dims:
        if not dim.is_constant():
            total = operation(DimensionOperation.PROD, total, dim)
    return total


def _quotient(numerator: Sequence[IDimensionExpr], denominator: Sequence[IDimensionExpr]) -> IDimensionExpr:
    """``volume(numerator) // volume(denominator)`` with shared factors cancelled.

    ``(a*b*12) // (a*4)`` becomes ``b*3``: exact, and its bounds over a profile stay tight.
    """
    top, bottom = list(numerator), []
    for factor in denominator:
        if factor in top:
            top.remove(factor)
        else:
            bottom.append(factor)
    top_const = math.prod(d.get_constant_value() for d in top if d.is_constant())
    bottom_const = math.prod(d.get_constant_value() for d in bottom if d.is_constant())
    if bottom_const and top_const % bottom_const == 0:
        top_const, bottom_const = top_const // bottom_const, 1
    top = [constant(top_const)] + [d for d in top if not d.is_constant()]
    bottom = [constant(bottom_const)] + [d for d in bottom if not d.is_constant()]
    return operation(DimensionOperation.FLOOR_DIV, _volume(top), _volume(bottom))
