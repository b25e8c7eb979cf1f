"""Activation functions (TensorRT's ActivationType) with their ``alpha``/``beta`` meanings.

HALF inputs are computed in FLOAT and rounded once into the HALF output, so
composite functions (GELU, SELU, ...) do not accumulate half-precision error.
RELU also takes INT32 and INT64, as TensorRT. HARD_SWISH (``x * min(max(x + 3, 0), 6) / 6``) is
no TensorRT type: the builder's ``hard_swish`` rule makes it from the layers exporters write.
RELU, SIGMOID, TANH, the GELUs, LEAKY_RELU, CLIP, HARD_SIGMOID and HARD_SWISH have a PyTorch
kernel on FLOAT, timed per layer at build (:mod:`plugrt.ops.torch_cpu`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..core.errors import NetworkError
from ..core.types import DataType
from . import onednn
from .base import register_operator
from .elementwise import FLOAT_TYPES, expect_inputs
from .fast_math import BLOCK, gelu_erf_into
from .onednn_elementwise import eltwise_onednn
from .params import param
from .shared_rules import SameShape, expect_type
from .torch_cpu import Kernel as TorchKernel
from .torch_cpu import TorchOperator
from .torch_cpu_kernels import ACTIVATIONS as TORCH_ACTIVATIONS
from .torch_cpu_kernels import NUMPY_AS_FAST
from .torch_cpu_kernels import activation as torch_activation
from .unary import erf

__all__ = ["CLIP_MIN_ELEMENTS", "ActivationOperator", "activation_kernel", "clip_into"]

Kernel = Callable[[Any, Any, Any, float, float], None]


#: NumPy's clip ufunc bounds float32 in one pass at about a quarter of one maximum's time (2.4: 0.13 against
#: 0.44 ms over 1.2 M elements) but costs about 1.5 us more a call: it is used from this many elements
CLIP_MIN_ELEMENTS = 4096


def clip_into(xp: Any, x: Any, low: float, high: float, out: Any) -> None:
    """``out = max(low, min(high, x))`` (TensorRT's CLIP; NaN stays NaN): ``np.clip`` for large float32 NumPy
    arrays with ``low <= high`` (the same values; a -0.0 input may stay -0.0), else ``minimum`` then ``maximum``."""
    if xp is np and low <= high and out.dtype == np.float32 and x.dtype == np.float32 and x.size >= CLIP_MIN_ELEMENTS:
        np.clip(x, low, high, out=out)
        return
    if high == math.inf:
        xp.maximum(x, low, out=out)
        return
    xp.minimum(x, high, out=out)
    xp.maximum(out, low, out=out)


def _relu(xp: Any, x: Any, out: Any, alpha: float, beta: float) -> None:
    if xp is np and x.dtype == out.dtype == np.float32 and x.size >= CLIP_MIN_ELEMENTS:
        np.clip(x, 0.0, math.inf, out=out)
    else:
        xp.maximum(x, 0, out=out)


#: exp(-x) is finite in float32 for x above this; below it the sigmoid is under 1e-38 and stays there
_SIGMOID_FLOOR = -88.0


def _sigmoid(xp: Any, x: Any, out: Any, alpha: float, beta: float) -> None:
    # 1 / (1 + exp(-x)) in place, accurate in both tails (relative error a few ulp), with x clamped
    # so exp(-x) never overflows; a HALF output is rounded once from FLOAT
    work = out if out.dtype == x.dtype else xp.empty_like(x)
    clip_into(xp, x, _SIGMOID_FLOOR, math.inf, work)
    xp.negative(work, out=work)
    xp.exp(work, out=work)
    xp.add(work, 1.0, out=work)
    xp.reciprocal(work, out=work)
    if work is not out:
        out[...] = work


def _tanh(xp: Any, x: Any, out: Any, alpha: float, beta: float) -> None:
    xp.tanh(x, out=out)


def _leaky_relu(xp: Any, x: Any, out: Any, alpha: float, beta: float) -> None:
    out[...] = xp.where(x >= 0, x, alpha * x)


def _elu(xp: Any, x: Any, out: Any, alpha: float, beta: float) -> None:
    out[...] = xp.where(x >= 0, x, alpha * xp.expm1(xp.minimum(x, 0)))


def _selu(xp: Any, x: Any, out: Any, alpha: float, beta: float) -> None:
    out[...] = beta * xp.where(x > 0, x, alpha * xp.exp(xp.minimum(x, 0)) - alpha)


def _softsign(xp: Any, x: Any, out: Any, alpha: float, beta: float) -> None:
    out[...] = x / (1.0 + xp.abs(x))


def _softplus(xp: Any, x: Any, out: Any, alpha: float, beta: float) -> None:
    # log(exp(t) + 1) = max(t, 0) + log1p(exp(-|t|)), finite for every t.
    t = beta * x
    out[...] = alpha * (xp.maximum(t, 0) + xp.log1p(xp.exp(-xp.abs(t))))


def _clip(xp: Any, x: Any, out: Any, alpha: float, beta: float) -> None:
    if out.dtype == x.dtype:
        clip_into(xp, x, alpha, beta, out)
    else:
        out[...] = xp.maximum(alpha, xp.minimum(beta, x))


def _hard_sigmoid(xp: Any, x: Any, out: Any, alpha: float, beta: float) -> None:
    work = xp.asarray(alpha * x + beta)  # an array also for 0-d x
    clip_into(xp, work, 0.0, 1.0, work)
    out[...] = work


def _hard_swish(xp: Any, x: Any, out: Any, alpha: float, beta: float) -> None:
    # x * clip(x + 3, 0, 6) / 6 in PaddlePaddle's order (Add, Clip, Mul, Div): in place-safe, one temporary
    work = xp.asarray(xp.add(x, 3.0))
    clip_into(xp, work, 0.0, 6.0, work)
    xp.multiply(x, work, out=work)
    xp.divide(work, 6.0, out=out)


def _scaled_tanh(xp: Any, x: Any, out: Any, alpha: float, beta: float) -> None:
    out[...] = alpha * xp.tanh(beta * x)


def _thresholded_relu(xp: Any, x: Any, out: Any, alpha: float, beta: float) -> None:
    out[...] = xp.where(x > alpha, x, 0)


def _gelu_erf(xp: Any, x: Any, out: Any, alpha: float, beta: float) -> None:
    if xp is np and out.dtype in (np.float32, np.float16):
        gelu_erf_into(x, out)
        return
    cdf = xp.empty_like(x)
    erf(xp, x * math.sqrt(0.5), cdf)
    out[...] = 0.5 * x * (1.0 + cdf)


_GELU_TANH_SCALE = math.sqrt(2.0 / math.pi)
#: exp(t) is finite in float32 for t below this
_EXP_CEILING = 88.0


def _gelu_tanh(xp: Any, x: Any, out: Any, alpha: float, beta: float) -> None:
    # 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)), u = sqrt(2/pi) x (1 + 0.044715 x^2): NumPy's float32 exp
    # costs 1.7 ns an element against tanh's 2.7; in place, block by block for float32 NumPy arrays
    if xp is not np or out.dtype != np.float32 or not (x.flags.c_contiguous and out.flags.c_contiguous):
        out[...] = 0.5 * x * (1.0 + xp.tanh(_GELU_TANH_SCALE * (0.044715 * x * x * x + x)))
        return
    source, target = x.reshape(-1), out.reshape(-1)
    work = np.empty(min(BLOCK, source.size), np.float32)
    for start in range(0, source.size, BLOCK):
        v, t = source[start : start + BLOCK], work[: min(BLOCK, source.size - start)]
        np.multiply(v, v, out=t)
        np.multiply(t, -2.0 * 0.044715 * _GELU_TANH_SCALE, out=t)
        np.add(t, -2.0 * _GELU_TANH_SCALE, out=t)
        np.multiply(t, v, out=t)  # -2u
        np.minimum(t, _EXP_CEILING, out=t)
        np.exp(t, out=t)
        np.add(t, 1.0, out=t)
        np.divide(v, t, out=target[start : start + BLOCK])


_KERNELS: dict[str, Kernel] = {
    "RELU": _relu,
    "SIGMOID": _sigmoid,
    "TANH": _tanh,
    "LEAKY_RELU": _leaky_relu,
    "ELU": _elu,
    "SELU": _selu,
    "SOFTSIGN": _softsign,
    "SOFTPLUS": _softplus,
    "CLIP": _clip,
    "HARD_SIGMOID": _hard_sigmoid,
    "HARD_SWISH": _hard_swish,
    "SCALED_TANH": _scaled_tanh,
    "THRESHOLDED_RELU": _thresholded_relu,
    "GELU_ERF": _gelu_erf,
    "GELU_TANH": _gelu_tanh,
}


def activation_kernel(name: str) -> Kernel:
    """The in-place kernel ``kernel(xp, x, out, alpha, beta)`` of an activation type name (e.g. ``"SIGMOID"``)."""
    if name not in _KERNELS:
        raise NetworkError(f"activation: unknown type {name!r}; valid: {', '.join(_KERNELS)}")
    return _KERNELS[name]


_RELU_TYPES = FLOAT_TYPES | {DataType.INT32, DataType.INT64}


@register_operator
class ActivationOperator(SameShape, TorchOperator):
    """``out = f(x)``; params: ``type`` (an ActivationType name), ``alpha``, ``beta`` (floats)."""

    kind = "activation"
    type: str = param(choices=_KERNELS)
    alpha: float = param(float, default=0.0)
    beta: float = param(float, default=0.0)

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 1)
        allowed = _RELU_TYPES if self.type == "RELU" else FLOAT_TYPES
        expect_type(self, input_types[0], allowed, f"activation {self.type}")
        return [input_types[0]]

    def torch_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """FLOAT, for the types in ``torch_cpu_kernels.ACTIVATIONS`` (on the CPU not those of ``NUMPY_AS_FAST``)."""
        if self.xp is np and self.type in NUMPY_AS_FAST:  # (no torch import for them)
            return False
        return self.type in TORCH_ACTIVATIONS and super().torch_supports(types, shapes, constant)

    def direct_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """The types oneDNN's eltwise primitive computes as PyTorch does (``onednn.STANDALONE_ACTIVATIONS``)."""
        return self.type in onednn.STANDALONE_ACTIVATIONS

    def direct_kernel(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> TorchKernel | None:
        """oneDNN's eltwise primitive called directly (``ops/onednn_elementwise.py``)."""
        if self.type not in onednn.STANDALONE_ACTIVATIONS:
            return None
        name, alpha, beta = onednn.ACTIVATIONS[self.type](self.alpha, self.beta)
        return eltwise_onednn(name, alpha, beta, inputs[0], outputs[0])

    def torch_kernel(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> TorchKernel | None:
        if self.type not in TORCH_ACTIVATIONS:
            return None
        return torch_activation(self.type, self.alpha, self.beta, inputs[0], outputs[0])

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x = inputs[0]
        if x.dtype == np.float16 and self.type != "RELU":
            x = x.astype(np.float32)
        _KERNELS[self.type](xp, x, outputs[0], self.alpha, self.beta)
