"""Depthwise convolutions of channels-last runs as Numba-compiled loops (the optional extra ``plugrt[numba]``).

In a channels-last run (tactic ``torch-nhwc``, ``ops/torch_channels_last.py``) a depthwise convolution
(group == input channels) whose work is under :data:`NUMBA_MAX_MACS` runs as a compiled loop over its pixels,
vectorised over the channels (``ops/depthwise_numba_loops.py``), instead of oneDNN's convolution: oneDNN's call
through torch costs ~20 us above its kernel whatever its size, the compiled loop ~1 us; oneDNN's kernel is the
faster one on large maps (MobileNetV2's 112 x 112 and 56 x 56 layers; docs/benchmarks.md, "Depthwise
convolutions as compiled loops"). The builder times the channels-last tactic with this kernel in it, as it runs.

Numba is optional: it is imported at the first depthwise layer that could use it, never at ``import plugrt``;
where it is absent, fails to import, or ``PLUGRT_NUMBA`` turns it off (``0``, ``off``, ``false``, ``no``), the
layer runs oneDNN's kernel, and without torch the NumPy kernel. The loops are compiled once per kernel size
and cached on disk (numba's ``cache=True``, beside the module or in numba's cache directory). Results are the
NumPy tap-sum kernel's bit for bit up to the sign of a zero (bias and the fused activations RELU, CLIP,
HARD_SWISH, HARD_SIGMOID and LEAKY_RELU inside the loop); a residual, other activations and the scalar map
after it run as the NumPy epilogue does, in place on the output.
"""

from __future__ import annotations

import importlib
import math
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.types import TensorFormat
from .hand_over import hand_over

if TYPE_CHECKING:
    from .conv import ConvolutionOperator

__all__ = [
    "ACTIVATION_CODES",
    "ENV_SWITCH",
    "NUMBA_MAX_MACS",
    "available",
    "compiled_module",
    "depthwise_channels_last",
    "loops",
    "source_pixels",
]

#: the environment variable that turns the compiled loops off ("0", "off", "false", "no")
ENV_SWITCH = "PLUGRT_NUMBA"
_OFF = ("0", "off", "false", "no")
#: depthwise layers with at most this many multiply-adds take the compiled loop; larger ones keep oneDNN's kernel
#: (measured one thread, each alone, us a call: MobileNetV2's 14 x 14 x 576 3x3, 1.0 M, 49 against 54; its
#: 28 x 28 x 192, 1.35 M, 73 against 62; 56 x 56 x 144, 4.1 M, 195 against 132; docs/benchmarks.md)
NUMBA_MAX_MACS = 1_200_000
#: fused activations the loop computes itself, by the code it takes (0: none)
ACTIVATION_CODES = {"": 0, "RELU": 1, "CLIP": 2, "HARD_SWISH": 3, "HARD_SIGMOID": 4, "LEAKY_RELU": 5}

_STATE: dict[str, Any] = {"module": None, "tried": False}
#: the other modules of compiled loops, by name (None: numba absent), imported on first use
_MODULES: dict[str, Any] = {}


def loops() -> Any:
    """The module of compiled loops (``depthwise_numba_loops``), imported on first use; None where numba is
    not installed or fails to import."""
    if not _STATE["tried"]:
        _STATE["tried"] = True
        try:
            _STATE["module"] = importlib.import_module(".depthwise_numba_loops", __package__)
        except Exception:
            _STATE["module"] = None
    return _STATE["module"]


def compiled_module(name: str) -> Any:
    """The module of compiled loops ``name`` of this package (``squeeze_numba_loops``, ...), imported on first use
    where :func:`available`; None otherwise."""
    if not available():
        return None
    if name not in _MODULES:
        try:
            _MODULES[name] = importlib.import_module(f".{name}", __package__)
        except Exception:
            _MODULES[name] = None
    return _MODULES[name]


def available() -> bool:
    """True when the compiled loops can run: numba imports and ``PLUGRT_NUMBA`` does not turn them off."""
    if os.environ.get(ENV_SWITCH, "1").strip().lower() in _OFF:
        return False
    return loops() is not None


def depthwise_channels_last(
    op: ConvolutionOperator,
    x: np.ndarray,
    out: np.ndarray,
    residual: np.ndarray | None,
    formats: Sequence[TensorFormat],
) -> Callable[[], None] | None:
    """The compiled loop of a 2-D depthwise convolution between channels-last (HWC) tensors, bias and epilogue
    included, reading the input's hand-over slot when it holds a tensor and writing the output's buffer (its
    slot emptied). None where it does not apply (numba unavailable, not depthwise, a LINEAR input or output, the
    kernel not a FLOAT weight, empty tensors, more than :data:`NUMBA_MAX_MACS` multiply-adds): the caller's other
    kernel runs."""
    w = op.window
    if w.rank != 2 or op.group != x.shape[-1] or op.uniform or "kernel" not in op.weights:
        return None
    if formats[0] != TensorFormat.HWC or formats[-1] != TensorFormat.HWC or x.ndim != 4 or out.ndim != 4:
        return None
    if x.dtype != np.float32 or out.dtype != np.float32 or x.size == 0 or out.size == 0:
        return None
    kernel = np.asarray(op.weights["kernel"])
    if kernel.dtype != np.float32 or op.maps % op.group or op.maps != out.shape[-1]:
        return None
    if out.size * math.prod(w.kernel) > NUMBA_MAX_MACS or not available():
        return None
    sizes, begins, _ = w.resolve(x.shape[1:3])
    if tuple(sizes) != tuple(out.shape[1:3]):
        return None
    # [C, multiplier, taps] (the packed [C, multiplier, taps] kernel) as [KH, KW, C * multiplier]
    taps = np.ascontiguousarray(kernel.reshape(op.maps, -1).T).reshape(*w.kernel, op.maps)
    bias = np.zeros(op.maps, np.float32)
    if "bias" in op.weights:
        bias = np.ascontiguousarray(np.asarray(op.weights["bias"], np.float32).reshape(-1))
    geometry = np.array([*w.strides, *w.dilations, *begins], np.int64)
    fused = op.activation in ACTIVATION_CODES and residual is None
    act = ACTIVATION_CODES[op.activation] if fused else 0
    low, high = (np.float32(v) for v in op.activation_range)
    loop = loops().loops_for(*w.kernel, act)
    acc = np.empty((out.shape[2], op.maps), np.float32)
    rows = out.shape[0] * out.shape[1]
    given, handed = hand_over(x), hand_over(out)
    linear_out = out.transpose(0, 3, 1, 2)  # the logical [N, M, OH, OW] view of the output, for the epilogue
    res = None if residual is None else _logical(residual, formats[1])
    given_residual = hand_over(residual) if residual is not None and formats[1] == TensorFormat.HWC else None
    scale, shift = op.post_affine
    affine = fused and (scale != 1.0 or shift != 0.0)

    def run() -> None:
        loop(source_pixels(given.tensor, x), taps, bias, out, acc, 0, rows, geometry, low, high)
        handed.tensor = None  # the buffer holds the result
        if not fused:  # the NumPy kernel's epilogue: the residual, the activation, the scalar map
            held = None if given_residual is None else given_residual.tensor
            op._activate(linear_out, np, res if held is None else held.numpy())
        elif affine:
            if scale != 1.0:
                np.multiply(out, scale, out=out)
            if shift != 0.0:
                np.add(out, shift, out=out)

    return run


def _logical(array: np.ndarray, fmt: TensorFormat) -> np.ndarray:
    """``array``'s logical ``[N, C, H, W]`` view (an HWC buffer is stored ``[N, H, W, C]``)."""
    return array.transpose(0, 3, 1, 2) if fmt == TensorFormat.HWC else array


def source_pixels(tensor: Any, buffer: np.ndarray) -> np.ndarray:
    """The input pixels ``[N, H, W, C]``: the handed-over torch tensor's (copied where it is not channels-last
    contiguous), else the buffer's."""
    if tensor is None:
        return buffer
    stored = tensor.permute(0, 2, 3, 1)
    if not stored.is_contiguous():
        stored = stored.contiguous()
    result: np.ndarray = stored.numpy()
    return result
