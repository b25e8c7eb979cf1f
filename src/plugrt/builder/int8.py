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
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.errors import PlugrtError
from ..core.logger import Severity
from ..network.layer import ILayer, IPluginV2Layer, IPluginV3Layer
from ..network.tensor import ITensor
from ..ops.base import Operator
from ..ops.int8 import Int8ConvolutionOperator, Int8GemmOperator, Int8MatrixMultiplyOperator, quantize_weights

if TYPE_CHECKING:
    from .state import BuildState

__all__ = ["INT8_KINDS", "int8_form", "int8_operator", "int8_positions", "range_scale", "tensor_scale"]

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


def _readers(state: BuildState, tensor: ITensor) -> list[ILayer]:
    if state.readers is None:
        state.readers = {}
        for i in range(state.network.num_layers):
            layer = state.network.get_layer(i)
            for t in layer._inputs:
                if t is not None:
                    state.readers.setdefault(id(t), []).append(layer)
    return state.readers.get(id(tensor), [])


def _reads_int8(layer: ILayer, tensor: ITensor, calibrated: Mapping[str, float]) -> bool:
    """Whether standard ``layer`` will read ``tensor`` as INT8 (an INT8 kernel with all its scales)."""
    if isinstance(layer, (IPluginV2Layer, IPluginV3Layer)):
        return False
    try:
        op = layer.to_operator()
    except PlugrtError:
        return False
    positions = int8_positions(op, len(layer._inputs))
    if positions is None:
        return False
    scales = [tensor_scale(t, calibrated) for t in layer._inputs]
    return all(scales[p] is not None for p in positions) and any(layer._inputs[p] is tensor for p in positions)


def int8_form(
    state: BuildState, layer: ILayer, op: Operator, sources: list[int]
) -> tuple[Operator, tuple[int, ...], float | None]:
    """(operator, inputs read as INT8, output scale or None) for ``layer``: its INT8 form where it has one."""
    if not state.int8 or layer.num_outputs != 1 or int8_positions(op, len(sources)) is None:
        return op, (), None
    out = layer.get_output(0)
    out_scale = tensor_scale(out, state.calibrated)
    readers = _readers(state, out)
    if out.is_network_output or not readers or not all(_reads_int8(r, out, state.calibrated) for r in readers):
        out_scale = None
    new = int8_operator(op, [state.scales.get(s) for s in sources], out_scale)
    if new is None:
        return op, (), None
    state.logger.emit(
        Severity.VERBOSE,
        f"layer {layer.name!r} runs in INT8 ({new.kind}, output {'INT8' if out_scale else 'FLOAT'})",
    )
    return new, int8_positions(op, len(sources)) or (), out_scale
