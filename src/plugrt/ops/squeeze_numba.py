"""Squeeze-and-excitation blocks of channels-last runs as a Numba-compiled loop (the optional extra
``plugrt[numba]``, see :mod:`plugrt.ops.depthwise_numba`).

In a channels-last run (tactic ``torch-nhwc``) an SE block (``ops/squeeze_excitation.py``) whose activations the
loop computes (:data:`~plugrt.ops.depthwise_numba.ACTIVATION_CODES`: ReLU and hard-sigmoid as PP-LCNet's and
MobileNetV3's blocks have them) runs as one compiled loop (``ops/squeeze_numba_loops.py``): ~4 us a block on
PP-OCR cls's, against 15-19 us for torch's mean, two products and broadcast product (each a call with its own
setup; docs/benchmarks.md, "Depthwise convolutions as compiled loops"). Other blocks, or numba absent or turned
off (``PLUGRT_NUMBA``), keep torch's kernel. Results: the NumPy kernel's within float32 rounding (the mean sums
in pixel order, NumPy's pairwise).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..core.types import TensorFormat
from .depthwise_numba import ACTIVATION_CODES, compiled_module, source_pixels
from .hand_over import hand_over

__all__ = ["squeeze_excitation_channels_last"]


def squeeze_excitation_channels_last(
    acts: Sequence[tuple[str, float, float]],
    weights: tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray | None],
    x: np.ndarray,
    out: np.ndarray,
    formats: Sequence[TensorFormat],
) -> Callable[[], None] | None:
    """The compiled SE block between channels-last (HWC) tensors: ``acts`` the two activations (type, alpha,
    beta), ``weights`` ``(w1 [C, M], b1 [M] or None, w2 [M, C], b2 [C] or None)``; reads the input's hand-over
    slot when it holds a tensor and writes the output's buffer (its slot emptied). None where it does not apply
    (numba unavailable, a LINEAR input or output, an activation the loop does not compute, not FLOAT, empty)."""
    if formats[0] != TensorFormat.HWC or formats[-1] != TensorFormat.HWC or x.ndim != 4 or x.shape != out.shape:
        return None
    if x.dtype != np.float32 or out.dtype != np.float32 or x.size == 0:
        return None
    if any(name not in ACTIVATION_CODES for name, _, _ in acts):
        return None
    module = compiled_module("squeeze_numba_loops")
    if module is None:
        return None
    w1, b1, w2, b2 = weights
    channels, squeezed = w1.shape
    if x.shape[-1] != channels:
        return None
    loop = module.loop_for(ACTIVATION_CODES[acts[0][0]], ACTIVATION_CODES[acts[1][0]])
    first = np.ascontiguousarray(w1, np.float32)
    second = np.ascontiguousarray(w2, np.float32)
    bias1 = np.zeros(squeezed, np.float32) if b1 is None else np.ascontiguousarray(b1, np.float32)
    bias2 = np.zeros(channels, np.float32) if b2 is None else np.ascontiguousarray(b2, np.float32)
    pooled, hidden, scale = (np.empty(k, np.float32) for k in (channels, squeezed, channels))
    alphas = np.array([acts[0][1], acts[1][1]], np.float32)
    betas = np.array([acts[0][2], acts[1][2]], np.float32)
    given, handed = hand_over(x), hand_over(out)

    def run() -> None:
        loop(source_pixels(given.tensor, x), first, bias1, second, bias2, out, pooled, hidden, scale, alphas, betas)
        handed.tensor = None  # the buffer holds the result

    return run

