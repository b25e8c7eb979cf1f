"""General matrix multiply (ONNX Gemm): ``out = alpha * op(A) @ op(B) + beta * C``.

``op`` transposes when ``trans_a`` / ``trans_b`` is set; ``C`` broadcasts
(unidirectionally) to ``[M, N]``. A constant ``B`` and ``C`` are weights,
scaled by ``alpha`` and ``beta`` once at build time (:func:`pack_gemm_weights`);
a transposed ``B`` is multiplied as a transposed view (BLAS takes it without a
copy). HALF inputs are multiplied in FLOAT and rounded once into the output. On a GPU, PyTorch's
``addmm`` over tensors viewed once at bind (the weights converted to the input's type once) is a
second tactic, timed at build: one cuBLAS call with ``C`` in its epilogue. On the CPU with
PyTorch installed, a FLOAT Gemm by a constant ``B`` with no ``C`` or a constant row ``C`` (the
exports' linear layers, GPT-2's) has oneDNN's kernel as the second tactic, timed per layer at
build (:mod:`plugrt.ops.torch_cpu_linear`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import ShapeError
from ..core.types import DataType
from ..shape import constant
from .base import InputShapes, InputValues, ShapeExprs, register_operator
from .blas_threads import blas_runs_alone
from .elementwise import label, merge_dim
from .linear_weights import matmul_weight, packed_matrix, unpacked
from .matrix_multiply import product_then_bias
from .onednn_matmul import product_onednn
from .params import param
from .product_parts import matmul_parts_into
from .shared_rules import expect_float_inputs
from .torch_cpu import Kernel, TorchOperator, torch_module, view
from .torch_cpu_linear import linear, linear_available

__all__ = ["GemmOperator", "pack_gemm_weights"]


def pack_gemm_weights(b: np.ndarray | None, c: np.ndarray | None, alpha: float, beta: float) -> dict[str, np.ndarray]:
    """Weights for constant ``B`` (times ``alpha``) and ``C`` (times ``beta``), as FLOAT: the given array itself
    where it is a contiguous FLOAT one and its factor 1 (no copy: GPT-2's 48 Gemm weights, 324 MB, were held twice)."""
    weights = {}
    for name, value, factor in (("b", b, alpha), ("c", c, beta)):
        if value is not None:
            array = np.asarray(value, dtype=np.float32)
            weights[name] = np.ascontiguousarray(array if factor == 1.0 else array * np.float32(factor))
    return weights


@register_operator
class GemmOperator(TorchOperator):
    """params: ``trans_a``, ``trans_b`` (bools), ``alpha``, ``beta`` (floats), ``has_c`` (bool),
    ``uniform_b`` (every element of B is the same value: the output columns are then equal and
    are made bit-identical, which BLAS does not guarantee).

    weights (optional): ``b`` and ``c`` from :func:`pack_gemm_weights`; what is not a
    weight is an input, in the order A, B, C.
    """

    kind = "gemm"
    same_kernel_on_gpu = True
    trans_a: bool = param(bool, default=False)
    trans_b: bool = param(bool, default=False)
    alpha: float = param(float, default=1.0)
    beta: float = param(float, default=1.0)

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        self.has_c = bool(self.params.get("has_c", "c" in self.weights))
        self.uniform = bool(self.params.get("uniform_b", False))
        self._inputs = 1 + ("b" not in self.weights) + (self.has_c and "c" not in self.weights)

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_float_inputs(self, input_types, self._inputs)
        return [input_types[0]]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        a = input_shapes[0]
        b = [constant(d) for d in self.weights["b"].shape] if "b" in self.weights else input_shapes[1]
        for name, shape in (("A", a), ("B", b)):
            if len(shape) != 2:
                raise ShapeError(f"{label(self)}: Gemm input {name} must be a matrix (rank 2), got rank {len(shape)}")
        rows, k_a = (a[1], a[0]) if self.trans_a else (a[0], a[1])
        k_b, cols = (b[1], b[0]) if self.trans_b else (b[0], b[1])
        merge_dim(self, k_a, k_b, "the inner dimensions of A and B")
        if self.has_c:
            c = [constant(d) for d in self.weights["c"].shape] if "c" in self.weights else input_shapes[-1]
            self._check_c(c, [rows, cols])
        return [[rows, cols]]

    def _check_c(self, c: ShapeExprs, out: ShapeExprs) -> None:
        if len(c) > 2:
            raise ShapeError(f"{label(self)}: Gemm input C has rank {len(c)}; it must broadcast to [M, N]")
        for dim, target in zip(reversed(c), reversed(out)):
            if dim.is_constant() and dim.get_constant_value() != 1 and target.is_constant() and dim != target:
                raise ShapeError(f"{label(self)}: Gemm input C of dims {c} does not broadcast to [M, N] = {out}")

    def _linear(self) -> bool:
        """Whether oneDNN's linear computes this Gemm: ``A @ B' + c'`` with the weights packed at build."""
        c = self.weights.get("c")
        row = c is None or (
            c.ndim <= 2 and c.size == c.shape[-1] and c.size == self.weights["b"].shape[-1 - self.trans_b]
        )
        return (
            type(self).run is GemmOperator.run
            and self.xp is np
            and "b" in self.weights
            and not (self.trans_a or self.uniform)
            and (not self.has_c or (c is not None and row))
        )

    def torch_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """On a GPU, for B without the uniform-columns case. On the CPU: oneDNN's linear for FLOAT ``A`` (not
        transposed) times the weight ``B``, plus no ``C`` or a weight row ``C``."""
        if self.xp is np:
            return self._linear() and super().torch_supports(types, shapes, constant) and linear_available()
        return not self.uniform and super().torch_supports(types, shapes, constant)

    def direct_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """As oneDNN's linear through PyTorch (:meth:`torch_supports`)."""
        return self._linear()

    def direct_kernel(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> Kernel | None:
        """oneDNN's matmul primitive called directly (``ops/onednn_matmul.py``)."""
        if not self._linear():
            return None
        bias = self.weight("c") if self.has_c else None
        return product_onednn(inputs[0], matmul_weight(self.weight("b")), self.trans_b, bias, outputs[0])

    def torch_kernel(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> Kernel | None:
        if self.xp is np:
            if not self._linear():
                return None
            return linear(
                inputs[0], self.weight("b"), self.trans_b, self.weight("c") if self.has_c else None, outputs[0]
            )
        torch = torch_module()
        a, out = view(inputs[0]), view(outputs[0])
        a = a.t() if self.trans_a else a
        b = self.torch_weight("b", a) if "b" in self.weights else view(inputs[1])  # a weight holds alpha already
        b = b.t() if self.trans_b else b
        alpha = 1.0 if "b" in self.weights else self.alpha
        if not self.has_c:
            if alpha == 1.0:
                return lambda: torch.mm(a, b, out=out)  # type: ignore[no-any-return]
            return lambda: torch.mm(a, b, out=out).mul_(alpha)  # type: ignore[no-any-return]
        c = self.torch_weight("c", a) if "c" in self.weights else view(inputs[-1])  # a weight holds beta already
        beta = 1.0 if "c" in self.weights else self.beta
        if product_then_bias(out) and alpha == 1.0:  # few FLOAT rows: the product, then C (faster than the epilogue)
            return lambda: torch.mm(a, b, out=out).add_(c, alpha=beta)  # type: ignore[no-any-return]
        return lambda: torch.addmm(c, a, b, beta=beta, alpha=alpha, out=out)  # type: ignore[no-any-return]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        out = outputs[0]
        a = inputs[0]
        if a.dtype != np.float32:
            a = a.astype(np.float32)
        if self.trans_a:
            a = a.T
        scaled = "b" in self.weights
        b = unpacked(self.weight("b", xp), keep=True) if scaled else inputs[1]  # a packed weight's own values
        if b.dtype != np.float32:
            b = b.astype(np.float32)
        if self.trans_b:
            b = b.T
        target = out
        if out.dtype != np.float32:
            target = self.scratch("acc", out.shape, np.float32, xp)
        matmul_parts_into(xp, a, b, target)
        if self.uniform:
            target[:, 1:] = target[:, :1]
        if not scaled and self.alpha != 1.0:
            xp.multiply(target, np.float32(self.alpha), out=target)
        if self.has_c:
            if "c" in self.weights:
                xp.add(target, self.weight("c", xp), out=target)
            else:
                c = inputs[-1].astype(np.float32)
                xp.add(target, c * np.float32(self.beta) if self.beta != 1.0 else c, out=target)
        if target is not out:
            xp.copyto(out, target, casting="unsafe")

    def direct_launch(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any) -> Any:
        """A small FLOAT product by the weight ``B`` (plus the weight ``C``) on NumPy, where the BLAS runs it on
        one thread anyway (:func:`blas_runs_alone`): the same ``np.matmul`` (and ``np.add``) on views made at bind,
        without the per-run lookups, checks and thread settings of :meth:`run`."""
        a, out = inputs[0], outputs[0]
        if xp is not np or type(self).run is not GemmOperator.run:  # not the INT8 product
            return None
        if "b" not in self.weights or self.uniform or a.dtype != np.float32 or out.dtype != np.float32:
            return None
        if packed_matrix(self.weights["b"]) is not None:  # oneDNN runs it (run() unpacks it where not)
            return None
        if self.has_c and "c" not in self.weights:
            return None
        a = a.T if self.trans_a else a
        b = self.weights["b"].T if self.trans_b else self.weights["b"]
        if b.dtype != np.float32 or not blas_runs_alone(a.shape[0], b.shape[1], a.shape[1]):
            return None
        c = self.weights["c"] if self.has_c else None
        return _product, (a, b, out, c)


def _product(a: Any, b: Any, out: Any, bias: Any) -> None:
    """``out = a @ b`` (+ ``bias``), as the CPU backend's ``matmul_into``."""
    np.matmul(a, b, out=out)
    if bias is not None:
        np.add(out, bias, out=out)
