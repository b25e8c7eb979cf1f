"""Activations, unary functions and normalizations on the CPU as oneDNN's eltwise and layer-normalization
primitives called directly (:mod:`.onednn`).

The tactic's kernels of the activation, unary (``Sqrt``), softmax and normalization operators take these first where the
library is there, so a transformer's GELUs and LayerNorms run without importing torch. A tensor is described as one
dense run of its elements (an activation) or as ``[rows, normalized size]``: a layer normalization's trailing axes, an
instance normalization's channel, a group normalization's group (their per-channel scale and bias applied by NumPy
after the primitive: wav2vec2's first layer, 1 x 512 x 3199, one thread, 0.72 ms against PyTorch's fused group_norm's
0.58). The primitive is made at bind, a run is one execution. GELU's erf form is within 1.1e-6 of float64 (relative to
the value or 1, as PyTorch's kernel), its tanh form within 1.5e-7; one thread, 128 x 3072 elements: 0.18 ms (erf) and
0.25 ms (tanh) against PyTorch's 0.18 and 0.65 ms.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.types import TensorFormat
from . import onednn
from .onednn_buffers import bound_run, dense_strides
from .torch_cpu import Kernel
from .torch_cpu_kernels import ELEMENT_FLOPS

if TYPE_CHECKING:
    from .normalization import NormalizationOperator

__all__ = ["eltwise_onednn", "layer_norm_onednn", "softmax_onednn"]

#: ``dnnl_use_scale`` and ``dnnl_use_shift``; execution arguments ``DNNL_ARG_SCALE`` and ``DNNL_ARG_SHIFT``
_USE_SCALE, _USE_SHIFT, _ARG_SCALE, _ARG_SHIFT = 0x2, 0x4, 51, 52


def _dense(arrays: Sequence[Any]) -> bool:
    return all(isinstance(a, np.ndarray) and a.dtype == np.float32 and a.flags.c_contiguous for a in arrays)


def eltwise_onednn(name: str, alpha: float, beta: float, x: np.ndarray, out: np.ndarray) -> Kernel | None:
    """``out = f(x)`` (``out`` may be ``x``) for eltwise algorithm ``name`` (a key of :data:`~.onednn.ELTWISE`) with its
    two scalars, as one primitive; None where it does not apply (arrays that are not dense FLOAT of one size, an empty
    tensor, the library absent)."""
    lib = onednn.library()
    if lib is None or not _dense([x, out]) or x.size != out.size or not x.size:
        return None
    desc = onednn.Desc(lib, [x.size], [1])
    flops = float(ELEMENT_FLOPS * x.size)

    def make(pd: Any, attr: Any) -> int:
        status: int = lib.dll.dnnl_eltwise_forward_primitive_desc_create(
            pd,
            lib.engine,
            onednn.FORWARD_INFERENCE,
            onednn.ELTWISE[name],
            desc.handle,
            desc.handle,
            ctypes.c_float(alpha),
            ctypes.c_float(beta),
            attr,
        )
        return status

    args = [(onednn.ARG_SRC, x), (onednn.ARG_DST, out)]
    return _bound(lib, make, flops, [(arg, desc, array) for arg, array in args], out)


def softmax_onednn(axis: int, x: np.ndarray, out: np.ndarray) -> Kernel | None:
    """``out = softmax(x)`` over ``axis`` (``out`` may be ``x``) as one softmax primitive; None where it does not apply
    (arrays that are not dense FLOAT of one shape, an empty tensor, the library absent)."""
    lib = onednn.library()
    if lib is None or not _dense([x, out]) or x.shape != out.shape or not x.size or not 0 <= axis < x.ndim:
        return None
    desc = onednn.Desc(lib, x.shape, dense_strides(x.shape))

    def make(pd: Any, attr: Any) -> int:
        status: int = lib.dll.dnnl_softmax_forward_primitive_desc_create(
            pd, lib.engine, onednn.FORWARD_INFERENCE, onednn.SOFTMAX_ACCURATE, desc.handle, desc.handle, axis, attr
        )
        return status

    args = [(onednn.ARG_SRC, desc, x), (onednn.ARG_DST, desc, out)]
    return _bound(lib, make, float(ELEMENT_FLOPS * x.size), args, out)


def layer_norm_onednn(op: NormalizationOperator, inputs: Sequence[Any], out: np.ndarray) -> Kernel | None:
    """Layer normalization over the trailing axes from ``op.axis`` (scale and bias of the normalized shape, weights or
    inputs; leading dimensions of one allowed), or instance or group normalization (one scale and bias per channel), as one layer-normalization
    primitive over rows of the normalized elements (a channel's or a group's for the latter, whose per-channel scale
    and bias NumPy applies after it); None where it does not apply: statistics outputs, a residual, per-group affine
    values, a scale or bias of another shape, arrays that are not dense FLOAT, an empty tensor, the library absent."""
    lib = onednn.library()
    x = inputs[0]
    if lib is None or op.stash or op.residual or not _dense([x, out]) or not x.size:
        return None
    if op.mode == "layer":
        axis = op.axis + x.ndim if op.axis < 0 else op.axis
        affine_shape = tuple(x.shape[axis:])
        rows = x.size // math.prod(affine_shape)
    elif op.mode in ("instance", "group") and not (op.mode == "group" and op.per_group) and x.ndim >= 2:
        affine_shape = (x.shape[1],)
        groups = x.shape[1] if op.mode == "instance" else op.groups
        if groups < 1 or x.shape[1] % groups:
            return None
        rows = x.shape[0] * groups
    else:
        return None
    affine = []
    for name, index, wanted in (("scale", 1, True), ("bias", len(inputs) - 1, op.has_bias)):
        value = (np.asarray(op.weights[name]) if name in op.weights else inputs[index]) if wanted else None
        if value is not None and (value.size != math.prod(affine_shape) or not _dense([value])):
            return None
        if (
            value is not None
            and op.mode == "layer"
            and tuple(value.shape[value.ndim - len(affine_shape) :]) != affine_shape
        ):
            return None  # (leading dimensions of one allowed: PP-OCR's [1, 1, C])
        affine.append(value)
    width = x.size // rows
    data = onednn.Desc(lib, [rows, width], [width, 1])
    vector = onednn.Desc(lib, [width], [1])
    inside = affine if op.mode == "layer" else [None, None]  # (per-channel values: applied after, below)
    flags = (_USE_SCALE if inside[0] is not None else 0) | (_USE_SHIFT if inside[1] is not None else 0)

    def make(pd: Any, attr: Any) -> int:
        status: int = lib.dll.dnnl_layer_normalization_forward_primitive_desc_create(
            pd,
            lib.engine,
            onednn.FORWARD_INFERENCE,
            data.handle,
            data.handle,
            None,
            ctypes.c_float(op.epsilon),
            ctypes.c_uint(flags),
            attr,
        )
        return status

    args = [(onednn.ARG_SRC, data, x), (onednn.ARG_DST, data, out)]
    args += [(arg, vector, value) for arg, value in zip((_ARG_SCALE, _ARG_SHIFT), inside) if value is not None]
    run = _bound(lib, make, float(ELEMENT_FLOPS * x.size), args, out)
    if run is None or op.mode == "layer" or all(value is None for value in affine):
        return run
    channels = out.reshape(out.shape[0], out.shape[1], -1)
    scale, bias = (None if value is None else value.reshape(-1, 1) for value in affine)

    def run_affine() -> None:
        run()
        if scale is not None:
            np.multiply(channels, scale, out=channels)
        if bias is not None:
            np.add(channels, bias, out=channels)

    return run_affine


def _bound(lib: Any, make: Any, flops: float, args: Sequence[tuple[int, onednn.Desc, np.ndarray]], out: Any) -> Any:
    """:func:`~.onednn_buffers.bound_run` over ``args`` given as (argument, descriptor, array); a LINEAR output."""
    try:
        memories = [(arg, onednn.Memory(lib, desc, array.ctypes.data, hold=array)) for arg, desc, array in args]
    except onednn.OneDnnError:
        return None
    return bound_run(lib, make, flops, memories, out, TensorFormat.LINEAR)
