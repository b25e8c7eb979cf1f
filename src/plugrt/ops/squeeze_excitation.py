"""Squeeze-and-excitation (the builder's ``squeeze_excitation`` rule): ``x * f2(W2 f1(W1 mean(x) + b1) + b2)``.

MobileNetV3's and PP-LCNet's SE blocks (PP-OCR's classifier has ten, its detector ten) are
a global average pooling, two 1x1 convolutions on one position each (with their
activations) and a broadcast ``Mul``: five small layers whose per-layer cost is most of
their time. As one operator they are one mean over the spatial positions, two products
of ``[N, C]`` rows, the activations in place and one broadcast multiply.

params: ``activation1`` / ``activation2`` (activation type names, or ``""``), each with
``_alpha`` and ``_beta``. weights: ``kernel1`` (``[M, C]``, the first convolution's packed
kernel as it was), ``bias1`` ``[M]``, ``kernel2`` (``[C, M]``), ``bias2`` ``[C]``; a missing
bias is none. FLOAT (or HALF) input ``[N, C, *spatial]``, the output of its shape and type.

Results are the unfused layers' up to the products' summation order (a few ulp).

With PyTorch installed the block also has a PyTorch kernel on NCHW tensors and on
channels-last ones (tactic ``torch-nhwc``): between channels-last convolutions (a depthwise
one before it, a 1x1 after, as in every SE block) it keeps their run unbroken. There, on the CPU with numba
installed, a block whose activations it computes is one compiled loop (:mod:`plugrt.ops.squeeze_numba`). On a GPU
the PyTorch kernel takes FLOAT and HALF tensors (HALF ones channels-last, as the convolutions around it: no
reorder of the block's input or output; MobileNetV3's fp16 export has nine such blocks).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import ShapeError
from ..core.types import DataType, TensorFormat
from . import onednn
from .activation import activation_kernel
from .base import InputShapes, InputValues, ShapeExprs, register_operator
from .onednn_squeeze import squeeze_excitation_onednn
from .products import matmul_into
from .shared_rules import SameShape, expect_float_inputs
from .squeeze_numba import squeeze_excitation_channels_last
from .torch_channels_last import squeeze_excitation
from .torch_cpu import CHANNELS_LAST_TACTIC, Kernel, TorchOperator

__all__ = ["SqueezeExcitationOperator"]


@register_operator
class SqueezeExcitationOperator(SameShape, TorchOperator):
    """``out = x * act2(W2 @ act1(W1 @ mean(x) + b1) + b2)`` per image and channel (see the module's note)."""

    kind = "squeeze_excitation"
    channels_last = True

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        first = np.asarray(self.weights["kernel1"], np.float32)
        second = np.asarray(self.weights["kernel2"], np.float32)
        self.squeezed = int(first.shape[-2]) if first.ndim >= 2 else 1
        self.channels = int(first.size // self.squeezed)
        #: the products' right-hand sides: [C, M] and [M, C]
        self._w1 = np.ascontiguousarray(first.reshape(self.squeezed, self.channels).T)
        self._w2 = np.ascontiguousarray(second.reshape(self.channels, self.squeezed).T)
        self._b1 = np.asarray(self.weights["bias1"], np.float32).reshape(-1) if "bias1" in self.weights else None
        self._b2 = np.asarray(self.weights["bias2"], np.float32).reshape(-1) if "bias2" in self.weights else None
        self._acts = [
            (
                str(self.params.get(f"activation{k}", "")),
                float(self.params.get(f"activation{k}_alpha", 0.0)),
                float(self.params.get(f"activation{k}_beta", 0.0)),
            )
            for k in (1, 2)
        ]
        for name, _, _ in self._acts:
            if name:
                activation_kernel(name)  # an unknown type raises here

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_float_inputs(self, input_types, 1)
        return [input_types[0]]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        shapes = super().output_shapes(input_shapes, input_values)
        channels = input_shapes[0][1]
        if len(input_shapes[0]) < 3 or (channels.is_constant() and channels.get_constant_value() != self.channels):
            raise ShapeError(
                f"squeeze_excitation: takes [N, {self.channels}, spatial...], got {[str(d) for d in input_shapes[0]]}"
            )
        return shapes

    def torch_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """``[N, C, H, W]`` inputs of a type PyTorch computes here (FLOAT; on a GPU also HALF)."""
        return super().torch_supports(types, shapes, constant) and len(shapes[0]) == 4

    def channels_last_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """What :meth:`torch_supports` takes: between channels-last convolutions the block keeps their run."""
        return True

    def channels_last_positions(self, inputs: int, outputs: int) -> list[int]:
        """The input and the output."""
        return [0, inputs]

    def direct_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """``[N, C, H, W]`` inputs whose activations oneDNN has post-ops for (``ops/onednn_squeeze.py``)."""
        return len(shapes[0]) == 4 and all(not name or name in onednn.ACTIVATIONS for name, _, _ in self._acts)

    def direct_kernel(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> Kernel | None:
        """oneDNN's primitives called directly (``ops/onednn_squeeze.py``), channels-last in a channels-last run."""
        if self.tactic != CHANNELS_LAST_TACTIC and any(f != TensorFormat.LINEAR for f in self.formats):
            return None
        weights = (self._w1, self._b1, self._w2, self._b2)
        return squeeze_excitation_onednn(self._acts, weights, inputs[0], outputs[0], self.formats)

    def torch_kernel(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> Kernel | None:
        weights = (self._w1, self._b1, self._w2, self._b2)
        if self.xp is not np:  # the device's copies, kept across binds
            xp = self.xp
            w1, b1, w2, b2 = (None if w is None else self.on_device(("torch", k), w, xp) for k, w in enumerate(weights))
            return squeeze_excitation(self._acts, (w1, b1, w2, b2), inputs[0], outputs[0], self.formats)
        if self.tactic == CHANNELS_LAST_TACTIC:  # Numba's compiled block where it computes it (ops/squeeze_numba.py)
            loop = squeeze_excitation_channels_last(self._acts, weights, inputs[0], outputs[0], self.formats)
            if loop is not None:
                return loop
        return squeeze_excitation(self._acts, weights, inputs[0], outputs[0], self.formats)

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x, out = inputs[0], outputs[0]
        n, c = x.shape[0], x.shape[1]
        flat = x.reshape(n, c, -1)
        pooled = self.scratch("pooled", (n, c), np.float32, xp)
        pooled[...] = xp.mean(flat, axis=2, dtype=np.float32)  # as the global pooling layer
        hidden = self.scratch("hidden", (n, self.squeezed), np.float32, xp)
        scale = self.scratch("scale", (n, c), np.float32, xp)
        for source, weight, bias, act, target in (
            (pooled, self._w1, self._b1, self._acts[0], hidden),
            (hidden, self._w2, self._b2, self._acts[1], scale),
        ):
            # the backend's product: on a GPU cuBLAS through PyTorch, which a CUDA graph can capture
            on_device = None if bias is None else self.on_device(("b", id(bias)), bias, xp)
            matmul_into(xp, source, self.on_device(("w", id(weight)), weight, xp), target, on_device)
            if act[0]:
                activation_kernel(act[0])(xp, target, target, act[1], act[2])
        shape = (n, c) + (1,) * (x.ndim - 2)
        xp.multiply(x, scale.reshape(shape).astype(x.dtype, copy=False), out=out)

