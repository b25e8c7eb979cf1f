"""Attention as one operator: ``softmax((op(a) @ op(b)) [* or / c] [+ mask] [* s]) @ op(v)``.

The builder's ``attention`` rule (``builder/passes/attention.py``) makes it from the layers an exporter
writes for scaled dot-product attention (``MatMul → [Div or Mul by a constant] → [Add mask] → Softmax →
MatMul``). Its own kernel runs those steps as the separate layers did (the same products, the same
elementwise operations and the softmax kernel, in the same order: the same results); the scores go to
its second output, a tensor of the engine's activation memory like any other, so no layer keeps a
buffer of its own. With PyTorch installed, ``torch.nn.functional.scaled_dot_product_attention`` is a
second tactic, timed per layer at build (:mod:`plugrt.ops.torch_cpu`): flash or memory-efficient
attention on a GPU; on the host every head at once with torch's batched products and softmax where the
scores fit in the cache (BERT-base's 12 x 128 x 128 on one thread: 0.85 ms against 1.25 for the NumPy kernel),
the row blocks below with oneDNN's products for more; it does not write the scores. With many scores (long sequences) on the CPU the own kernel runs
in blocks of query rows that stay in the cache, on two threads (:mod:`plugrt.ops.attention_blocks`;
equal to rounding).

params: ``op0``, ``op1`` (the first product's MatrixOperation names, NONE or TRANSPOSE), ``value_op``
(the second product's op for ``v``), ``pre`` (``""``, ``"PROD"`` or ``"DIV"``: the scores times or
divided by a one-element input), ``mask`` (an input added to the scores), ``scaled`` (a one-element
input multiplying the masked scores, the scaled softmax's), ``nan_to_zero`` (NaN probabilities, of rows
the mask removes entirely, become 0: the exported ``Where(IsNaN(p), 0, p)``); and what the exporters
write around attention, taken in by the builder: ``perm_a``, ``perm_b``, ``perm_v`` (each input read
through a transpose, ``[]`` for none: the heads split off ``[B, S, H, D]`` as ``[B, H, S, D]``),
``scale_a``, ``scale_b`` (``a`` and ``b`` each times a one-element input: the exported
``scaled_dot_product_attention`` scales both by the square root of its scale) and ``perm_out`` (the
result written transposed, back to ``[B, S, H, D]``). Inputs: ``a, b, v``, then the pre-scale, the
mask, the softmax scale, ``a``'s and ``b``'s scales where present. Outputs: the result and the scores
(softmax of them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..backends.registry import backend_for
from ..core.errors import NetworkError, ShapeError, TypeMismatchError
from ..core.types import DataType
from ..nodes.base import Binding
from ..shape import DimensionOperation, constant, operation
from .attention_blocks import attention_blocks, blocked, torch_attention_blocks, whole_attention
from .base import InputShapes, InputValues, ShapeExprs, register_operator
from .elementwise import FLOAT_TYPES, ElementwiseOperator, label
from .matrix_multiply import MatrixMultiplyOperator, product_operand
from .onednn_attention import attention_onednn
from .params import ints, param
from .softmax import SoftmaxOperator
from .torch_cpu import Kernel, TorchOperator, view
from .torch_cpu_linear import linear_available

__all__ = ["AttentionOperator"]

_PRE = ("", "PROD", "DIV")


def _int_lists(value: Any) -> list[list[int]]:
    """A list of lists of integers (a converter for :func:`param`): a view recipe's split."""
    return [[int(item) for item in inner] for inner in value]


def _checked_view(
    name: str, split: list[list[int]] | None, select: Sequence[int], perm: Sequence[int]
) -> tuple[list[list[int]], dict[int, int]] | None:
    """Input ``name``'s view recipe as (split, {atom: index}), checked (None without one)."""
    if split is None:
        if select:
            raise NetworkError(f"attention: select_{name} {list(select)} needs split_{name}")
        return None
    atoms = sum(len(sizes) for sizes in split)
    if any(sizes.count(-1) > 1 or any(c < 1 and c != -1 for c in sizes) for sizes in split):
        raise NetworkError(f"attention: split_{name} {split} must give positive sizes and at most one -1 per axis")
    if len(select) % 2:
        raise NetworkError(f"attention: select_{name} {list(select)} must be (atom, index) pairs")
    fixed = dict(zip(select[::2], select[1::2]))
    if any(not 0 <= a < atoms or i < 0 for a, i in fixed.items()) or len(fixed) != len(select) // 2:
        raise NetworkError(f"attention: select_{name} {list(select)} names atoms outside split_{name} {split}")
    left = atoms - len(fixed)
    if perm and sorted(p for p in perm if p != -1) != list(range(left)):
        raise NetworkError(f"attention: perm_{name} {list(perm)} does not order the {left} atoms left (-1: a unit axis)")
    return split, fixed


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
    perm_a: list[int] = param(ints, default=())
    perm_b: list[int] = param(ints, default=())
    perm_v: list[int] = param(ints, default=())
    perm_out: list[int] = param(ints, default=())
    scale_a: bool = param(bool, default=False)
    scale_b: bool = param(bool, default=False)
    split_a: list[list[int]] | None = param(_int_lists, default=None)
    split_b: list[list[int]] | None = param(_int_lists, default=None)
    split_v: list[list[int]] | None = param(_int_lists, default=None)
    select_a: list[int] = param(ints, default=())
    select_b: list[int] = param(ints, default=())
    select_v: list[int] = param(ints, default=())

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        self._scores = MatrixMultiplyOperator({"op0": self.op0, "op1": self.op1})
        self._result = MatrixMultiplyOperator({"op0": "NONE", "op1": self.value_op})
        self._softmax = SoftmaxOperator({"scaled": self.scaled, "axes": 1})  # over the last axis, set by prepare
        self._add = ElementwiseOperator({"op": "SUM"})
        extras = (bool(self.pre), self.masked, self.scaled, self.scale_a, self.scale_b)
        self._inputs = 3 + sum(extras)
        index, found = 3, []
        for present in extras:
            found.append(index if present else None)
            index += present
        #: where the pre-scale, the mask and the softmax scale are among the inputs (None: absent)
        self._positions: tuple[int | None, int | None, int | None] = (found[0], found[1], found[2])
        #: where a's and b's scales are (None: absent)
        self._input_scales: tuple[int | None, int | None] = (found[3], found[4])
        self._perms = tuple(tuple(p) or None for p in (self.perm_a, self.perm_b, self.perm_v))
        self._out_perm = tuple(self.perm_out) or None
        for name, perm, split in (("perm_a", self.perm_a, self.split_a), ("perm_b", self.perm_b, self.split_b),
                                  ("perm_v", self.perm_v, self.split_v), ("perm_out", self.perm_out, None)):  # fmt: skip
            if perm and split is None and sorted(perm) != list(range(len(perm))):  # (a split's: _checked_view)
                raise NetworkError(f"attention: {name} {list(perm)} is not a permutation")
        #: per input: (its split into atoms, {atom: fixed index}) or None: read as stored (then transposed)
        self._atom_shapes: tuple[tuple[int, ...] | None, ...] = (None, None, None)
        self._views = tuple(
            _checked_view(name, split, select, perm)
            for name, split, select, perm in (
                ("a", self.split_a, self.select_a, self.perm_a),
                ("b", self.split_b, self.select_b, self.perm_b),
                ("v", self.split_v, self.select_v, self.perm_v),
            )
        )

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
        logical = [self._permuted(i, shape) for i, shape in enumerate(input_shapes[:3])]
        scores = self._scores.output_shapes(logical[:2], none)[0]
        for position in (pre, post, *self._input_scales):
            if position is not None and not all(
                d.is_constant() and d.get_constant_value() == 1 for d in input_shapes[position]
            ):
                raise ShapeError(
                    f"{label(self)}: a scale must be a one-element tensor, got dims {input_shapes[position]}"
                )
        if mask is not None:
            scores = self._add.output_shapes([scores, input_shapes[mask]], none)[0]
        result = self._result.output_shapes([scores, logical[2]], none)[0]
        if self._out_perm is not None:
            if len(self._out_perm) != len(result):
                raise ShapeError(f"{label(self)}: perm_out {list(self._out_perm)} does not fit a rank-{len(result)} result")
            result = [result[p] for p in self._out_perm]
        return [result, scores]

    def _permuted(self, index: int, shape: Sequence[Any]) -> list[Any]:
        """Input ``index``'s dims as the products read it (through its view recipe and transpose, where it has
        them): expressions at build, integers at shape change."""
        perm = self._perms[index]
        if self._views[index] is not None:
            atoms = self._atoms(index, shape)
            shape = [d for k, d in enumerate(atoms) if k not in self._views[index][1]]  # type: ignore[index]
            if perm is not None and -1 in perm:  # unit axes: 1 where the permutation says -1
                unit = 1 if all(isinstance(d, (int, np.integer)) for d in shape) else constant(1)
                return [unit if p == -1 else shape[p] for p in perm]
        if perm is None:
            return list(shape)
        if len(perm) != len(shape):
            raise ShapeError(f"{label(self)}: the transpose {list(perm)} of input {index} does not fit its dims {list(shape)}")
        return [shape[p] for p in perm]

    def _atoms(self, index: int, shape: Sequence[Any]) -> list[Any]:
        """Input ``index``'s dims split into its recipe's atoms (expressions or integers, as ``shape``)."""
        split = self._views[index][0]  # type: ignore[index]
        if len(split) != len(shape):
            raise ShapeError(f"{label(self)}: the split {split} of input {index} does not fit its dims {list(shape)}")
        atoms: list[Any] = []
        for sizes, dim in zip(split, shape):
            known = math.prod(c for c in sizes if c != -1)
            expression = not isinstance(dim, (int, np.integer))
            value = None if expression and not dim.is_constant() else int(dim.get_constant_value() if expression else dim)
            if value is not None and (value % known if -1 in sizes else value != known):
                raise ShapeError(f"{label(self)}: input {index}'s dim {value} does not split into {sizes}")
            for size in sizes:
                if size == -1 and value is None:
                    atoms.append(dim if known == 1 else operation(DimensionOperation.FLOOR_DIV, dim, constant(known)))
                    continue
                size = value // known if size == -1 else size  # type: ignore[operator]
                atoms.append(constant(size) if expression else size)
        return atoms

    def _read(self, index: int, x: Any, torch_tensor: bool = False) -> Any:
        """Input ``index``'s array ``x`` (NumPy, CuPy or a torch tensor, of the shapes :meth:`prepare` saw) as the
        products read it: a view through its recipe, then its transpose."""
        found, perm = self._views[index], self._perms[index]
        if found is not None:
            x = x.reshape(self._atom_shapes[index])
            if found[1]:
                x = x[tuple(found[1].get(k, slice(None)) for k in range(x.ndim))]
        if perm is None:
            return x
        moved = [p for p in perm if p != -1]
        x = x.permute(*moved) if torch_tensor else x.transpose(moved)
        if len(moved) == len(perm):
            return x
        axes = iter(x.shape)  # unit axes where the permutation says -1 (a view: only sizes of 1 are added)
        return x.reshape([1 if p == -1 else next(axes) for p in perm])

    def _result_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The second product's dims, for the output's ``shape``."""
        if self._out_perm is None:
            return tuple(shape)
        result = [0] * len(shape)
        for position, axis in enumerate(self._out_perm):
            result[axis] = shape[position]
        return tuple(result)

    def prepare(self, input_shapes: Sequence[tuple[int, ...]], output_shapes: Sequence[tuple[int, ...]]) -> None:
        self._named()
        logical = [tuple(self._permuted(i, shape)) for i, shape in enumerate(input_shapes[:3])]
        #: per input, its dims split into its recipe's atoms (None without a recipe): made here, not per run
        self._atom_shapes = tuple(
            None if self._views[i] is None else tuple(self._atoms(i, shape)) for i, shape in enumerate(input_shapes[:3])
        )
        result = self._result_shape(tuple(output_shapes[0]))
        self._scores.prepare(logical[:2], [output_shapes[1]])
        self._result.prepare([output_shapes[1], logical[2]], [result])
        self._logical = (logical[0], logical[1], result)
        rank = len(output_shapes[1])
        if self._softmax.mask != 1 << (rank - 1):
            self._softmax = SoftmaxOperator({"scaled": self.scaled, "axes": 1 << (rank - 1)})
            self._named()
        self._softmax.prepare([output_shapes[1]], [output_shapes[1]])

    def bind(self, inputs: Sequence[Binding], outputs: Sequence[Binding], workspace: int) -> None:
        """As every operator binds; the own kernel's work arrays are made here, at shape change, not in a run."""
        super().bind(inputs, outputs, workspace)
        if self._torch_call is None:
            self._work_arrays(outputs[0].array.dtype, self.xp)

    def _work_arrays(self, dtype: Any, xp: Any) -> tuple[Any, Any, Any]:
        """Operator-owned arrays (made once per shape and type): ``a`` and ``b`` scaled, where they are, and the
        result before its transpose, where it has one."""
        shapes = self._logical
        wanted = (self._input_scales[0] is not None, self._input_scales[1] is not None, self._out_perm is not None)
        return tuple(  # type: ignore[return-value]
            self.scratch(("work", i), shapes[i], dtype, xp) if wanted[i] else None for i in range(3)
        )

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        out, scores = outputs
        pre, mask, post = self._positions
        work = self._work_arrays(out.dtype, xp)
        operands = [self._read(i, x) for i, x in enumerate(inputs[:3])]
        for i, position in enumerate(self._input_scales):
            if position is not None:  # as the Mul layer did: the (transposed) input times its scale
                xp.multiply(operands[i], inputs[position], out=work[i])
                operands[i] = work[i]
        if xp is np and blocked(scores.shape, *inputs, *outputs):
            attention_blocks(
                *self._products(operands),
                scores,
                self._unpermuted(out),
                None if pre is None else (self.pre, inputs[pre]),
                None if mask is None else inputs[mask],
                None if post is None else inputs[post],
                self.nan_to_zero,
            )
            return
        self._scores.run(operands[:2], [scores], xp)
        if pre is not None:
            (xp.multiply if self.pre == "PROD" else xp.divide)(scores, inputs[pre], out=scores)
        if mask is not None:
            xp.add(scores, inputs[mask], out=scores)
        self._softmax.run([scores] if post is None else [scores, inputs[post]], [scores], xp)
        if self.nan_to_zero:
            xp.putmask(scores, xp.isnan(scores), 0)
        if self._out_perm is None:
            self._result.run([scores, operands[2]], [out], xp)
            return
        self._result.run([scores, operands[2]], [work[2]], xp)
        out[...] = work[2].transpose(self._out_perm)

    def _products(self, operands: Sequence[Any]) -> tuple[Any, Any, Any]:
        """The products' operands as matrices (transposes applied as views): ``a``, ``b`` and ``v``."""
        return (
            product_operand(operands[0], self.op0, first=True),
            product_operand(operands[1], self.op1, first=False),
            product_operand(operands[2], self.value_op, first=False),
        )

    def _unpermuted(self, out: Any) -> Any:
        """The output as the second product writes it: a view through the inverse of its transpose."""
        if self._out_perm is None:
            return out
        return out.transpose([self._out_perm.index(axis) for axis in range(len(self._out_perm))])

    # --- the PyTorch tactic -------------------------------------------------------------------
    def torch_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """Inputs of one type and rank >= 3; on a GPU, whose batch dimensions agree, without a softmax scale."""
        if len(shapes[0]) < 3 or not super().torch_supports(types, shapes, constant):
            return False
        if self.xp is np:  # the row blocks
            return linear_available()
        if self.scaled:
            return False
        a, b, v = (tuple(self._permuted(i, shape)) for i, shape in enumerate(shapes[:3]))
        return a[:-2] == b[:-2] == v[:-2]

    def torch_kernel(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> Kernel | None:
        import torch

        if self.xp is np:
            return self._torch_blocks(inputs, outputs)
        pre, mask, _ = self._positions
        a, b, v = (self._read(i, view(x), torch_tensor=True) for i, x in enumerate(inputs[:3]))
        if a.shape[:-2] != b.shape[:-2] or a.shape[:-2] != v.shape[:-2]:
            return None
        q = a.transpose(-1, -2) if self.op0 == "TRANSPOSE" else a
        k = b if self.op1 == "TRANSPOSE" else b.transpose(-1, -2)
        values = v.transpose(-1, -2) if self.value_op == "TRANSPOSE" else v
        host = backend_for(self.xp).to_host  # the scales are read once, at bind
        scale = 1.0
        if pre is not None:
            factor = float(host(inputs[pre]).reshape(-1)[0])
            if factor == 0.0:
                return None
            scale = factor if self.pre == "PROD" else 1.0 / factor
        for position in self._input_scales:  # (a s_a) (b s_b)^T = s_a s_b a b^T
            if position is not None:
                scale *= float(host(inputs[position]).reshape(-1)[0])
        bias = view(inputs[mask]) if mask is not None else None
        out = view(outputs[0])
        if self._out_perm is not None:  # the result written through the transpose that follows it
            out = out.permute([self._out_perm.index(axis) for axis in range(len(self._out_perm))])
        attend = torch.nn.functional.scaled_dot_product_attention
        guard = self.nan_to_zero

        def run() -> None:
            out.copy_(attend(q, k, values, attn_mask=bias, scale=scale))
            if guard:  # a row the mask removes entirely: NaN probabilities, a NaN row; the guard makes it 0
                torch.nan_to_num(out, nan=0.0, posinf=math.inf, neginf=-math.inf, out=out)

        return run

    def _factor(self, inputs: Sequence[Any]) -> float | None:
        """The scores' scale, read now (at bind): the pre-scale's and ``a``'s and ``b``'s scales joined,
        (a s_a) (b s_b)^T = s_a s_b a b^T; None for a pre-scale that divides by zero."""
        pre = self._positions[0]
        factor = 1.0
        if pre is not None:
            value = float(np.asarray(inputs[pre]).reshape(-1)[0])
            if value == 0.0:
                return None
            factor = value if self.pre == "PROD" else 1.0 / value
        for position in self._input_scales:
            if position is not None:
                factor *= float(np.asarray(inputs[position]).reshape(-1)[0])
        return factor

    def direct_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """Inputs of rank >= 3 (``ops/onednn_attention.py``)."""
        return len(shapes[0]) >= 3

    def direct_kernel(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> Kernel | None:
        """oneDNN's products and softmax called directly (``ops/onednn_attention.py``), every head at once; the scales
        are read once, here."""
        _, mask, post = self._positions
        factor = self._factor(inputs)
        if factor is None:
            return None
        a, b, v = self._products([self._read(i, x) for i, x in enumerate(inputs[:3])])
        return attention_onednn(
            a,
            b,
            v,
            tuple(outputs[1].shape),
            self._unpermuted(outputs[0]),
            None if factor == 1.0 else factor,
            None if mask is None else inputs[mask],
            None if post is None else float(np.asarray(inputs[post]).reshape(-1)[0]),
            self.nan_to_zero,
        )

    def _torch_blocks(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> Kernel | None:
        """On the CPU: the row blocks with PyTorch's kernels (``attention_blocks.py``), FLOAT arrays only; the
        scales are read once, here, and ``a``'s and ``b``'s join the pre-scale: (a s_a) (b s_b)^T = s_a s_b a b^T."""
        if not all(isinstance(x, np.ndarray) and x.dtype == np.float32 for x in (*inputs, *outputs)):
            return None
        _, mask, post = self._positions
        factor = self._factor(inputs)
        if factor is None:
            return None
        # oneDNN reads a matrix whose rows are strided (the heads of [B, S, H, D] read as [B, H, S, D]) slowly:
        # a transposed input is first copied into an operator-owned array in the order the products read it
        read = [self._read(i, x) for i, x in enumerate(inputs[:3])]
        whole = whole_attention(outputs[1].shape)  # (torch's batched products take strided heads as they are)
        moved = [not whole and (self._perms[i] is not None or self._views[i] is not None) for i in range(3)]
        staged = [
            self.scratch(("staged", i), tuple(x.shape), np.float32, np) if moved[i] else x for i, x in enumerate(read)
        ]
        copies = [(x, y) for x, y, m in zip(read, staged, moved) if m]
        blocks = torch_attention_blocks(
            *self._products(staged),
            outputs[1].shape,
            self._unpermuted(outputs[0]),
            None if factor == 1.0 else ("PROD", factor),
            None if mask is None else inputs[mask],
            None if post is None else float(np.asarray(inputs[post]).reshape(-1)[0]),
            self.nan_to_zero,
        )
        if blocks is None or not copies:
            return blocks

        def run() -> None:
            for source, target in copies:
                np.copyto(target, source)
            blocks()

        return run
