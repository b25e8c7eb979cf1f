"""N-D transposed convolution (ONNX ConvTranspose): groups, strides, dilations, pads, output padding and shape.

The CPU strategy is the mirror of convolution's: one batched matrix multiply
gives, for every input position, the contribution of each kernel tap
(``[N, M, prod(kernel), *in]``, the kernel packed at build time by
:func:`pack_deconv_kernel`), and col2im adds each tap's slice into the output at
``in * stride + tap * dilation - pad_begin``. Output size per axis:
``stride * (in - 1) + output_padding + (kernel - 1) * dilation + 1 - pad_begin - pad_end``,
or ``output_shape`` when given (pads then follow ONNX's rule: the odd pad goes
to the beginning, except with ``SAME_UPPER``); ``SAME_*`` without
``output_shape`` gives ``in * stride``.

With PyTorch installed the builder also times ``torch.nn.functional.conv_transpose{1,2,3}d``
(oneDNN) per layer and keeps the faster (:mod:`plugrt.ops.torch_cpu`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import NetworkError, ShapeError
from ..core.types import DataType, TensorFormat
from ..shape import DimensionOperation, IDimensionExpr, constant, operation
from .base import InputShapes, InputValues, ShapeExprs, register_operator
from .elementwise import label
from .onednn_deconv import deconvolution_onednn
from .product_parts import matmul_parts_into
from .shared_rules import expect_float_inputs
from .spatial import Window, kernel_taps
from .torch_cpu import Kernel, TorchOperator
from .torch_cpu_kernels import deconvolution as torch_deconvolution

__all__ = ["DeconvolutionOperator", "pack_deconv_kernel"]


def pack_deconv_kernel(kernel: Any, group: int, xp: Any = np) -> Any:
    """An ONNX ConvTranspose kernel ``[C, M / group, *k]`` as ``[group, M / group * prod(k), C / group]``
    (an array of ``xp``, from one of ``xp``)."""
    kernel = xp.asarray(kernel)
    channels = kernel.shape[0]
    grouped = kernel.reshape(group, channels // group, -1)
    return xp.ascontiguousarray(grouped.transpose(0, 2, 1), dtype=np.float32)


@register_operator
class DeconvolutionOperator(TorchOperator):
    """``out = conv_transpose(x, kernel) + bias``.

    params: ``kernel_shape``, ``strides``, ``dilations``, ``pads``, ``auto_pad``, ``group``,
    ``num_output_maps`` (M), ``output_padding``, ``output_shape`` (spatial, optional), ``has_bias``.
    weights: ``kernel`` (packed by :func:`pack_deconv_kernel`) and ``bias`` ``[M]``; without
    ``kernel`` the kernel is input 1 (``[C, M / group, *k]``), without ``bias`` but with
    ``has_bias`` the bias is the next input.
    """

    kind = "deconvolution"

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        self.window = Window.from_params(self.params, f"deconvolution {self.name!r}")
        rank = self.window.rank
        self.group = int(self.params.get("group", 1))
        self.maps = int(self.param("num_output_maps"))
        if self.group < 1 or self.maps % self.group:
            raise NetworkError(
                f"deconvolution: num_output_maps {self.maps} must be a multiple of group {self.group} (group >= 1)"
            )
        self.output_padding = [int(v) for v in self.params.get("output_padding") or [0] * rank]
        shape = self.params.get("output_shape")
        self.output_shape = None if not shape else [int(v) for v in shape][-rank:]
        if len(self.output_padding) != rank:
            raise NetworkError(f"deconvolution: output_padding {self.output_padding} needs {rank} values")
        self.has_bias = bool(self.params.get("has_bias", "bias" in self.weights))
        self._inputs = 1 + ("kernel" not in self.weights) + (self.has_bias and "bias" not in self.weights)
        self._shapes: tuple[tuple[int, ...], tuple[int, ...]] | None = None
        self._taps: list[tuple[tuple[Any, ...], tuple[Any, ...]]] = []
        self._cols_shape: tuple[int, ...] = ()
        self._tiled = False

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_float_inputs(self, input_types, self._inputs)
        return [input_types[0]]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        x, rank = input_shapes[0], self.window.rank
        if len(x) != rank + 2:
            raise ShapeError(
                f"{label(self)}: input has rank {len(x)}; a {rank}-D transposed convolution takes "
                f"[N, C, {rank} spatial dims]"
            )
        if "kernel" in self.weights:
            channels = self.weights["kernel"].shape[2] * self.group
        else:
            kernel = input_shapes[1]
            if len(kernel) != rank + 2 or not kernel[0].is_constant():
                raise ShapeError(f"{label(self)}: the kernel input must have a known shape [C, M / group, *kernel]")
            channels = kernel[0].get_constant_value()
        if x[1].is_constant() and x[1].get_constant_value() != channels:
            raise ShapeError(
                f"{label(self)}: input has {x[1].get_constant_value()} channels, the kernel expects {channels}"
            )
        return [[x[0], constant(self.maps), *(self._output_dim(a, d) for a, d in enumerate(x[2:]))]]

    def _output_dim(self, axis: int, size: IDimensionExpr) -> IDimensionExpr:
        w = self.window
        if self.output_shape is not None:
            return constant(self.output_shape[axis])
        stride = constant(w.strides[axis])
        if w.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            return operation(DimensionOperation.PROD, size, stride)
        pads = 0 if w.auto_pad == "VALID" else w.pads_begin[axis] + w.pads_end[axis]
        base = operation(DimensionOperation.PROD, operation(DimensionOperation.SUB, size, constant(1)), stride)
        return operation(DimensionOperation.SUM, base, constant(self.output_padding[axis] + w.extent(axis) - pads))

    def pad_begin(self, axis: int, size: int, out: int) -> int:
        """The padding at the beginning of spatial ``axis`` for an input of ``size`` and an output of ``out``."""
        w = self.window
        if self.output_shape is None and w.auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
            return 0 if w.auto_pad == "VALID" else w.pads_begin[axis]
        total = w.strides[axis] * (size - 1) + self.output_padding[axis] + w.extent(axis) - out
        return total // 2 if w.auto_pad == "SAME_UPPER" else total - total // 2

    # --- kernel -------------------------------------------------------------------------
    def torch_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """FLOAT 1-, 2- and 3-D transposed convolutions."""
        return super().torch_supports(types, shapes, constant) and self.window.rank <= 3

    def direct_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """2-D transposed convolutions whose kernel (and bias) are weights (``ops/onednn_deconv.py``)."""
        return self.window.rank == 2 and "kernel" in self.weights and (not self.has_bias or "bias" in self.weights)

    def direct_kernel(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> Kernel | None:
        """oneDNN's deconvolution primitive called directly (``ops/onednn_deconv.py``)."""
        if any(f != TensorFormat.LINEAR for f in self.formats):
            return None
        return deconvolution_onednn(self, inputs[0], outputs[0], self.formats[:1] + self.formats[-1:])

    def torch_kernel(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> Kernel | None:
        kernel = None if "kernel" in self.weights else inputs[1]
        bias = inputs[-1] if self.has_bias and "bias" not in self.weights else None
        return torch_deconvolution(self, inputs[0], kernel, bias, outputs[0])

    def prepare(self, input_shapes: Sequence[tuple[int, ...]], output_shapes: Sequence[tuple[int, ...]]) -> None:
        x_shape, out_shape = tuple(input_shapes[0]), tuple(output_shapes[0])
        if self._shapes == (x_shape, out_shape):
            return
        n = x_shape[0]
        spatial, out_spatial = x_shape[2:], out_shape[2:]
        w = self.window
        begins = [self.pad_begin(a, spatial[a], out_spatial[a]) for a in range(w.rank)]
        taps = math.prod(w.kernel)
        self._cols_shape = (n, self.maps, taps, *spatial)
        self._taps = []
        for t, pairs in kernel_taps(w, out_spatial, spatial, begins):
            src = (slice(None), slice(None), t, *(p[0] for p in pairs))
            dst = (slice(None), slice(None), *(p[1] for p in pairs))
            self._taps.append((dst, src))
        #: every output element gets exactly one tap (kernel == stride, no dilation, padding or output
        #: padding: PP-OCR det's 2x2 upsampling): the product is laid out in one strided pass
        self._tiled = all(
            k == st and d == 1 and b == 0 and o == i * st
            for k, st, d, b, i, o in zip(w.kernel, w.strides, w.dilations, begins, spatial, out_spatial)
        )
        self._shapes = (x_shape, out_shape)

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x, out = inputs[0], outputs[0]
        if self._shapes is None or self._shapes != (x.shape, out.shape):
            self.prepare([a.shape for a in inputs], [out.shape])
        n, channels = x.shape[:2]
        if "kernel" in self.weights:
            kernel = self.weight("kernel", xp)
        else:
            kernel = pack_deconv_kernel(inputs[1], self.group, xp)
        source = x.reshape(n, self.group, channels // self.group, -1)
        if source.dtype != np.float32:
            source = source.astype(np.float32)
        cols = self.scratch("cols", self._cols_shape, np.float32, xp)
        matmul_parts_into(xp, kernel, source, cols.reshape(n, self.group, kernel.shape[1], -1))
        target = out
        if out.dtype != np.float32:
            target = self.scratch("acc", out.shape, np.float32, xp)
        bias = None
        if self.has_bias:
            bias = xp.asarray(self.weight("bias", xp) if "bias" in self.weights else inputs[-1], dtype=np.float32)
        if self._tiled:
            self._lay_out(xp, cols, bias, target)
        else:
            if bias is not None:
                target.reshape(n, self.maps, -1)[...] = bias.reshape(-1, 1)
            else:
                target.fill(0)
            for dst, src in self._taps:
                region = target[dst]
                xp.add(region, cols[src], out=region)
        if target is not out:
            xp.copyto(out, target, casting="unsafe")

    def _lay_out(self, xp: Any, cols: Any, bias: Any, target: Any) -> None:
        """``target`` = each input position's taps (``cols``, ``[N, M, taps, *in]``) at ``in * stride + tap``,
        plus ``bias``: one write per output element, tap by tap (the taps of a tiled kernel never overlap)."""
        rank, (n, maps), spatial = self.window.rank, cols.shape[:2], cols.shape[3:]
        kernel = self.window.kernel
        tiles = target.reshape(n, maps, *(d for a in range(rank) for d in (spatial[a], kernel[a])))
        shift = None if bias is None else bias.reshape(-1, *(1,) * rank)
        every = (slice(None), slice(None))
        for t, tap in enumerate(np.ndindex(*kernel)):
            tile = tiles[every + tuple(part for k in tap for part in (slice(None), k))]
            source = cols[:, :, t]
            if shift is None:
                xp.copyto(tile, source)
            else:
                xp.add(source, shift, out=tile)
