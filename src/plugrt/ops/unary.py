"""Elementwise unary operations (TensorRT's UnaryOperation), and ``erf``.

ROUND rounds half to even. NOT takes BOOL; ISINF and ISNAN give BOOL; ABS, NEG
and SIGN also take integers; the others take FLOAT or HALF. The transcendental ones
(``torch_cpu_kernels.UNARY``) have a PyTorch kernel on FLOAT, timed per layer at build
(:mod:`plugrt.ops.torch_cpu`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..backends.registry import backend_for
from ..core.types import DataType
from . import onednn
from .base import register_operator
from .elementwise import FLOAT_TYPES, NUMERIC_TYPES, expect_inputs
from .fast_math import erf_into
from .onednn_elementwise import eltwise_onednn
from .params import param
from .shared_rules import SameShape, expect_type
from .torch_cpu import Kernel, TorchOperator
from .torch_cpu_kernels import NUMPY_AS_FAST
from .torch_cpu_kernels import UNARY as TORCH_UNARY
from .torch_cpu_kernels import unary as torch_unary

__all__ = ["UFUNCS", "UnaryOperator", "erf"]

#: UnaryOperation names and their ufuncs ("" = erf, computed by :func:`erf`)
UFUNCS = {
    "EXP": "exp",
    "LOG": "log",
    "SQRT": "sqrt",
    "RECIP": "reciprocal",
    "ABS": "absolute",
    "NEG": "negative",
    "SIN": "sin",
    "COS": "cos",
    "TAN": "tan",
    "SINH": "sinh",
    "COSH": "cosh",
    "ASIN": "arcsin",
    "ACOS": "arccos",
    "ATAN": "arctan",
    "ASINH": "arcsinh",
    "ACOSH": "arccosh",
    "ATANH": "arctanh",
    "CEIL": "ceil",
    "FLOOR": "floor",
    "ERF": "",
    "NOT": "logical_not",
    "SIGN": "sign",
    "ROUND": "rint",
    "ISINF": "isinf",
    "ISNAN": "isnan",
}
_SIGNED_TYPES = FLOAT_TYPES | {DataType.INT8, DataType.INT32, DataType.INT64}


def _input_types(op: str) -> frozenset[DataType]:
    if op == "NOT":
        return frozenset({DataType.BOOL})
    if op in ("ABS", "NEG", "SIGN"):
        return _SIGNED_TYPES if op != "ABS" else NUMERIC_TYPES
    return FLOAT_TYPES


@register_operator
class UnaryOperator(SameShape, TorchOperator):
    """``out = op(x)``; params: ``op`` (a UnaryOperation name)."""

    kind = "unary"
    op: str = param(choices=UFUNCS)

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 1)
        expect_type(self, input_types[0], _input_types(self.op), f"unary {self.op}")
        return [DataType.BOOL if self.op in ("ISINF", "ISNAN") else input_types[0]]

    def torch_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """FLOAT, for the ops in ``torch_cpu_kernels.UNARY`` (on the CPU not those of ``NUMPY_AS_FAST``)."""
        if self.xp is np and self.op in NUMPY_AS_FAST:  # (no torch import for them)
            return False
        return self.op in TORCH_UNARY and super().torch_supports(types, shapes, constant)

    def direct_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """The ops oneDNN's eltwise primitive computes (``onednn.UNARY``)."""
        return self.op in onednn.UNARY

    def direct_kernel(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> Kernel | None:
        """oneDNN's eltwise primitive called directly (``ops/onednn_elementwise.py``)."""
        return eltwise_onednn(onednn.UNARY[self.op], 0.0, 0.0, inputs[0], outputs[0]) if self.op in onednn.UNARY else None

    def torch_kernel(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> Kernel | None:
        return torch_unary(self.op, inputs[0], outputs[0]) if self.op in TORCH_UNARY else None

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        if self.op == "ERF":
            erf(xp, inputs[0], outputs[0])
        else:
            getattr(xp, UFUNCS[self.op])(inputs[0], out=outputs[0])

    def direct_launch(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any) -> Any:
        """The ufunc itself on NumPy (ERF through :meth:`run`)."""
        if xp is not np or self.op == "ERF":
            return None
        return getattr(np, UFUNCS[self.op]), (inputs[0], outputs[0])


def erf(xp: Any, x: Any, out: Any) -> None:
    """Write the error function of ``x`` into ``out``.

    float32 and float16 NumPy arrays use :func:`~plugrt.ops.fast_math.erf_into` (within
    0.54 ulp, faster than SciPy's); other NumPy arrays of at most :data:`SMALL_ERF` elements
    :func:`erf_fallback`; other types SciPy (NumPy arrays) or CuPy's
    ``cupyx.scipy.special`` (the backend's ``special_function``) when present, else :func:`erf_fallback`.
    """
    if xp is np and out.dtype in (np.float32, np.float16):
        erf_into(x, out)
        return
    if xp is np and out.size <= SMALL_ERF:  # (no SciPy import, ~22 MB, for the builder's float64 GELU probes)
        out[...] = erf_fallback(xp, x)
        return
    _erf_function(xp)(x, out=out)


#: other NumPy arrays of at most this many elements take :func:`erf_fallback` (within 1e-14) rather than SciPy, whose
#: import costs ~22 MB of memory: the builder's GELU rule evaluates its probes in float64 (``builder/passes/gelu.py``)
SMALL_ERF = 1 << 14

_ERF_CACHE: dict[str, Callable[..., Any]] = {}


def _erf_function(xp: Any) -> Callable[..., Any]:
    backend = backend_for(xp)
    if backend.name not in _ERF_CACHE:
        _ERF_CACHE[backend.name] = backend.special_function("erf") or _fallback_for(xp)
    return _ERF_CACHE[backend.name]


def _fallback_for(xp: Any) -> Callable[..., Any]:
    def run(x: Any, out: Any) -> None:
        out[...] = erf_fallback(xp, x)

    return run


def erf_fallback(xp: Any, x: Any) -> Any:
    """``erf(x)`` from elementary functions, accurate to about 1e-14 (float64 work).

    A Taylor series below 2.5 and the Laplace continued fraction of ``erfc`` above.
    """
    z = xp.abs(xp.asarray(x, dtype=xp.float64))
    small = xp.minimum(z, 2.5)
    square = small * small
    term = small.copy()
    series = small.copy()
    for n in range(1, 37):
        term *= -square / n
        series += term / (2 * n + 1)
    series *= 2.0 / math.sqrt(math.pi)
    large = xp.maximum(z, 2.5)
    fraction = large.copy()
    for k in range(20, 0, -1):
        fraction = large + (k / 2.0) / fraction
    tail = 1.0 - xp.exp(-large * large) / (math.sqrt(math.pi) * fraction)
    return xp.sign(x) * xp.where(z < 2.5, series, tail)
