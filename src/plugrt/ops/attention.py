"""Attention as one operator: ``softmax((op(a) @ op(b)) [* or / c] [+ mask] [* s]) @ op(v)``.

The builder's ``attention`` rule (``builder/passes/attention.py``) makes it from the layers an exporter
writes for scaled dot-product attention (``MatMul → [Div or Mul by a constant] → [Add mask] → Softmax →
MatMul``). Its own kernel runs those steps as the separate layers did (the same products, the same
elementwise operations and the softmax kernel, in the same order: the same results); the scores go to
its second output, a tensor of the engine's activation memory like any other, so no layer keeps a
buffer of its own. With PyTorch installed, ``torch.nn.functional.scaled_dot_product_attention`` is a
second tactic, timed per layer at build (:mod:`plugrt.ops.torch_cpu`): flash or memory-efficient
attention on a GPU, the fused CPU kernel on the host; it does not write the scores.

params: ``op0``, ``op1`` (the first product's MatrixOperation names, NONE or TRANSPOSE), ``value_op``
(the second product's op for ``v``), ``pre`` (``""``, ``"PROD"`` or ``"DIV"``: the scores times or
divided by a one-element input), ``mask`` (an input added to the scores), ``scaled`` (a one-element
input multiplying the masked scores, the scaled softmax's), ``nan_to_zero`` (NaN probabilities, of rows
the mask removes entirely, become 0: the exported ``Where(IsNaN(p), 0, p)``). Inputs: ``a, b, v``, then the pre-scale,
the mask and the softmax scale where present. Outputs: the result and the scores (softmax of them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..backends.registry import backend_for
from ..core.errors import NetworkError, ShapeError, TypeMismatchError
from ..core.types import DataType
from .base import InputShapes, InputValues, ShapeExprs, register_operator
from .elementwise import FLOAT_TYPES, ElementwiseOperator, label
from .matrix_multiply import MatrixMultiplyOperator
from .params import param
from .softmax import SoftmaxOperator
from .torch_cpu import Kernel, TorchOperator, view

__all__ = ["AttentionOperator"]

_PRE = ("", "PROD", "DIV")


@register_operator
class AttentionOperator(TorchOperator):
    """Scaled dot-product attention as exported, one layer (see the module's note)."""

    kind = "attention"
    op0: str = param(str, default="NONE", choices=("NONE", "TRANSPOSE"))
    op1: str = param(str, default="NONE", choices=("NONE", "TRANSPOSE"))
    value_op: str = param(str, default="NONE", choices=("NONE", "TRANSPOSE"))
    pre: str = param(str, default="", choices=_PRE)
    masked: bool = param(bool, key="mask", default=False)
    scaled: bool = param(bool, default=False)
    nan_to_zero: bool = param(bool, default=False)

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        self._scores = MatrixMultiplyOperator({"op0": self.op0, "op1": self.op1})
        self._result = MatrixMultiplyOperator({"op0": "NONE", "op1": self.value_op})
        self._softmax = SoftmaxOperator({"scaled": self.scaled, "axes": 1})  # over the last axis, set by prepare
        self._add = ElementwiseOperator({"op": "SUM"})
        self._inputs = 3 + bool(self.pre) + self.masked + self.scaled
        index, found = 3, []
        for present in (bool(self.pre), self.masked, self.scaled):
            found.append(index if present else None)
            index += present
        #: where the pre-scale, the mask and the softmax scale are among the inputs (None: absent)
        self._positions: tuple[int | None, int | None, int | None] = (found[0], found[1], found[2])

    @property
    def num_outputs(self) -> int:
        return 2

    def _named(self) -> None:
        for part in (self._scores, self._result, self._softmax, self._add):
            part.name = self.name

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        if len(input_types) != self._inputs:
            raise NetworkError(f"{label(self)}: expected {self._inputs} inputs, got {len(input_types)}")
        dtype = input_types[0]
        if dtype not in FLOAT_TYPES or any(t != dtype for t in input_types):
            names = ", ".join(t.name for t in input_types)
            raise TypeMismatchError(f"{label(self)}: attention takes inputs of one FLOAT or HALF type, got {names}")
        return [dtype, dtype]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        if len(input_shapes) != self._inputs:
            raise NetworkError(f"{label(self)}: expected {self._inputs} inputs, got {len(input_shapes)}")
        self._named()
        pre, mask, post = self._positions
        none = [None, None]
        scores = self._scores.output_shapes(input_shapes[:2], none)[0]
        for position in (pre, post):
            if position is not None and not all(
                d.is_constant() and d.get_constant_value() == 1 for d in input_shapes[position]
            ):
                raise ShapeError(
                    f"{label(self)}: a scale must be a one-element tensor, got dims {input_shapes[position]}"
                )
        if mask is not None:
            scores = self._add.output_shapes([scores, input_shapes[mask]], none)[0]
        result = self._result.output_shapes([scores, input_shapes[2]], none)[0]
        return [result, scores]

    def prepare(self, input_shapes: Sequence[tuple[int, ...]], output_shapes: Sequence[tuple[int, ...]]) -> None:
        self._named()
        self._scores.prepare(input_shapes[:2], [output_shapes[1]])
        self._result.prepare([output_shapes[1], input_shapes[2]], [output_shapes[0]])
        rank = len(output_shapes[1])
        if self._softmax.mask != 1 << (rank - 1):
            self._softmax = SoftmaxOperator({"scaled": self.scaled, "axes": 1 << (rank - 1)})
            self._named()
        self._softmax.prepare([output_shapes[1]], [output_shapes[1]])

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        out, scores = outputs
        pre, mask, post = self._positions
        self._scores.run(inputs[:2], [scores], xp)
        if pre is not None:
            (xp.multiply if self.pre == "PROD" else xp.divide)(scores, inputs[pre], out=scores)
        if mask is not None:
            xp.add(scores, inputs[mask], out=scores)
        self._softmax.run([scores] if post is None else [scores, inputs[post]], [scores], xp)
        if self.nan_to_zero:
            xp.putmask(scores, xp.isnan(scores), 0)
        self._result.run([scores, inputs[2]], [out], xp)

    # --- the PyTorch tactic -------------------------------------------------------------------
    def torch_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """Inputs of one type and rank >= 3 whose batch dimensions agree, without a softmax scale."""
        if self.scaled or len(shapes[0]) < 3 or not super().torch_supports(types, shapes, constant):
            return False
        return shapes[0][:-2] == shapes[1][:-2] == shapes[2][:-2]

    def torch_kernel(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> Kernel | None:
        import torch

        pre, mask, _ = self._positions
        a, b, v = (view(x) for x in inputs[:3])
        if a.shape[:-2] != b.shape[:-2] or a.shape[:-2] != v.shape[:-2]:
            return None
        q = a.transpose(-1, -2) if self.op0 == "TRANSPOSE" else a
        k = b if self.op1 == "TRANSPOSE" else b.transpose(-1, -2)
        values = v.transpose(-1, -2) if self.value_op == "TRANSPOSE" else v
        scale = 1.0
        if pre is not None:
            factor = float(backend_for(self.xp).to_host(inputs[pre]).reshape(-1)[0])  # once, at bind
            if factor == 0.0:
                return None
            scale = factor if self.pre == "PROD" else 1.0 / factor
        bias = view(inputs[mask]) if mask is not None else None
        out = view(outputs[0])
        attend = torch.nn.functional.scaled_dot_product_attention
        guard = self.nan_to_zero

        def run() -> None:
            out.copy_(attend(q, k, values, attn_mask=bias, scale=scale))
            if guard:  # a row the mask removes entirely: NaN probabilities, a NaN row; the guard makes it 0
                torch.nan_to_num(out, nan=0.0, posinf=math.inf, neginf=-math.inf, out=out)

        return run
