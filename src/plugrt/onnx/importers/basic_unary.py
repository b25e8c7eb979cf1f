"""ONNX importers: unary math ops and activations (TensorRT's unary and activation layers).

Activations whose ONNX definition is not one of TensorRT's are composed from
layers (Celu, HardSwish, Mish, Swish, Shrink).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...core.types import DataType
from ...network.layer_enums import ActivationType as Act
from ...network.layer_enums import ElementWiseOperation as Ew
from ...network.layer_enums import UnaryOperation as U
from ...network.tensor import ITensor
from .base import ImportContext, register_importer

__all__: list[str] = []

_FLOATS = (DataType.FLOAT, DataType.HALF)
_SIGNED = (DataType.INT8, DataType.INT32, DataType.INT64)


def _float_input(ctx: ImportContext, inputs: list[Any]) -> ITensor:
    x = ctx.input(inputs)
    if ctx.dtype_of(x) not in _FLOATS:
        ctx.fail(
            f"{ctx.node.op_type} takes FLOAT or FLOAT16 (or DOUBLE, imported as FLOAT), got {ctx.dtype_of(x).name}"
        )
    return x


def _unary(op: U, floats_only: bool = True) -> Callable[..., list[Any]]:
    def importer(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
        x = _float_input(ctx, inputs) if floats_only else ctx.input(inputs)
        return ctx.folded([ctx.unary(x, op)])

    return importer


for _op_type, _u in (
    ("Exp", U.EXP),
    ("Log", U.LOG),
    ("Sqrt", U.SQRT),
    ("Reciprocal", U.RECIP),
    ("Sin", U.SIN),
    ("Cos", U.COS),
    ("Tan", U.TAN),
    ("Asin", U.ASIN),
    ("Acos", U.ACOS),
    ("Atan", U.ATAN),
    ("Sinh", U.SINH),
    ("Cosh", U.COSH),
    ("Asinh", U.ASINH),
    ("Acosh", U.ACOSH),
    ("Atanh", U.ATANH),
    ("Ceil", U.CEIL),
    ("Floor", U.FLOOR),
    ("Round", U.ROUND),
    ("IsNaN", U.ISNAN),
):
    register_importer(_op_type)(_unary(_u))


@register_importer("Erf")
def import_erf(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    return [ctx.unary(_float_input(ctx, inputs), U.ERF)]


def _signed_unary(op: U) -> Callable[..., list[Any]]:
    """Abs, Neg, Sign: floats and signed ints directly, other ints through INT32/INT64."""

    def importer(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
        x = ctx.input(inputs)
        dtype = ctx.dtype_of(x)
        if dtype in _FLOATS or dtype in _SIGNED or (op == U.ABS and dtype == DataType.UINT8):
            return ctx.folded([ctx.unary(x, op)])
        if dtype == DataType.UINT8:
            return ctx.folded([ctx.cast(ctx.unary(ctx.cast(x, DataType.INT32), op), dtype)])
        ctx.fail(f"{ctx.node.op_type} takes numbers, got {dtype.name}")

    return importer


register_importer("Abs")(_signed_unary(U.ABS))
register_importer("Neg")(_signed_unary(U.NEG))
register_importer("Sign")(_signed_unary(U.SIGN))


@register_importer("IsInf")
def import_is_inf(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    x = _float_input(ctx, inputs)
    negative, positive = bool(ctx.attr("detect_negative", 1)), bool(ctx.attr("detect_positive", 1))
    found = ctx.unary(x, U.ISINF)
    if negative and positive:
        return [found]
    if not negative and not positive:
        return [ctx.elementwise(found, ctx.constant(np.zeros((1,) * ctx.rank_of(x), dtype=bool)), Ew.AND)]
    side = ctx.elementwise(x, ctx.scalar(0.0, x), Ew.GREATER if positive else Ew.LESS)
    return [ctx.elementwise(found, side, Ew.AND)]


def _activation(kind: Act, alpha: Callable[[ImportContext], float] | None = None, beta: Any = None) -> Any:
    def importer(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
        x = _float_input(ctx, inputs)
        a = alpha(ctx) if alpha is not None else 0.0
        b = beta(ctx) if beta is not None else 0.0
        return [ctx.activation(x, kind, a, b)]

    return importer


def _attr(name: str, default: float) -> Callable[[ImportContext], float]:
    return lambda ctx: float(ctx.attr(name, default))


register_importer("Sigmoid")(_activation(Act.SIGMOID))
register_importer("Tanh")(_activation(Act.TANH))
register_importer("LeakyRelu")(_activation(Act.LEAKY_RELU, _attr("alpha", 0.01)))
register_importer("Elu")(_activation(Act.ELU, _attr("alpha", 1.0)))
register_importer("Selu")(
    _activation(Act.SELU, _attr("alpha", 1.67326319217681884765625), _attr("gamma", 1.05070102214813232421875))
)
register_importer("Softsign")(_activation(Act.SOFTSIGN))
register_importer("Softplus")(_activation(Act.SOFTPLUS, lambda ctx: 1.0, lambda ctx: 1.0))
register_importer("HardSigmoid")(_activation(Act.HARD_SIGMOID, _attr("alpha", 0.2), _attr("beta", 0.5)))
register_importer("ThresholdedRelu")(_activation(Act.THRESHOLDED_RELU, _attr("alpha", 1.0)))


@register_importer("Relu")
def import_relu(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    x = ctx.input(inputs)
    dtype = ctx.dtype_of(x)
    if dtype in _FLOATS or dtype in (DataType.INT32, DataType.INT64):
        return ctx.folded([ctx.activation(x, Act.RELU)])
    if dtype == DataType.INT8:
        return ctx.folded([ctx.elementwise(x, ctx.scalar(0, x), Ew.MAX)])
    ctx.fail(f"Relu takes signed numbers, got {dtype.name}")


@register_importer("Gelu")
def import_gelu(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    x = _float_input(ctx, inputs)
    approximate = ctx.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        ctx.fail(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    return [ctx.activation(x, Act.GELU_TANH if approximate == "tanh" else Act.GELU_ERF)]


@register_importer("Celu")
def import_celu(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    # celu(x) = alpha * elu(x / alpha) with elu's alpha 1: for x >= 0 both sides are x.
    x = _float_input(ctx, inputs)
    alpha = float(ctx.attr("alpha", 1.0))
    if alpha == 0:
        ctx.fail("alpha must not be 0")
    scaled = ctx.elementwise(x, ctx.scalar(alpha, x), Ew.DIV)
    return [ctx.elementwise(ctx.activation(scaled, Act.ELU, 1.0), ctx.scalar(alpha, x), Ew.PROD)]


@register_importer("HardSwish")
def import_hard_swish(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    x = _float_input(ctx, inputs)
    return [ctx.elementwise(x, ctx.activation(x, Act.HARD_SIGMOID, 1.0 / 6.0, 0.5), Ew.PROD)]


@register_importer("Mish")
def import_mish(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    x = _float_input(ctx, inputs)
    soft = ctx.activation(x, Act.SOFTPLUS, 1.0, 1.0)
    return [ctx.elementwise(x, ctx.activation(soft, Act.TANH), Ew.PROD)]


@register_importer("Swish")
def import_swish(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    x = _float_input(ctx, inputs)
    alpha = float(ctx.attr("alpha", 1.0))
    scaled = x if alpha == 1.0 else ctx.elementwise(x, ctx.scalar(alpha, x), Ew.PROD)
    return [ctx.elementwise(x, ctx.activation(scaled, Act.SIGMOID), Ew.PROD)]


@register_importer("Shrink")
def import_shrink(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    x = ctx.input(inputs)
    dtype = ctx.dtype_of(x)
    lambd, bias = float(ctx.attr("lambd", 0.5)), float(ctx.attr("bias", 0.0))
    real = ctx.cast(x, DataType.FLOAT) if dtype not in _FLOATS else x
    above = ctx.cast(ctx.elementwise(real, ctx.scalar(lambd, real), Ew.GREATER), ctx.dtype_of(real))
    below = ctx.cast(ctx.elementwise(real, ctx.scalar(-lambd, real), Ew.LESS), ctx.dtype_of(real))
    high = ctx.elementwise(above, ctx.elementwise(real, ctx.scalar(bias, real), Ew.SUB), Ew.PROD)
    low = ctx.elementwise(below, ctx.elementwise(real, ctx.scalar(bias, real), Ew.SUM), Ew.PROD)
    out = ctx.elementwise(high, low, Ew.SUM)
    return [ctx.cast(out, dtype) if dtype not in _FLOATS else out]
