"""ONNX importers: binary and n-ary elementwise ops, MatMul, Clip.

Every binary op broadcasts as NumPy does: the lower-rank input gets leading
size-1 dimensions first (TensorRT's elementwise layer needs equal ranks).
Nodes whose inputs are all known fold to constants (their layers run at import).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce
from typing import Any

import numpy as np

from ...core.types import DataType
from ...network.layer_enums import ActivationType as Act
from ...network.layer_enums import ElementWiseOperation as Ew
from ...network.layer_enums import MatrixOperation, UnaryOperation
from ...network.tensor import ITensor
from .base import ImportContext, register_importer

__all__: list[str] = []

_FLOATS = (DataType.FLOAT, DataType.HALF)
_INTS = (DataType.INT8, DataType.UINT8, DataType.INT32, DataType.INT64)


def _present(ctx: ImportContext, inputs: list[Any], count: int | None = None) -> list[ITensor]:
    tensors = [t for t in inputs if t is not None]
    if count is not None and len(tensors) != count:
        ctx.fail(f"expected {count} inputs, got {len(tensors)}")
    if not tensors:
        ctx.fail("the node has no inputs")
    return tensors


def _same_type(ctx: ImportContext, tensors: list[ITensor]) -> DataType:
    types = [ctx.dtype_of(t) for t in tensors]
    if any(t != types[0] for t in types):
        ctx.fail(f"inputs must have one type, got {', '.join(t.name for t in types)}")
    return types[0]


def _binary(op: Ew, numeric: bool = True) -> Callable[..., list[Any]]:
    def importer(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
        a, b = _present(ctx, inputs, 2)
        dtype = _same_type(ctx, [a, b])
        if numeric and dtype == DataType.BOOL:
            ctx.fail(f"{ctx.node.op_type} takes numbers, got BOOL")
        return ctx.folded([ctx.elementwise(a, b, op)])

    return importer


_BINARY = {"Add": Ew.SUM, "Sub": Ew.SUB, "Mul": Ew.PROD, "Div": Ew.DIV, "Greater": Ew.GREATER, "Less": Ew.LESS}
_ANY_TYPE_BINARY = {"Equal": Ew.EQUAL, "And": Ew.AND, "Or": Ew.OR, "Xor": Ew.XOR}
for _op_type, _ew in _BINARY.items():
    register_importer(_op_type)(_binary(_ew))
for _op_type, _ew in _ANY_TYPE_BINARY.items():
    register_importer(_op_type)(_binary(_ew, numeric=False))


def _or_equal(op: Ew) -> Callable[..., list[Any]]:
    # OR(op, EQUAL) rather than NOT(opposite): comparisons with NaN stay False.
    def importer(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
        a, b = _present(ctx, inputs, 2)
        _same_type(ctx, [a, b])
        return ctx.folded([ctx.elementwise(ctx.elementwise(a, b, op), ctx.elementwise(a, b, Ew.EQUAL), Ew.OR)])

    return importer


register_importer("GreaterOrEqual")(_or_equal(Ew.GREATER))
register_importer("LessOrEqual")(_or_equal(Ew.LESS))


def _nary(op: Ew) -> Callable[..., list[Any]]:
    def importer(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
        tensors = _present(ctx, inputs)
        _same_type(ctx, tensors)
        if len(tensors) == 1:
            return ctx.folded([ctx.identity(tensors[0])])
        return ctx.folded([reduce(lambda x, y: ctx.elementwise(x, y, op), tensors)])

    return importer


register_importer("Sum")(_nary(Ew.SUM))
register_importer("Max")(_nary(Ew.MAX))
register_importer("Min")(_nary(Ew.MIN))


@register_importer("Mean")
def import_mean(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    tensors = _present(ctx, inputs)
    if _same_type(ctx, tensors) not in _FLOATS:
        ctx.fail("Mean takes FLOAT or FLOAT16 inputs")
    total = reduce(lambda x, y: ctx.elementwise(x, y, Ew.SUM), tensors)
    if len(tensors) == 1:
        return ctx.folded([ctx.identity(total)])
    return ctx.folded([ctx.elementwise(total, ctx.scalar(float(len(tensors)), total), Ew.DIV)])


@register_importer("Pow")
def import_pow(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    base, exponent = _present(ctx, inputs, 2)
    return ctx.folded([_pow(ctx, base, exponent)])


def _pow(ctx: ImportContext, base: ITensor, exponent: ITensor) -> ITensor:
    base_type = ctx.dtype_of(base)
    if base_type in _FLOATS:
        power = _small_integer(ctx, base, exponent)
        if power is not None:  # x ** 2, 3, 4 as products: exact, and a fraction of power's time
            if power == 1:
                return ctx.identity(base)
            square = ctx.elementwise(base, base, Ew.PROD)
            if power == 2:
                return square
            return ctx.elementwise(square, base if power == 3 else square, Ew.PROD)
        return ctx.elementwise(base, ctx.cast(exponent, base_type), Ew.POW)
    if base_type in _INTS:
        if ctx.dtype_of(exponent) in _FLOATS:
            # ONNX computes in the exponent's precision and converts back (toward zero).
            real = ctx.elementwise(ctx.cast(base, DataType.FLOAT), ctx.cast(exponent, DataType.FLOAT), Ew.POW)
            return ctx.cast(real, base_type)
        return ctx.elementwise(base, ctx.cast(exponent, base_type), Ew.POW)
    ctx.fail(f"Pow takes numbers, got {base_type.name}")


def _small_integer(ctx: ImportContext, base: ITensor, exponent: ITensor) -> int | None:
    """The exponent when it is a known one-element 1, 2, 3 or 4 that broadcasting adds no dimension for."""
    value = ctx.value_of(exponent)
    if value is None or value.size != 1 or value.ndim > ctx.rank_of(base):
        return None
    number = float(value.reshape(-1)[0])
    return int(number) if number in (1.0, 2.0, 3.0, 4.0) else None


@register_importer("Mod")
def import_mod(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    a, b = _present(ctx, inputs, 2)
    fmod = bool(ctx.attr("fmod", 0))
    _same_type(ctx, [a, b])
    a, b = ctx.broadcast(a, b)
    return ctx.folded(ctx.op("mod", [a, b], {"fmod": fmod}))


def _bitwise(op: str) -> Callable[..., list[Any]]:
    def importer(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
        tensors = _present(ctx, inputs, 1 if op == "NOT" else 2)
        if _same_type(ctx, tensors) not in _INTS:
            ctx.fail(f"{ctx.node.op_type} takes integers, got {ctx.dtype_of(tensors[0]).name}")
        return ctx.op("bitwise", ctx.broadcast(*tensors), {"op": op})

    return importer


for _op_type, _bit in (
    ("BitwiseAnd", "AND"),
    ("BitwiseOr", "OR"),
    ("BitwiseXor", "XOR"),
    ("BitwiseNot", "NOT"),
):
    register_importer(_op_type)(_bitwise(_bit))


@register_importer("BitShift")
def import_bit_shift(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    direction = ctx.required_attr("direction")
    if direction not in ("LEFT", "RIGHT"):
        ctx.fail(f"direction must be 'LEFT' or 'RIGHT', got {direction!r}")
    return _bitwise(f"{direction}_SHIFT")(ctx, inputs)


@register_importer("MatMul")
def import_matmul(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    a, b = _present(ctx, inputs, 2)
    dtype = _same_type(ctx, [a, b])
    if dtype in _FLOATS:
        return ctx.folded([_matmul(ctx, a, b)])
    if dtype in _INTS:
        # Integer products through FLOAT (exact while sums stay below 2**24).
        product = _matmul(ctx, ctx.cast(a, DataType.FLOAT), ctx.cast(b, DataType.FLOAT))
        return ctx.folded([ctx.cast(product, dtype)])
    ctx.fail(f"MatMul takes numbers, got {dtype.name}")


def _matmul(ctx: ImportContext, a: ITensor, b: ITensor) -> ITensor:
    """``numpy.matmul`` on TensorRT's matrix multiply: 1-D operands as vectors, batch dims broadcast."""
    a, op_a, b, op_b = matmul_operands(ctx, a, b)
    layer = ctx.named(ctx.network.add_matrix_multiply(a, op_a, b, op_b), "matmul")
    return layer.get_output(0)


def matmul_operands(ctx: ImportContext, a: ITensor, b: ITensor) -> tuple[ITensor, MatrixOperation, ITensor, MatrixOperation]:
    """The operands of ``numpy.matmul(a, b)`` as TensorRT's matrix multiply takes them: a 1-D operand
    is a VECTOR, the other gets leading dimensions of 1 until both have equally many batch dims."""
    rank_a, rank_b = ctx.rank_of(a), ctx.rank_of(b)
    if rank_a == 0 or rank_b == 0:
        ctx.fail(f"{ctx.node.op_type} inputs must have rank >= 1")
    op_a = MatrixOperation.VECTOR if rank_a == 1 else MatrixOperation.NONE
    op_b = MatrixOperation.VECTOR if rank_b == 1 else MatrixOperation.NONE
    batch_a = rank_a - (1 if rank_a == 1 else 2)
    batch_b = rank_b - (1 if rank_b == 1 else 2)
    batch = max(batch_a, batch_b)
    return ctx.unsqueeze_to(a, rank_a + batch - batch_a), op_a, ctx.unsqueeze_to(b, rank_b + batch - batch_b), op_b


_FLOAT_MAX = float(np.finfo(np.float32).max)


@register_importer("Clip")
def import_clip(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    x = inputs[0] if inputs else None
    if x is None:
        ctx.fail("input 0 is missing")
    dtype = ctx.dtype_of(x)
    bounds: list[float | ITensor | None]
    if ctx.opset < 11:
        bounds = [float(ctx.attr("min", -_FLOAT_MAX)), float(ctx.attr("max", _FLOAT_MAX))]
    else:
        bounds = [_bound(ctx, inputs, 1), _bound(ctx, inputs, 2)]
    low, high = bounds
    if dtype in _FLOATS and not isinstance(low, ITensor) and not isinstance(high, ITensor):
        lo = -_FLOAT_MAX if low is None else low
        hi = _FLOAT_MAX if high is None else high
        if np.isfinite(lo) and np.isfinite(hi) and lo <= hi:
            return [ctx.activation(x, Act.CLIP, lo, hi)]
    # max then min: where min > max every value becomes max, as ONNX specifies.
    out = x
    for bound, op in ((low, Ew.MAX), (high, Ew.MIN)):
        if bound is None:
            continue
        operand = ctx.cast(bound, dtype) if isinstance(bound, ITensor) else ctx.scalar(bound, out)
        out = ctx.elementwise(out, operand, op)
    return [out if out is not x else ctx.identity(x)]


def _bound(ctx: ImportContext, inputs: list[Any], index: int) -> float | ITensor | None:
    """Clip bound ``index``: None when absent, a float when known, else the tensor."""
    tensor = inputs[index] if len(inputs) > index else None
    if tensor is None:
        return None
    value = ctx.value_of(tensor)
    if value is None or value.size != 1:
        return tensor  # type: ignore[no-any-return]
    return float(value.reshape(-1)[0])


@register_importer("Not")
def import_not(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    (x,) = _present(ctx, inputs, 1)
    if ctx.dtype_of(x) != DataType.BOOL:
        ctx.fail(f"Not takes BOOL, got {ctx.dtype_of(x).name}")
    return ctx.folded([ctx.unary(x, UnaryOperation.NOT)])
