"""INT8 kernels: convolution, Gemm and matrix multiply on INT8 inputs, as TensorRT's implicit INT8 runs them.

The builder picks these operators (see :mod:`plugrt.builder.int8`) when ``BuilderFlag.INT8`` is
set and the scales are known. Values are symmetric INT8 (``real = q * scale``, zero point 0):

* activations have one scale per tensor (from ``ITensor.set_dynamic_range`` or calibration:
  ``scale = max(|min|, |max|) / 127``); a reformat layer quantizes a FLOAT tensor before an
  INT8 layer (``q = clip(rint(x / scale), -128, 127)``);
* weights have one scale per output channel (``max |w| / 127`` of that channel);
* the products of INT8 values are accumulated exactly as integers (INT32 accumulation); the
  epilogue then either dequantizes (``acc * in_scale * weight_scale + bias`` in FLOAT) or also
  requantizes to INT8 with the output tensor's scale, when the next layer reads INT8.

On the CPU the integer products go through float32 BLAS: a float32 sum of integers stays exact
while every partial sum is below ``2**24``, so a sum of up to 1024 products of INT8 values is
exact (``1024 * 128 * 128 = 2**24``); longer reductions are split into blocks of 1024 whose
exact partial sums are added in INT32 (:func:`exact_product`, which also serves ONNX's integer
operators in :mod:`plugrt.ops.integer_linear`, with a block for their larger operands). On a GPU
with PyTorch, convolutions (one group) and Gemms multiply INT8 operands in cuBLASLt with INT32
accumulation and a one-kernel epilogue (:mod:`plugrt.ops.int8_cuda`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import NetworkError, ShapeError, TypeMismatchError
from ..core.types import DataType
from .base import Operator, ShapeExprs
from .base import register_operator as _register
from .conv import ConvolutionOperator
from .elementwise import label
from .gemm import GemmOperator
from .int8_cuda import Int8Product, epilogue_into, gather_columns, usable
from .matrix_multiply import MatrixMultiplyOperator, product_operand
from .products import matmul_into

__all__ = [
    "EXACT_BLOCK",
    "INT8_PRODUCT",
    "Int8ConvolutionOperator",
    "Int8GemmOperator",
    "Int8MatrixMultiplyOperator",
    "dequantize_into",
    "exact_product",
    "quantize_into",
    "quantize_weights",
]

#: The largest magnitude of a product of two symmetric INT8 values.
INT8_PRODUCT = 128 * 128
#: Integers up to this magnitude are exact in float32.
_EXACT_FLOAT32 = 2**24
#: The longest reduction whose float32 sum of INT8 products is exact.
EXACT_BLOCK = _EXACT_FLOAT32 // INT8_PRODUCT


def quantize_into(xp: Any, x: Any, scale: float, out: Any) -> None:
    """``out = clip(rint(x / scale), -128, 127)`` (round half to even, as TensorRT's quantize)."""
    values = xp.rint(x.astype(np.float32, copy=False) / np.float32(scale))
    xp.clip(values, -128, 127, out=values)
    out[...] = values.astype(np.int8)


def dequantize_into(xp: Any, q: Any, scale: float, out: Any) -> None:
    """``out = q * scale``."""
    xp.multiply(q, np.float32(scale), out=out, casting="unsafe")


def quantize_weights(weights: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel symmetric INT8 of ``weights``: (INT8 values, float32 scale per index of ``axis``).

    A channel of zeros gets scale 1 (its values are 0 whatever the scale).
    """
    w = np.asarray(weights, dtype=np.float32)
    moved = np.moveaxis(w, axis, 0)
    amax = np.abs(moved.reshape(moved.shape[0], -1)).max(axis=1) if moved.size else np.zeros(moved.shape[0])
    scales = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(np.rint(w / scales.reshape(shape)), -127, 127).astype(np.int8)
    return q, scales


def exact_product(op: Operator, xp: Any, a: Any, b: Any, out: Any, magnitude: int = INT8_PRODUCT) -> None:
    """``out = a @ b`` for float32 arrays of integers, exactly (see the module note).

    ``magnitude`` bounds ``|a[i, k] * b[k, j]|``; reductions are summed in float32 blocks short
    enough to be exact, and the blocks' sums added in INT32. ``out`` is float32 or INT32 (C-contiguous).
    """
    k = a.shape[-1]
    block = max(1, _EXACT_FLOAT32 // max(1, int(magnitude)))
    if k <= block and out.dtype == np.float32:
        matmul_into(xp, a, b, out)
        return
    part = op.scratch("part", out.shape, np.float32, xp)
    if k <= block:
        matmul_into(xp, a, b, part)
        out[...] = part
        return
    total = out if out.dtype == np.int32 else op.scratch("int32", out.shape, np.int32, xp)
    total[...] = 0
    for start in range(0, k, block):
        stop = min(start + block, k)
        matmul_into(xp, xp.ascontiguousarray(a[..., start:stop]), xp.ascontiguousarray(b[..., start:stop, :]), part)
        xp.add(total, part.astype(np.int32), out=total)
    if total is not out:
        out[...] = total


def _epilogue(xp: Any, acc: Any, out: Any, output_scale: float) -> None:
    """Write the dequantized ``acc`` to ``out``: as is (FLOAT/HALF) or requantized (INT8)."""
    if out.dtype == np.int8:
        quantize_into(xp, acc, output_scale, out)
    elif acc is not out:
        xp.copyto(out, acc, casting="unsafe")


def _check_scale(op: Operator, key: str, required: bool) -> float:
    value = float(op.params.get(key, 0.0))
    if value < 0 or not np.isfinite(value) or (required and value == 0):
        raise NetworkError(f"{label(op)}: parameter {key} must be a positive finite scale, got {value}")
    return value


def _output_types(op: Operator, input_types: Sequence[DataType], int8_inputs: int, total: int) -> list[DataType]:
    if len(input_types) != total:
        raise NetworkError(f"{label(op)}: expected {total} input(s), got {len(input_types)}")
    for index, dtype in enumerate(input_types):
        wanted = DataType.INT8 if index < int8_inputs else DataType.FLOAT
        if dtype != wanted:
            raise TypeMismatchError(f"{label(op)}: input {index} must be {wanted.name}, got {dtype.name}")
    return [DataType.INT8 if op.params.get("output_scale") else DataType.FLOAT]


@_register
class Int8ConvolutionOperator(ConvolutionOperator):
    """A convolution of an INT8 input with INT8 weights (the window, padding and groups of ``convolution``).

    params: those of ``convolution`` plus ``input_scale`` and ``output_scale`` (0: FLOAT output).
    weights: ``kernel`` (INT8, packed as ``convolution`` packs it), ``weight_scales`` ``[M]``,
    ``bias`` ``[M]`` (optional).
    """

    kind = "int8_convolution"

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        if "kernel" not in self.weights or "weight_scales" not in self.weights:
            raise NetworkError("int8_convolution needs weights 'kernel' and 'weight_scales'")
        self.input_scale = _check_scale(self, "input_scale", True)
        self.output_scale = _check_scale(self, "output_scale", False)
        scales = np.asarray(self.weights["weight_scales"], dtype=np.float32).reshape(-1)
        if scales.size != self.maps:
            raise NetworkError(f"int8_convolution: {scales.size} weight scales for {self.maps} output maps")
        self._kernel = np.asarray(self.weights["kernel"], dtype=np.float32)
        self._multiplier = (scales * np.float32(self.input_scale)).reshape(-1, 1)
        self._gpu_product: tuple[Any, tuple[Any, ...]] | None = None

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        return _output_types(self, input_types, 1, 1)

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x, out = inputs[0], outputs[0]
        if self._shapes is None or self._shapes != (x.shape, out.shape):
            self.prepare([x.shape], [out.shape])
        if self.group == 1 and usable(xp, self.maps):
            self._run_int8_product(x, out, xp)
            return
        n = x.shape[0]
        cols = self._columns(x, xp)
        acc = out if out.dtype == np.float32 else self.scratch("acc", out.shape, np.float32, xp)
        grouped = acc.reshape(n, self.group, self.maps // self.group, -1)
        exact_product(self, xp, self.on_device("kernel", self._kernel, xp), cols, grouped)
        flat = acc.reshape(n, self.maps, -1)
        xp.multiply(flat, self.on_device("multiplier", self._multiplier, xp), out=flat)
        if self._bias is not None:
            xp.add(flat, self.on_device("bias", self._bias, xp), out=flat)
        _epilogue(xp, acc, out, self.output_scale)

    def _run_int8_product(self, x: Any, out: Any, xp: Any) -> None:
        """The GPU path: INT8 columns of the whole batch, one cuBLASLt product, one epilogue kernel."""
        n, channels, positions = x.shape[0], x.shape[1], math.prod(out.shape[2:])
        taps = math.prod(self.window.kernel)
        key = (x.shape, out.shape)
        if self._gpu_product is None or self._gpu_product[0] != key:
            kernel = np.asarray(self.weights["kernel"]).reshape(self.maps, -1)
            product = Int8Product(xp, kernel, channels * taps, n * positions)
            target = product.column_view(xp, (channels, taps, n, *out.shape[2:]))
            acc = product.acc_view(xp, (n, self.maps, positions), (positions, product.cols_padded, 1))
            bias = self._bias if self._bias is not None else np.zeros((self.maps, 1), np.float32)
            multiplier = self.on_device("multiplier", self._multiplier, xp)
            self._gpu_product = (key, (product, target, acc, multiplier, xp.asarray(bias)))
        product, target, acc, multiplier, bias = self._gpu_product[1]
        gather_columns(xp, x, target, self._plan if self._cols_shape is not None else [])
        product.run()
        epilogue_into(xp, acc, multiplier, bias, out.reshape(n, self.maps, positions), self.output_scale)


@_register
class Int8GemmOperator(GemmOperator):
    """``A @ B + C`` with INT8 ``A`` and INT8 ``B`` weights (one scale per column of B).

    params: ``input_scale``, ``output_scale`` (0: FLOAT output), ``has_c``.
    weights: ``b`` (INT8 ``[K, N]``), ``weight_scales`` ``[N]``, ``c`` (FLOAT, broadcast to ``[M, N]``, optional).
    """

    kind = "int8_gemm"

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        params = {**(params or {}), "trans_a": False, "trans_b": False}
        super().__init__(params, weights)
        if "b" not in self.weights or "weight_scales" not in self.weights:
            raise NetworkError("int8_gemm needs weights 'b' and 'weight_scales'")
        if self.has_c and "c" not in self.weights:
            raise NetworkError("int8_gemm takes C only as a weight")
        self.input_scale = _check_scale(self, "input_scale", True)
        self.output_scale = _check_scale(self, "output_scale", False)
        self._b = np.asarray(self.weights["b"], dtype=np.float32)
        scales = np.asarray(self.weights["weight_scales"], dtype=np.float32).reshape(-1)
        if scales.size != self._b.shape[1]:
            raise NetworkError(f"int8_gemm: {scales.size} weight scales for {self._b.shape[1]} columns")
        self._multiplier = scales * np.float32(self.input_scale)
        self._gpu_product: tuple[Any, tuple[Any, ...]] | None = None

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        return _output_types(self, input_types, 1, 1)

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        if inputs[0].ndim == 2 and usable(xp, self._b.shape[1]):
            self._run_int8_product(inputs[0], outputs[0], xp)
            return
        a, out = inputs[0].astype(np.float32), outputs[0]
        acc = out if out.dtype == np.float32 else self.scratch("acc", out.shape, np.float32, xp)
        exact_product(self, xp, a, self.on_device("b", self._b, xp), acc)
        xp.multiply(acc, self.on_device("multiplier", self._multiplier, xp), out=acc)
        if self.has_c:
            xp.add(acc, self.weight("c", xp), out=acc)
        _epilogue(xp, acc, out, self.output_scale)

    def _run_int8_product(self, a: Any, out: Any, xp: Any) -> None:
        """The GPU path: ``out^T = B^T @ A^T`` in cuBLASLt (B's N columns are the product's rows, so any batch
        size meets its more-than-16-rows rule), then one epilogue kernel."""
        rows, k = a.shape
        if self._gpu_product is None or self._gpu_product[0] != a.shape:
            weight_t = np.ascontiguousarray(np.asarray(self.weights["b"]).T)  # [N, K]
            product = Int8Product(xp, weight_t, k, rows)
            acc = product.acc_view(xp, (rows, weight_t.shape[0]), (1, product.cols_padded))
            bias = self.weight("c", xp).astype(np.float32) if self.has_c else xp.zeros((1,), np.float32)
            multiplier = self.on_device("multiplier", self._multiplier, xp)
            self._gpu_product = (a.shape, (product, acc, multiplier, bias))
        product, acc, multiplier, bias = self._gpu_product[1]
        xp.copyto(product.columns, a.T)
        product.run()
        epilogue_into(xp, acc, multiplier, bias, out, self.output_scale)


@_register
class Int8MatrixMultiplyOperator(MatrixMultiplyOperator):
    """``op0(a) @ op1(b)`` of two INT8 tensors; params of ``matrix_multiply`` plus ``input_scale``,
    ``other_scale`` and ``output_scale`` (0: FLOAT output). With weight ``other_scales`` (one per
    column of ``b``, op1 NONE: explicitly quantized weights) it replaces ``other_scale``."""

    kind = "int8_matrix_multiply"

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        if self.bias:
            raise NetworkError("int8_matrix_multiply takes no fused bias")
        self.input_scale = _check_scale(self, "input_scale", True)
        self.output_scale = _check_scale(self, "output_scale", False)
        self._columns: np.ndarray | None = None
        if "other_scales" in self.weights:
            if self.ops[1] != "NONE":
                raise NetworkError("int8_matrix_multiply: per-column scales (other_scales) need op1 NONE")
            self._columns = np.asarray(self.weights["other_scales"], dtype=np.float32).reshape(-1)
            self._multiplier: Any = self._columns * np.float32(self.input_scale)
        else:
            self._multiplier = np.float32(self.input_scale * _check_scale(self, "other_scale", True))

    def output_shapes(
        self, input_shapes: Sequence[ShapeExprs], input_values: Sequence[ShapeExprs | None]
    ) -> list[ShapeExprs]:
        shapes = super().output_shapes(input_shapes, input_values)
        cols = shapes[0][-1] if shapes[0] else None
        if self._columns is not None and cols is not None and cols.is_constant():
            if cols.get_constant_value() != self._columns.size:
                raise ShapeError(
                    f"{label(self)}: {self._columns.size} per-column scales for {cols.get_constant_value()} columns"
                )
        return shapes

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        return _output_types(self, input_types, 2, 2)

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        a = product_operand(inputs[0].astype(np.float32), self.ops[0], first=True)
        b = product_operand(inputs[1].astype(np.float32), self.ops[1], first=False)
        out = outputs[0]
        if len(self._out_view) != a.ndim:
            self.prepare([a.shape, b.shape], [out.shape])
        acc = out if out.dtype == np.float32 else self.scratch("acc", out.shape, np.float32, xp)
        view = acc.reshape(self._out_view)
        exact_product(self, xp, a, b, view)
        xp.multiply(view, self.on_device("multiplier", self._multiplier, xp), out=view)
        _epilogue(xp, acc, out, self.output_scale)
