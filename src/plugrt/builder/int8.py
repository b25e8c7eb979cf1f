"""The builder's INT8 choice: which layers run in INT8 and with which scales (TensorRT's implicit INT8).

With ``BuilderFlag.INT8`` set, a convolution (with constant kernel), a Gemm (with constant B)
or a matrix multiply runs in INT8 when the scales of the tensors it reads as INT8 are known:
from ``ITensor.set_dynamic_range`` (which wins) or from the config's ``int8_calibrator``. A
tensor's scale is ``max(|min|, |max|) / 127``. Its output is requantized to INT8 (stored INT8,
declared FLOAT) when its scale is known and every reader takes INT8 too; otherwise the epilogue
dequantizes to FLOAT. Other layers run in FLOAT; the builder's reformat layers convert
between the types with the tensor's scale (see :mod:`plugrt.ops.int8`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..ops.base import Operator
from ..ops.int8 import Int8ConvolutionOperator, Int8GemmOperator, Int8MatrixMultiplyOperator, quantize_weights

__all__ = ["INT8_KINDS", "int8_operator", "int8_positions", "range_scale", "tensor_scale"]

#: The operator kinds that have an INT8 kernel, and the positions of the inputs they read as INT8.
INT8_KINDS: dict[str, tuple[int, ...]] = {"convolution": (0,), "gemm": (0,), "matrix_multiply": (0, 1)}


def range_scale(low: float, high: float) -> float:
    """The symmetric INT8 scale of the range ``[low, high]``."""
    return max(abs(float(low)), abs(float(high))) / 127.0


def tensor_scale(tensor: Any, calibrated: Mapping[str, float]) -> float | None:
    """The scale of ``tensor``: its dynamic range, else its calibrated amax; None if neither is known
    (or the range is empty)."""
    if tensor is None:
        return None
    if tensor.dynamic_range is not None:
        scale = range_scale(*tensor.dynamic_range)
    elif tensor.name in calibrated:
        scale = float(calibrated[tensor.name]) / 127.0
    else:
        return None
    return scale if scale > 0 and np.isfinite(scale) else None


def int8_positions(op: Operator, num_inputs: int) -> tuple[int, ...] | None:
    """The inputs ``op`` would read as INT8, or None when it has no INT8 kernel for these inputs."""
    positions = INT8_KINDS.get(op.kind)
    if positions is None:
        return None
    if op.kind == "convolution" and ("kernel" not in op.weights or num_inputs != 1):
        return None
    if op.kind == "gemm":
        has_c = bool(op.params.get("has_c", "c" in op.weights))
        if "b" not in op.weights or num_inputs != 1 or op.params.get("trans_a") or (has_c and "c" not in op.weights):
            return None
    if op.kind == "matrix_multiply" and (op.params.get("bias") or num_inputs != 2):
        return None
    return positions


def int8_operator(op: Operator, scales: Sequence[float | None], output_scale: float | None) -> Operator | None:
    """The INT8 form of ``op`` given its inputs' scales (None: unknown), or None when it has none.

    ``output_scale`` (None: FLOAT output) asks for an INT8 output requantized with that scale.
    """
    positions = int8_positions(op, len(scales))
    if positions is None or any(scales[p] is None for p in positions):
        return None
    params = {**op.params, "input_scale": float(scales[0] or 0.0), "output_scale": float(output_scale or 0.0)}
    new: Operator
    if op.kind == "convolution":
        packed = op.weights["kernel"]
        q, weight_scales = quantize_weights(packed.reshape(-1, packed.shape[-1]), axis=0)
        weights = {"kernel": q.reshape(packed.shape), "weight_scales": weight_scales}
        if "bias" in op.weights:
            weights["bias"] = op.weights["bias"]
        params.pop("uniform_kernel", None)
        new = Int8ConvolutionOperator(params, weights)
    elif op.kind == "gemm":
        b = np.asarray(op.weights["b"], dtype=np.float32)
        if op.params.get("trans_b"):
            b = b.T
        q, weight_scales = quantize_weights(b, axis=1)
        weights = {"b": np.ascontiguousarray(q), "weight_scales": weight_scales}
        if "c" in op.weights:
            weights["c"] = op.weights["c"]
        for key in ("trans_a", "trans_b", "uniform_b"):
            params.pop(key, None)
        new = Int8GemmOperator(params, weights)
    else:
        params["other_scale"] = float(scales[1] or 0.0)
        new = Int8MatrixMultiplyOperator(params, {})
    new.name = op.name
    return new
