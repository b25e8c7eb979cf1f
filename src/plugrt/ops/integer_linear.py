"""ONNX's integer convolution and matrix product with zero points, and the requantize after them.

``integer_convolution`` (ConvInteger) and ``integer_matmul`` (MatMulInteger) compute
``sum((x - x_zero_point) * (w - w_zero_point))`` exactly and write it as INT32; ``requantize``
turns such a sum into INT8 or UINT8 as QLinearConv and QLinearMatMul do:
``saturate(rint(float32(acc + bias) * (scale_a * scale_b / y_scale)) + y_zero_point)``, the
multiplier computed in float32 in that order and rounded half to even, as onnxruntime does.

Operands are INT8 or UINT8 with zero points of their own type: one per tensor, or (the weight
operand) one per output channel, so a shifted operand lies in ``[-255, 255]``. The shifted
values are exact in float32 and the products are summed by :func:`plugrt.ops.int8.exact_product`
in blocks short enough to be exact; the ``product_bound`` parameter (the largest
``|a - a_zero| * |b - b_zero|``, from the importer's knowledge of the zero points) sets the block.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import NetworkError, ShapeError, TypeMismatchError
from ..core.types import DataType
from .base import Operator, ShapeExprs, register_operator
from .conv import ConvolutionOperator
from .elementwise import FLOAT_TYPES, expect_inputs, label
from .int8 import exact_product
from .matrix_multiply import MatrixMultiplyOperator, product_operand

__all__ = [
    "QUANTIZED_TYPES",
    "IntegerConvolutionOperator",
    "IntegerMatrixMultiplyOperator",
    "RequantizeOperator",
    "widest_product",
]

#: The types of quantized operands and their ranges.
QUANTIZED_TYPES: dict[DataType, tuple[int, int]] = {DataType.INT8: (-128, 127), DataType.UINT8: (0, 255)}


def widest_product(op: Operator) -> int:
    """The ``product_bound`` parameter (default: any zero points, ``255 * 255``), checked."""
    bound = int(op.params.get("product_bound", 255 * 255))
    if not 0 <= bound <= 255 * 255:
        raise NetworkError(f"{label(op)}: product_bound must be in [0, 65025], got {bound}")
    return bound


def _check_operand_types(op: Operator, input_types: Sequence[DataType], names: Sequence[str]) -> None:
    """Inputs 0 and 1 are quantized; inputs 2 and 3 (their zero points) have the same types."""
    expect_inputs(op, len(input_types), 4)
    for index in (0, 1):
        if input_types[index] not in QUANTIZED_TYPES:
            raise TypeMismatchError(f"{label(op)}: {names[index]} must be INT8 or UINT8, got {input_types[index].name}")
        zero = input_types[index + 2]
        if zero != input_types[index]:
            raise TypeMismatchError(
                f"{label(op)}: {names[index + 2]} must have {names[index]}'s type {input_types[index].name}, "
                f"got {zero.name}"
            )


def _elements(shape: ShapeExprs) -> int | None:
    """The element count of ``shape`` when every dimension is known."""
    if not all(d.is_constant() for d in shape):
        return None
    return int(np.prod([d.get_constant_value() for d in shape], dtype=np.int64))


def _shifted(op: Operator, xp: Any, key: str, q: Any, zero: Any) -> Any:
    """``q - zero`` as float32 (exact), in a buffer the operator keeps."""
    out = op.scratch(key, tuple(np.broadcast_shapes(q.shape, zero.shape)), np.float32, xp)
    xp.subtract(q, zero, out=out, dtype=np.float32)
    return out


@register_operator
class IntegerConvolutionOperator(ConvolutionOperator):
    """ONNX ConvInteger: the window, padding and groups of ``convolution`` over zero-point-shifted integers.

    Inputs: ``x`` ``[N, C, *spatial]``, ``w`` ``[M, C / group, *kernel]`` (INT8 or UINT8 each),
    ``x_zero_point`` (x's type, one value), ``w_zero_point`` (w's type, one value or ``[M]``).
    The output is INT32. Padding contributes 0 (a padded ``x`` equals its zero point).
    params: those of ``convolution`` (no bias, no fused activation) and ``product_bound``.
    """

    kind = "integer_convolution"

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        if self.weights or self.has_bias or self.activation:
            raise NetworkError("integer_convolution takes its kernel as input 1, no bias and no fused activation")
        self.product_bound = widest_product(self)

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        _check_operand_types(self, input_types, ("x", "w", "x_zero_point", "w_zero_point"))
        return [DataType.INT32]

    def output_shapes(
        self, input_shapes: Sequence[ShapeExprs], input_values: Sequence[ShapeExprs | None]
    ) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 4)
        shapes = super().output_shapes(input_shapes[:2], input_values[:2])
        for index, name, allowed in ((2, "x_zero_point", (1,)), (3, "w_zero_point", (1, self.maps))):
            count = _elements(input_shapes[index])
            if len(input_shapes[index]) > 1 or (count is not None and count not in allowed):
                raise ShapeError(
                    f"{label(self)}: {name} must hold {' or '.join(map(str, sorted(set(allowed))))} value(s) "
                    f"(rank <= 1), got shape {list(input_shapes[index])}"
                )
        return shapes

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x, w, x_zero, w_zero = inputs
        out = outputs[0]
        if self._shapes is None or self._shapes != (x.shape, out.shape):
            self.prepare([x.shape], [out.shape])
        shifted = _shifted(self, xp, "x", x, x_zero.reshape(()))
        kernel = _shifted(self, xp, "w", w, w_zero.reshape((-1,) + (1,) * (w.ndim - 1)))
        grouped = out.reshape(x.shape[0], self.group, self.maps // self.group, -1)
        cols = self._columns(shifted, xp)
        exact_product(
            self, xp, kernel.reshape(self.group, self.maps // self.group, -1), cols, grouped, self.product_bound
        )


@register_operator
class IntegerMatrixMultiplyOperator(MatrixMultiplyOperator):
    """ONNX MatMulInteger: ``(a - a_zero_point) @ (b - b_zero_point)`` as INT32, exactly.

    Inputs ``a, b`` (INT8 or UINT8, ranks aligned as ``matrix_multiply`` takes them) and their zero
    points, of their types, shaped to broadcast against them (per tensor, per row of ``a``, per
    column of ``b``). params: ``op0``, ``op1`` (NONE or VECTOR) and ``product_bound``.
    """

    kind = "integer_matmul"

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        if self.bias or "TRANSPOSE" in self.ops:
            raise NetworkError("integer_matmul takes no fused bias and no TRANSPOSE operand")
        self.product_bound = widest_product(self)

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        _check_operand_types(self, input_types, ("a", "b", "a_zero_point", "b_zero_point"))
        return [DataType.INT32]

    def output_shapes(
        self, input_shapes: Sequence[ShapeExprs], input_values: Sequence[ShapeExprs | None]
    ) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 4)
        for operand, zero in ((0, 2), (1, 3)):
            if len(input_shapes[zero]) > len(input_shapes[operand]):
                raise ShapeError(
                    f"{label(self)}: zero point input {zero} of rank {len(input_shapes[zero])} does not broadcast "
                    f"against input {operand} of rank {len(input_shapes[operand])}"
                )
        return super().output_shapes(input_shapes[:2], input_values[:2])

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        a = product_operand(_shifted(self, xp, "a", inputs[0], inputs[2]), self.ops[0], first=True)
        b = product_operand(_shifted(self, xp, "b", inputs[1], inputs[3]), self.ops[1], first=False)
        out = outputs[0]
        if len(self._out_view) != a.ndim:
            self.prepare([a.shape, b.shape], [out.shape])
        exact_product(self, xp, a, b, out.reshape(self._out_view), self.product_bound)


@register_operator
class RequantizeOperator(Operator):
    """An INT32 sum to INT8/UINT8: ``saturate(rint(float32(acc + bias) * (scale_a * scale_b / y_scale)) + y_zero)``.

    Inputs ``acc`` (INT32), ``scale_a``, ``scale_b``, ``y_scale`` (FLOAT or HALF), ``y_zero_point``
    (INT8 or UINT8: the output's type) and, with param ``has_bias``, ``bias`` (INT32); every input
    after ``acc`` broadcasts against it (NumPy's rules).
    """

    kind = "requantize"

    def _count(self) -> int:
        return 6 if self.params.get("has_bias") else 5

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), self._count())
        for index in (0, 5)[: self._count() - 4]:
            if input_types[index] != DataType.INT32:
                raise TypeMismatchError(f"{label(self)}: input {index} must be INT32, got {input_types[index].name}")
        for index in (1, 2, 3):
            if input_types[index] not in FLOAT_TYPES:
                raise TypeMismatchError(
                    f"{label(self)}: scale input {index} must be FLOAT or HALF, got {input_types[index].name}"
                )
        if input_types[4] not in QUANTIZED_TYPES:
            raise TypeMismatchError(
                f"{label(self)}: the output zero point must be INT8 or UINT8, got {input_types[4].name}"
            )
        return [input_types[4]]

    def output_shapes(
        self, input_shapes: Sequence[ShapeExprs], input_values: Sequence[ShapeExprs | None]
    ) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), self._count())
        acc = list(input_shapes[0])
        for index, shape in enumerate(input_shapes[1:], start=1):
            offset = len(acc) - len(shape)
            fits = offset >= 0 and all(
                not (d.is_constant() and acc[offset + i].is_constant())
                or d.get_constant_value() in (1, acc[offset + i].get_constant_value())
                for i, d in enumerate(shape)
            )
            if not fits:
                raise ShapeError(
                    f"{label(self)}: input {index} of shape {list(shape)} does not broadcast against "
                    f"the sum's shape {acc}"
                )
        return [acc]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        acc, scale_a, scale_b, y_scale, y_zero = inputs[:5]
        if self.params.get("has_bias"):
            acc = acc + inputs[5]
        f32 = np.float32
        multiplier = scale_a.astype(f32) * scale_b.astype(f32) / y_scale.astype(f32)
        limits = np.iinfo(outputs[0].dtype)
        values = xp.rint(acc.astype(f32) * multiplier) + y_zero.astype(f32)
        outputs[0][...] = xp.clip(values, limits.min, limits.max).astype(outputs[0].dtype)
