"""Explicit quantization: the products that Q/DQ pairs put in INT8 (TensorRT's explicit-quantization mode).

A network from a quantized ONNX export computes ``Conv(DequantizeLinear(x_q), DequantizeLinear(w_q))``
where ``x_q`` is an INT8 tensor (usually a ``QuantizeLinear`` output) and ``w_q`` an INT8 constant.
As TensorRT does when it meets Q/DQ layers (no builder flag needed), the builder runs such a
convolution, Gemm or matrix multiply on the INT8 values themselves with the INT8 kernels of
:mod:`plugrt.ops.int8`: exact INT32 sums, then ``acc * x_scale * w_scale + bias`` in FLOAT.
The dequantize layers only the rewritten products read are not built.

What qualifies (anything else keeps computing in FLOAT between the DQ and the next Q):

* the activation: ``dequantize`` of an INT8 tensor with one constant FLOAT scale;
* the weights: ``dequantize`` of an INT8 constant with a constant FLOAT scale per tensor or per
  output channel (axis 0 of a Conv kernel, the N axis of Gemm's B, the last axis of MatMul's B);
  a matrix multiply may instead read two activations;
* a bias that is constant (a constant, or the ``dequantize`` of one, computed here by the
  ``dequantize`` kernel).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.errors import PlugrtError
from ..core.logger import ILogger, Severity
from ..core.types import DataType
from ..network.layer import ILayer
from ..network.operator_layer import IOperatorLayer
from ..network.standard_layers import IConstantLayer
from ..network.tensor import ITensor
from ..ops.base import Operator
from ..ops.conv import pack_conv_kernel
from ..ops.int8 import Int8ConvolutionOperator, Int8GemmOperator, Int8MatrixMultiplyOperator
from ..ops.quantize import DequantizeOperator

__all__ = ["ExplicitInt8", "explicit_int8"]


@dataclass
class _Dequantized:
    """``dequantize(source, scale)`` with a constant FLOAT scale (``axis``: None per tensor)."""

    source: ITensor
    scale: np.ndarray
    axis: int | None


@dataclass
class ExplicitInt8:
    """The layers Q/DQ pairs put in INT8: ``id(layer) -> (INT8 operator, the tensors it reads)``,
    and the layers no longer needed (``skipped``)."""

    rewrites: dict[int, tuple[Operator, list[ITensor]]] = field(default_factory=dict)
    skipped: set[int] = field(default_factory=set)

    def form(self, layer: ILayer, op: Operator) -> tuple[Operator, list[Any]]:
        """The operator ``layer`` runs and the tensors it reads: its INT8 form, else ``op`` and its inputs."""
        rewrite = self.rewrites.get(id(layer))
        if rewrite is None:
            return op, list(layer._inputs)
        new, tensors = rewrite
        new.name = layer.name
        return new, tensors


def explicit_int8(order: Sequence[ILayer], outputs: Sequence[ITensor], logger: ILogger | None = None) -> ExplicitInt8:
    """Find the Q/DQ products among ``order`` (producers first) and the layers they make unneeded."""
    found = ExplicitInt8()
    for layer in order:
        rewrite = _rewrite(layer)
        if rewrite is not None:
            found.rewrites[id(layer)] = rewrite
            if logger is not None:
                logger.emit(
                    Severity.VERBOSE, f"layer {layer.name!r} runs in INT8 ({rewrite[0].kind}, from its Q/DQ inputs)"
                )
    if not found.rewrites:
        return found
    needed = {id(t.producer) for t in outputs if t.producer is not None}
    for layer in reversed(order):
        if id(layer) not in needed:
            found.skipped.add(id(layer))
            continue
        reads = found.rewrites[id(layer)][1] if id(layer) in found.rewrites else list(layer._inputs)
        for tensor in [*reads, *getattr(layer, "shape_inputs", [])]:
            if tensor is not None and tensor.producer is not None:
                needed.add(id(tensor.producer))
    return found


# --- what the products read ------------------------------------------------------------------
def _producer_op(tensor: ITensor | None, kind: str) -> tuple[IOperatorLayer, Operator] | None:
    layer = tensor.producer if tensor is not None else None
    if not isinstance(layer, IOperatorLayer) or layer.kind != kind:
        return None
    try:
        return layer, layer.to_operator()
    except PlugrtError:
        return None


def constant_of(tensor: ITensor | None) -> np.ndarray | None:
    """The value of ``tensor`` when it is a constant or the ``dequantize`` of constants, else None."""
    layer = tensor.producer if tensor is not None else None
    if isinstance(layer, IConstantLayer):
        return np.asarray(layer.weights.numpy()).reshape(tuple(layer.shape))
    found = _producer_op(tensor, "dequantize")
    if found is None:
        return None
    inputs = found[0]._inputs
    x, scale = (constant_of(inputs[0]), constant_of(inputs[1])) if len(inputs) == 2 else (None, None)
    if x is None or scale is None:
        return None
    out = np.empty(x.shape, dtype=scale.dtype)
    DequantizeOperator(found[1].params).run([x, scale], [out])
    return out


def _holds_int8(tensor: ITensor) -> bool:
    """Whether ``tensor`` is INT8 as the network declares it: an INT8 network input, an INT8 constant or a
    ``quantize`` to int8 (other layers' types are known only once built)."""
    layer = tensor.producer
    if layer is None:
        return tensor.dtype == DataType.INT8
    if isinstance(layer, IConstantLayer):
        return bool(layer.weights.numpy().dtype == np.int8)
    found = _producer_op(tensor, "quantize")
    return found is not None and found[1].params.get("to") == "int8"


def _dequantized(tensor: ITensor | None) -> _Dequantized | None:
    """``tensor`` as the dequantize of INT8 values with a constant FLOAT scale, or None."""
    found = _producer_op(tensor, "dequantize")
    if found is None or int(found[1].params.get("block_size", 0)):
        return None
    source, scale_tensor = found[0]._inputs
    scale = constant_of(scale_tensor)
    if source is None or not _holds_int8(source) or scale is None or scale.dtype != np.float32:
        return None
    if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
        return None
    axis = None if scale.size == 1 else int(found[1].params.get("axis", 1))
    return _Dequantized(source, scale.reshape(-1), axis)


def _activation_scale(tensor: ITensor | None) -> tuple[ITensor, float] | None:
    """(the INT8 tensor, its one scale) of a per-tensor dequantized activation."""
    found = _dequantized(tensor)
    if found is None or found.axis is not None:
        return None
    return found.source, float(found.scale[0])


@dataclass
class _Weights:
    """Dequantized constant weights: the INT8 tensor, its values and one FLOAT scale per channel."""

    source: ITensor
    values: np.ndarray
    scales: np.ndarray


def _weights(tensor: ITensor | None, axis: int) -> _Weights | None:
    """``tensor`` as dequantized INT8 constant weights with one scale per tensor or per index of ``axis``."""
    found = _dequantized(tensor)
    if found is None:
        return None
    values = constant_of(found.source)
    if values is None or values.dtype != np.int8 or not -values.ndim <= axis < values.ndim:
        return None
    axis %= values.ndim
    channels = values.shape[axis]
    if found.axis is not None and (found.axis % values.ndim != axis or found.scale.size != channels):
        return None
    return _Weights(found.source, values, np.broadcast_to(found.scale, (channels,)).astype(np.float32))


def _bias(op: Operator, inputs: Sequence[ITensor | None], key: str, flag: str, index: int) -> np.ndarray | None:
    """The constant bias weight ``key`` (``op``'s own, else input ``index``'s value); an empty array without one."""
    if key in op.weights:
        return np.asarray(op.weights[key], dtype=np.float32)
    if not op.params.get(flag, False):
        return np.zeros(0, np.float32)
    value = constant_of(inputs[index]) if len(inputs) > index else None
    return None if value is None else np.asarray(value, dtype=np.float32)


# --- the products ----------------------------------------------------------------------------
def _rewrite(layer: ILayer) -> tuple[Operator, list[ITensor]] | None:
    inputs = list(layer._inputs)
    if len(inputs) < 2 or not any(_producer_op(t, "dequantize") for t in inputs[:2]):
        return None
    try:
        op = layer.to_operator()
    except PlugrtError:
        return None
    if op.kind == "convolution":
        return _convolution(op, inputs)
    if op.kind == "gemm":
        return _gemm(op, inputs)
    if op.kind == "matrix_multiply":
        return _matrix_multiply(op, inputs)
    return None


def _convolution(op: Operator, inputs: list[ITensor | None]) -> tuple[Operator, list[ITensor]] | None:
    activation = _activation_scale(inputs[0])
    weights = _weights(inputs[1], 0) if "kernel" not in op.weights else None
    bias = _bias(op, inputs, "bias", "has_bias", 2)
    if activation is None or weights is None or bias is None or op.params.get("activation"):
        return None
    params = {k: v for k, v in op.params.items() if k not in ("uniform_kernel", "has_bias")}
    params.update(input_scale=activation[1], output_scale=0.0, has_bias=bias.size > 0)
    kernel = pack_conv_kernel(weights.values, int(op.params.get("group", 1))).astype(np.int8)
    packed = {"kernel": kernel, "weight_scales": weights.scales}
    if bias.size:
        packed["bias"] = bias.reshape(-1)
    return Int8ConvolutionOperator(params, packed), [activation[0]]


def _gemm(op: Operator, inputs: list[ITensor | None]) -> tuple[Operator, list[ITensor]] | None:
    if op.params.get("trans_a") or "b" in op.weights:
        return None
    activation = _activation_scale(inputs[0])
    trans_b = bool(op.params.get("trans_b"))
    weights = _weights(inputs[1], 0 if trans_b else 1)
    c = _bias(op, inputs, "c", "has_c", 2)
    if activation is None or weights is None or weights.values.ndim != 2 or c is None:
        return None
    b = np.ascontiguousarray(weights.values.T if trans_b else weights.values)
    packed = {"b": b, "weight_scales": weights.scales * np.float32(op.params.get("alpha", 1.0))}
    if c.size:
        packed["c"] = c if "c" in op.weights else c * np.float32(op.params.get("beta", 1.0))
    params = {"input_scale": activation[1], "output_scale": 0.0, "has_c": c.size > 0}
    return Int8GemmOperator(params, packed), [activation[0]]


def _matrix_multiply(op: Operator, inputs: list[ITensor | None]) -> tuple[Operator, list[ITensor]] | None:
    if op.params.get("bias") or len(inputs) != 2:
        return None
    first, second = _activation_scale(inputs[0]), _activation_scale(inputs[1])
    params = {**op.params, "output_scale": 0.0}
    if first is None:
        return None
    if second is not None:
        params.update(input_scale=first[1], other_scale=second[1])
        return Int8MatrixMultiplyOperator(params, {}), [first[0], second[0]]
    weights = _weights(inputs[1], -1)  # constant weights with one scale per column of b
    if weights is None or op.params.get("op1") != "NONE":
        return None
    params.update(input_scale=first[1])
    return Int8MatrixMultiplyOperator(params, {"other_scales": weights.scales}), [first[0], weights.source]
