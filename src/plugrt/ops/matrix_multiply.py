"""Matrix multiplication with TensorRT's MatrixOperation per input.

NONE treats the last two dimensions as a matrix, TRANSPOSE as a transposed
matrix, VECTOR the last dimension as a vector. The remaining (batch) dimensions
of the two inputs must be equally many; each pair is equal or one of them 1
(broadcast). matrix x matrix gives a matrix, matrix x vector and vector x matrix
a vector, vector x vector a scalar per batch element.

On the CPU with PyTorch installed, a FLOAT product of a matrix by a constant matrix (the
exports' linear layers, bias fused or not) has oneDNN's kernel as a second tactic, timed per
layer at build (:mod:`plugrt.ops.torch_cpu_linear`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import NetworkError, ShapeError, TypeMismatchError
from ..core.types import DataType
from ..shape import IDimensionExpr
from .base import InputShapes, InputValues, ShapeExprs, register_operator
from .blas_threads import blas_runs_alone
from .elementwise import FLOAT_TYPES, broadcast_dim, expect_inputs, label, merge_dim
from .linear_weights import matmul_weight, packed_matrix, unpacked
from .onednn_matmul import product_onednn
from .product_parts import matmul_parts_into
from .torch_cpu import Kernel, TorchOperator, torch_module, view
from .torch_cpu_linear import linear, linear_available

__all__ = ["FEW_ROWS", "MatrixMultiplyOperator", "product_operand", "product_then_bias"]

_OPS = ("NONE", "TRANSPOSE", "VECTOR")
#: up to this many rows an FP32 product then a bias add beats cuBLASLt's bias epilogue (addmm) on an H200, whose
#: heuristics pick a SIMT kernel for it: 128x768 by 768x768 28.5 against 41.3 us, by 3072x768 38 against 74 us;
#: from 4096 rows on addmm is as fast or faster. HALF products take the epilogue at any size: 18.7-21.2 against
#: 24.4-27.9 us at 128-197 rows, and one launch (10.6 against 16 us of host time a call; benchmarks/gpu_product_forms.py
#: --half --host, docs/benchmarks.md)
FEW_ROWS = 512


def _as_rows(a: Any, b: Any, out: Any) -> tuple[Any, Any, Any] | None:
    """``a``, ``b`` and ``out`` as the matrices of one 2-D product (``a``'s and ``out``'s leading dimensions
    folded into rows, views only; ``b`` one matrix), else None."""
    if any(d != 1 for d in b.shape[:-2]) or out.dim() < 2 or a.dim() < 2:
        return None
    try:
        return a.view(-1, a.shape[-1]), b.view(b.shape[-2:]), out.view(-1, out.shape[-1])
    except RuntimeError:  # a layout that needs a copy
        return None


def product_then_bias(out: Any) -> bool:
    """Whether a product with a bias into ``out`` (a torch tensor) runs as the product then the bias add rather than
    cuBLASLt's bias epilogue: FLOAT outputs of at most :data:`FEW_ROWS` rows."""
    return out.dtype == torch_module().float32 and out.numel() // max(out.shape[-1], 1) <= FEW_ROWS


@register_operator
class MatrixMultiplyOperator(TorchOperator):
    """``out = op0(a) @ op1(b)``; params: ``op0``, ``op1`` (MatrixOperation names).

    With param ``bias`` (set by the builder's fusion of a following ``Add``, see
    :mod:`plugrt.builder.fusion`) a third input of dims ``[1, ..., 1, N]`` is added to
    every row of the product. On a GPU, PyTorch's product over tensors viewed once at bind is a
    second tactic (:mod:`plugrt.ops.torch_cpu`): the own kernel views the buffers at every run; on the
    CPU, oneDNN's linear for products by a constant matrix.
    """

    kind = "matrix_multiply"
    same_kernel_on_gpu = True

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        self.ops = (str(self.param("op0")), str(self.param("op1")))
        for index, op in enumerate(self.ops):
            if op not in _OPS:
                raise NetworkError(f"matrix_multiply: unknown op{index} {op!r}; valid: {', '.join(_OPS)}")
        self.bias = bool(self.params.get("bias", False))
        self._out_view: tuple[int, ...] = ()

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 2 + self.bias)
        a, b = input_types[:2]
        if a not in FLOAT_TYPES or a != b:
            raise TypeMismatchError(
                f"{label(self)}: matrix multiply needs two FLOAT or two HALF inputs, got {a.name} and {b.name}"
            )
        if self.bias and input_types[2] != a:
            raise TypeMismatchError(f"{label(self)}: the bias must have type {a.name}, got {input_types[2].name}")
        return [a]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        expect_inputs(self, len(input_shapes), 2 + self.bias)
        (batch_a, rows, k_a), (batch_b, cols, k_b) = (self._split(i, s) for i, s in enumerate(input_shapes[:2]))
        if len(batch_a) != len(batch_b):
            raise ShapeError(
                f"{label(self)}: inputs have {len(batch_a)} and {len(batch_b)} batch dimensions "
                f"(ranks {len(input_shapes[0])} and {len(input_shapes[1])} with op0={self.ops[0]}, "
                f"op1={self.ops[1]}); they must have equally many"
            )
        merge_dim(self, k_a, k_b, "the reduced dimensions of input 0 and input 1")
        batch = [broadcast_dim(self, x, y, axis) for axis, (x, y) in enumerate(zip(batch_a, batch_b))]
        out = batch + [d for d in (rows, cols) if d is not None]
        if self.bias:
            bias = input_shapes[2]
            leading_ones = all(d.is_constant() and d.get_constant_value() == 1 for d in bias[:-1])
            if not bias or len(bias) > len(out) or not leading_ones or bias[-1] != out[-1]:
                raise ShapeError(f"{label(self)}: the bias must have dims [1, ..., 1, {out[-1]}], got {bias}")
        return [out]

    def _split(self, index: int, shape: ShapeExprs) -> tuple[ShapeExprs, IDimensionExpr | None, IDimensionExpr]:
        """(batch dims, the kept dim or None for a vector, the reduced dim) of input ``index``."""
        op = self.ops[index]
        need = 1 if op == "VECTOR" else 2
        if len(shape) < need:
            raise ShapeError(f"{label(self)}: input {index} with op {op} needs rank >= {need}, got {len(shape)}")
        if op == "VECTOR":
            return list(shape[:-1]), None, shape[-1]
        rows, cols = (shape[-1], shape[-2]) if op == "TRANSPOSE" else (shape[-2], shape[-1])
        return (list(shape[:-2]), rows, cols) if index == 0 else (list(shape[:-2]), cols, rows)

    def prepare(self, input_shapes: Sequence[tuple[int, ...]], output_shapes: Sequence[tuple[int, ...]]) -> None:
        out = tuple(output_shapes[0])
        matrix_a, matrix_b = self.ops[0] != "VECTOR", self.ops[1] != "VECTOR"
        batch = len(out) - matrix_a - matrix_b
        rows = out[batch] if matrix_a else 1
        cols = out[-1] if matrix_b else 1
        self._out_view = (*out[:batch], rows, cols)

    def torch_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """On a GPU: the same cuBLAS product as the own kernel's, over tensors viewed once at bind instead of at
        every run. On the CPU: oneDNN's linear (``torch_cpu_linear.py``; torch's own products measured slower
        than OpenBLAS's) for FLOAT ``a`` (not transposed) times a constant matrix ``b`` (leading dimensions of
        one); not for subclasses with kernels of their own (the INT8 products)."""
        if self.xp is not np:
            return super().torch_supports(types, shapes, constant)
        return (
            self.direct_supports(types, shapes, constant)
            and super().torch_supports(types, shapes, constant)
            and linear_available()
        )

    def direct_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """``a`` (not transposed) times a constant matrix ``b`` (leading dimensions of one); not for subclasses with
        kernels of their own (the INT8 products)."""
        return (
            self._by_matrix()
            and constant[1]
            and len(shapes[0]) >= 2
            and all(d == 1 for d in shapes[1][:-2])
        )

    def _by_matrix(self) -> bool:
        """Whether this is a plain product of ``a`` (not transposed) by a matrix (the INT8 subclasses are not)."""
        return type(self).run is MatrixMultiplyOperator.run and self.ops[0] == "NONE" and self.ops[1] != "VECTOR"

    def direct_kernel(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> Kernel | None:
        """oneDNN's matmul primitive called directly (``ops/onednn_matmul.py``)."""
        b = inputs[1]
        if not self._by_matrix() or any(d != 1 for d in b.shape[:-2]):
            return None
        bias = inputs[2] if self.bias else None
        return product_onednn(inputs[0], matmul_weight(b), self.ops[1] == "TRANSPOSE", bias, outputs[0])

    def torch_kernel(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> Kernel | None:
        if self.xp is np:
            b = inputs[1]
            if not self._by_matrix() or any(d != 1 for d in b.shape[:-2]):
                return None
            return linear(inputs[0], b, self.ops[1] == "TRANSPOSE", inputs[2] if self.bias else None, outputs[0])
        torch = torch_module()
        a = product_operand(view(inputs[0]), self.ops[0], first=True)
        b = product_operand(view(inputs[1]), self.ops[1], first=False)
        out = view(outputs[0]).view(self._out_view)
        rows = _as_rows(a, b, out)  # one matrix by one matrix: mm, ~5 us less host time a call than matmul
        if rows is None:
            first, target = functools.partial(torch.matmul, a, b, out=out), out
        else:
            first, target = functools.partial(torch.mm, rows[0], rows[1], out=rows[2]), rows[2]
        if not self.bias:
            return first
        bias = view(inputs[2]).view(-1)
        if rows is not None and not product_then_bias(out):  # one addmm: cuBLAS adds the bias in the epilogue
            return functools.partial(torch.addmm, bias, rows[0], rows[1], out=rows[2])

        def product() -> None:
            first()
            target.add_(bias)

        return product

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        a = product_operand(inputs[0], self.ops[0], first=True)
        b = product_operand(unpacked(inputs[1], keep=True), self.ops[1], first=False)  # a packed weight's own values
        out = outputs[0]
        if len(self._out_view) != a.ndim:
            self.prepare([a.shape, b.shape], [out.shape])
        bias = inputs[2].reshape(-1) if self.bias else None
        matmul_parts_into(xp, a, b, out.reshape(self._out_view), bias)

    def direct_launch(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any) -> Any:
        """A small FLOAT product on NumPy where the BLAS runs it on one thread anyway (:func:`blas_runs_alone`):
        the same ``np.matmul`` (and bias ``np.add``) on the operand views :meth:`run` makes, made at bind."""
        if xp is not np or type(self).run is not MatrixMultiplyOperator.run:  # not the INT8 products
            return None
        if packed_matrix(inputs[1]) is not None:  # oneDNN runs it (run() unpacks it where not)
            return None
        x, y, out = inputs[0], inputs[1], outputs[0]
        if x.dtype != np.float32 or y.dtype != np.float32 or out.dtype != np.float32 or not out.flags.c_contiguous:
            return None
        a = x.swapaxes(-1, -2) if self.ops[0] == "TRANSPOSE" else x[..., None, :] if self.ops[0] == "VECTOR" else x
        b = y.swapaxes(-1, -2) if self.ops[1] == "TRANSPOSE" else y[..., :, None] if self.ops[1] == "VECTOR" else y
        target = out.reshape(self._out_view)
        if len(self._out_view) != a.ndim:
            return None
        if not blas_runs_alone(math.prod(target.shape[:-1]), target.shape[-1], a.shape[-1]):
            return None
        return _product, (a, b, target, inputs[2].reshape(-1) if self.bias else None)


def _product(a: Any, b: Any, out: Any, bias: Any) -> None:
    """``out = a @ b`` (+ ``bias`` over the last axis), as the CPU backend's ``matmul_into``."""
    np.matmul(a, b, out=out)
    if bias is not None:
        np.add(out, bias, out=out)


def product_operand(x: Any, op: str, first: bool) -> Any:
    """Input ``x`` of a product under MatrixOperation ``op``: as is, transposed (a view), or a vector as a matrix."""
    if op == "TRANSPOSE":
        return x.swapaxes(-1, -2)
    if op == "VECTOR":
        return x[..., None, :] if first else x[..., :, None]
    return x
