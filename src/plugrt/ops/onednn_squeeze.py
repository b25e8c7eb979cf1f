"""Squeeze-and-excitation blocks on the CPU as oneDNN's primitives called directly (:mod:`.onednn`).

``out = x * act2(W2 act1(W1 mean(x) + b1) + b2)`` as four primitives made at bind: the mean as a global AVERAGE
pooling (:func:`~.onednn_pooling.global_pooling_onednn`), the two products with their biases and activations as
post-ops (:func:`~.onednn_matmul.product_onednn`), and the broadcast multiply as a binary primitive that reads the
input and writes the output in their own layouts (channels-last in a channels-last run, LINEAR otherwise). It is the
block's kernel in the operator's second tactic before the compiled loop and PyTorch's: PP-OCR's models then need
neither numba nor torch for their SE blocks. The activations are oneDNN's post-ops, as a convolution's (a ReLU or
hard-sigmoid of a NaN gives a number there).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.types import TensorFormat
from . import onednn
from .onednn_buffers import AXES, bound_run, fit, one_layout
from .onednn_matmul import product_onednn
from .onednn_pooling import global_pooling_onednn
from .torch_cpu import Kernel

__all__ = ["squeeze_excitation_onednn"]

#: ``dnnl_binary_mul``
_BINARY_MUL = 0x1FFF1


def squeeze_excitation_onednn(
    acts: Sequence[tuple[str, float, float]],
    weights: tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray | None],
    x: np.ndarray,
    out: np.ndarray,
    formats: Sequence[TensorFormat],
) -> Kernel | None:
    """The block over ``[N, C, H, W]`` buffers stored as ``formats`` (the input's and the output's, HWC or LINEAR):
    ``acts`` the two activations (type, alpha, beta), ``weights`` ``(w1 [C, M], b1 [M] or None, w2 [M, C], b2 [C]
    or None)``. None where it does not apply (the library absent, another rank or type, an activation oneDNN has no
    post-op for, empty tensors)."""
    lib = onednn.library()
    steps = [onednn.activation_steps(*act) for act in acts]
    if lib is None or any(s is None for s in steps) or x.ndim != 4 or not fit([x, out], formats):
        return None
    n, c, h, w = (int(x.shape[a]) for a in AXES[formats[0]])
    if [int(out.shape[a]) for a in AXES[formats[-1]]] != [n, c, h, w] or weights[0].shape[0] != c:
        return None
    w1, b1, w2, b2 = (None if a is None else np.ascontiguousarray(a, np.float32) for a in weights)
    assert w1 is not None and w2 is not None
    pooled = np.empty((n, c, 1, 1), np.float32)
    hidden = np.empty((n, w1.shape[1]), np.float32)
    scale = np.empty((n, c, 1, 1), np.float32)
    squeeze = global_pooling_onednn("AVERAGE", x, pooled, [formats[0], TensorFormat.LINEAR])
    first = product_onednn(pooled.reshape(n, c), w1, False, b1, hidden, steps[0] or ())
    second = product_onednn(hidden, w2, False, b2, scale.reshape(n, c), steps[1] or ())
    excite = _broadcast_multiply(lib, x, scale, out, formats)
    if squeeze is None or first is None or second is None or excite is None:
        return None
    parts = (squeeze, first, second, excite)

    def run() -> None:
        for part in parts:
            part()

    return run


def _broadcast_multiply(
    lib: Any, x: np.ndarray, scale: np.ndarray, out: np.ndarray, formats: Sequence[TensorFormat]
) -> Kernel | None:
    """``out = x * scale`` (``scale`` ``[N, C, 1, 1]``) as a binary primitive on the buffers in their layouts (where
    they differ, the LINEAR one staged channels-last: oneDNN's binary has only its reference kernel across layouts)."""
    shape = [int(x.shape[a]) for a in AXES[formats[0]]]
    try:
        factor = onednn.Desc(lib, scale.shape, [scale.shape[1], 1, 1, 1])
        [(source, before)], (target, after) = one_layout(lib, [(x, formats[0], shape)], out, formats[-1], shape)
        multiplier = onednn.Memory(lib, factor, scale.ctypes.data, hold=scale)
    except onednn.OneDnnError:
        return None

    def make(pd: Any, attr: Any) -> int:
        status: int = lib.dll.dnnl_binary_primitive_desc_create(
            pd, lib.engine, _BINARY_MUL, source.desc, factor.handle, target.desc, attr
        )
        return status

    args = [(onednn.ARG_SRC, source), (onednn.ARG_SRC_1, multiplier), (onednn.ARG_DST, target)]
    return bound_run(lib, make, float(x.size), args, out, formats[-1], [(x, formats[0], source, before)], [after])
