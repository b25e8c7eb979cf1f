"""One generated CUDA kernel per elementwise chain: every step of a ``fused_elementwise`` layer in registers.

The chain's steps (``ops/fused_elementwise.py``) become one expression per element, compiled once
per chain and type by NVRTC through CuPy's ``ElementwiseKernel`` (which keeps the compiled kernel
in its on-disk cache under a hash of the source, so a second build or process does not compile
again). Inputs broadcast to the output's shape as the operator's rule allows; the running value
is FLOAT (HALF inputs are read as FLOAT and the result rounded once), so a chain reads its inputs
once and writes its output once, one launch instead of one per step.

Arithmetic follows the CPU's kernels: the same order of operations, no fused multiply-adds
(``--fmad=false``), NaN propagated by MAX/MIN/RELU/CLIP as NumPy's ``maximum``/``minimum`` do;
transcendental functions are CUDA's (within a few ulp of NumPy's), and HALF chains round once
instead of after every step, so results agree with the CPU within the tests' tolerances, not
bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["ACTIVATION_SOURCE", "CLIP_PREAMBLE", "chain_kernel", "chain_source", "epilogue_module", "literal"]

#: ElementWiseOperation -> C expression of ``a`` and ``b`` (floats)
_BINARY = {
    "SUM": "({a} + {b})",
    "SUB": "({a} - {b})",
    "PROD": "({a} * {b})",
    "DIV": "({a} / {b})",
    "POW": "powf({a}, {b})",
    # NumPy's maximum/minimum: a NaN in either gives NaN
    "MAX": "(({a} > {b} || {a} != {a}) ? {a} : {b})",
    "MIN": "(({a} < {b} || {a} != {a}) ? {a} : {b})",
}
#: UnaryOperation -> C expression of ``v``
_UNARY = {
    "EXP": "expf({v})",
    "LOG": "logf({v})",
    "SQRT": "sqrtf({v})",
    "RECIP": "(1.0f / {v})",
    "ABS": "fabsf({v})",
    "NEG": "(-{v})",
    "SIN": "sinf({v})",
    "COS": "cosf({v})",
    "TAN": "tanf({v})",
    "SINH": "sinhf({v})",
    "COSH": "coshf({v})",
    "ASIN": "asinf({v})",
    "ACOS": "acosf({v})",
    "ATAN": "atanf({v})",
    "ASINH": "asinhf({v})",
    "ACOSH": "acoshf({v})",
    "ATANH": "atanhf({v})",
    "CEIL": "ceilf({v})",
    "FLOOR": "floorf({v})",
    "ERF": "erff({v})",
    "SIGN": "({v} != {v} ? {v} : (float)(({v} > 0.0f) - ({v} < 0.0f)))",
    "ROUND": "rintf({v})",
}
#: ActivationType -> C expression of ``v``, ``A`` (alpha) and ``B`` (beta)
ACTIVATION_SOURCE = {
    "RELU": "({v} < 0.0f ? 0.0f : {v})",
    "SIGMOID": "(1.0f / (1.0f + expf(-fmaxf({v}, -88.0f))))",
    "TANH": "tanhf({v})",
    "LEAKY_RELU": "({v} >= 0.0f ? {v} : {A} * {v})",
    "ELU": "({v} >= 0.0f ? {v} : {A} * expm1f({v}))",
    "SELU": "({B} * ({v} > 0.0f ? {v} : {A} * expf({v}) - {A}))",
    "SOFTSIGN": "({v} / (1.0f + fabsf({v})))",
    "SOFTPLUS": "({A} * (fmaxf({B} * {v}, 0.0f) + log1pf(expf(-fabsf({B} * {v})))))",
    "CLIP": "clip_({v}, {A}, {B})",
    "HARD_SIGMOID": "clip_({A} * {v} + {B}, 0.0f, 1.0f)",
    "HARD_SWISH": "({v} * clip_({v} + 3.0f, 0.0f, 6.0f) / 6.0f)",
    "SCALED_TANH": "({A} * tanhf({B} * {v}))",
    "THRESHOLDED_RELU": "({v} > {A} ? {v} : 0.0f)",
    "GELU_ERF": "(0.5f * {v} * (1.0f + erff({v} * 0.70710678118654752f)))",
    "GELU_TANH": "(0.5f * {v} * (1.0f + tanhf(0.79788456080286536f * ({v} + 0.044715f * {v} * {v} * {v}))))",
}
#: max(low, min(high, x)) as TensorRT's CLIP: NaN stays NaN, low wins where low > high
CLIP_PREAMBLE = """
__device__ __forceinline__ float clip_(float x, float low, float high) {
    float m = x > high ? high : x;
    return m < low ? low : m;
}
"""

#: what the epilogue kernels of other layers share (``ops/conv_epilogue_cuda.py``, ``ops/depthwise_cuda.py``): FLOAT
#: from either type, one rounding back, the 16-byte word of VEC elements, TensorRT's CLIP
_EPILOGUE_PREAMBLE = r"""
#include <cuda_fp16.h>
__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float stored(float v, float) { return v; }
__device__ __forceinline__ __half stored(float v, __half) { return __float2half_rn(v); }
template <typename T, int VEC> struct alignas(sizeof(T) * VEC) Pack { T v[VEC]; };
""" + CLIP_PREAMBLE

_KERNELS: dict[tuple[str, str], Any] = {}
_EPILOGUES: dict[tuple[str, str, float, float], Any] = {}


def epilogue_module(template: str, activation: str | None, alpha: float, beta: float) -> Any:
    """``template`` (CUDA source with ``%(preamble)s`` and ``%(activation)s``, an expression of the FLOAT ``v``)
    as a :class:`~plugrt.backends.cuda.CudaModule` for this activation (None or ``""``: none), made once; None for
    an activation without a CUDA expression (:data:`ACTIVATION_SOURCE`)."""
    from ..backends.cuda import CudaModule

    key = (template, activation or "", alpha, beta)
    module = _EPILOGUES.get(key)
    if module is None:
        if not activation:
            expression = "v"
        elif activation in ACTIVATION_SOURCE:
            expression = ACTIVATION_SOURCE[activation].format(v="v", A=literal(alpha), B=literal(beta))
        else:
            return None
        source = template % {"preamble": _EPILOGUE_PREAMBLE, "activation": expression}
        module = _EPILOGUES[key] = CudaModule(source, options=("--std=c++14", "--fmad=false"))
    return module


def literal(value: float) -> str:
    """``value`` as a C float expression (infinities and NaN included)."""
    if math.isnan(value):
        return "__int_as_float(0x7fc00000)"
    if math.isinf(value):
        return "__int_as_float(0x7f800000)" if value > 0 else "__int_as_float(0xff800000)"
    return f"{float(value)!r}f"


def chain_source(steps: Sequence[dict[str, Any]], inputs: int) -> str | None:
    """The kernel body computing ``out`` from ``in0`` … ``in{inputs-1}`` (None when a step has no CUDA form); a
    step operand is -1 (the running value) or an operand index (the operator resolves its constants to indices)."""
    lines = ["float v = (float)in0;"]
    for step in steps:
        if "binary" in step:
            template = _BINARY.get(step["binary"])
            if template is None:
                return None
            left, right = (("v" if ref == -1 else f"(float)in{ref}") for ref in (step["left"], step["right"]))
            expression = template.format(a=left, b=right)
        elif "unary" in step:
            template = _UNARY.get(step["unary"])
            if template is None:
                return None
            expression = template.format(v="v")
        else:
            template = ACTIVATION_SOURCE.get(step["activation"])
            if template is None:
                return None
            expression = template.format(v="v", A=literal(step["alpha"]), B=literal(step["beta"]))
        lines.append(f"v = {expression};")
    lines.append("out = (T)v;")
    return "\n".join(lines)


def chain_kernel(cp: Any, steps: Sequence[dict[str, Any]], inputs: int, dtype: Any) -> Any:
    """The compiled-on-first-call kernel ``kernel(in0, …, out)`` of a chain for arrays of ``dtype`` (FLOAT or
    HALF), or None when a step has no CUDA form (the operator then runs its steps one by one)."""
    body = chain_source(steps, inputs)
    if body is None or np.dtype(dtype) not in (np.dtype(np.float32), np.dtype(np.float16)):
        return None
    key = (body, np.dtype(dtype).name)
    kernel = _KERNELS.get(key)
    if kernel is None:
        params = ", ".join(f"T in{i}" for i in range(inputs))
        kernel = cp.ElementwiseKernel(
            params, "T out", body, "plugrt_chain", preamble=CLIP_PREAMBLE, options=("--fmad=false",)
        )
        _KERNELS[key] = kernel
    return kernel
