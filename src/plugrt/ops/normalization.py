"""Normalization: batch (inference and training), instance, group and layer normalization.

Batch normalization at inference is a per-channel affine map; with constant
statistics it is folded at build time into ``scale`` and ``shift`` weights
(:func:`fold_batch_norm`). The other three normalize rows of a 2-D view of the
input: instance ``[N * C, spatial]``, group ``[N * groups, C / groups * spatial]``,
layer ``[prod(shape[:axis]), prod(shape[axis:])]``, then scale and shift
(per channel, per group, or broadcast over ``shape[axis:]``). Statistics are
computed in FLOAT whatever the input type; the centred input is written into
the output (or a FLOAT work buffer for HALF) and normalized in place. With PyTorch installed,
``layer_norm`` / ``group_norm`` are a second tactic, timed per layer at build
(:mod:`plugrt.ops.torch_cpu`): one kernel where this one makes several passes.

Layer normalization may read a residual (``residual``: ``LayerNorm(x + r)``, what the
``residual_layer_norm`` pass fuses on a GPU) and also give the sum as its last output
(``keep_sum``). On a GPU its own kernel is the one-pass CUDA kernel
(:mod:`plugrt.ops.layer_norm_cuda`) where rows, types and alignment suit it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import NetworkError, ShapeError
from ..core.types import DataType
from ..shape import constant
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .elementwise import label
from .onednn_elementwise import layer_norm_onednn
from .params import param
from .shared_rules import expect_float_inputs
from .torch_cpu import Kernel, TorchOperator
from .torch_cpu_kernels import normalization as torch_normalization

__all__ = ["BatchNormalizationOperator", "NormalizationOperator", "fold_batch_norm"]


def fold_batch_norm(scale: Any, bias: Any, mean: Any, var: Any, epsilon: float, xp: Any = np) -> dict[str, Any]:
    """``scale * (x - mean) / sqrt(var + epsilon) + bias`` as ``x * scale' + shift'`` (FLOAT weights).

    The statistics are arrays of ``xp`` (NumPy at build time, the run's module in a kernel).
    """
    factor = xp.asarray(scale, np.float64) / xp.sqrt(xp.asarray(var, np.float64) + epsilon)
    shift = xp.asarray(bias, np.float64) - xp.asarray(mean, np.float64) * factor
    return {"scale": factor.astype(np.float32).reshape(-1), "shift": shift.astype(np.float32).reshape(-1)}


def _channel_view(vector: Any, rank: int, xp: Any = np) -> Any:
    """A per-channel vector (an array of ``xp``) shaped to broadcast over ``[N, C, *spatial]``."""
    return xp.asarray(vector, dtype=np.float32).reshape((-1,) + (1,) * (rank - 2))


@register_operator
class BatchNormalizationOperator(Operator):
    """params: ``epsilon``, ``training_mode`` (bool), ``momentum``.

    Inference with weights ``scale`` and ``shift`` (from :func:`fold_batch_norm`) takes one
    input; otherwise inputs are x, scale, bias, mean, var. In training mode the batch
    statistics normalize, and outputs 1 and 2 (when present) are the updated running mean
    and variance ``running * momentum + batch * (1 - momentum)``.
    """

    kind = "batch_normalization"
    epsilon: float = param(float, default=1e-5)
    training: bool = param(bool, key="training_mode", default=False)
    momentum: float = param(float, default=0.9)
    outputs: int = param(int, key="num_outputs", default=1)

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        self.folded = "scale" in self.weights and "shift" in self.weights
        if self.folded and self.training:
            raise NetworkError("batch_normalization: training mode takes its statistics as inputs, not weights")
        if not 1 <= self.outputs <= 3 or (self.outputs > 1 and not self.training):
            raise NetworkError(f"batch_normalization: {self.outputs} outputs; only training mode has 3")

    @property
    def num_outputs(self) -> int:
        return self.outputs

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_float_inputs(self, input_types, 1 if self.folded else 5)
        return [input_types[0]] + [input_types[min(3, len(input_types) - 1)]] * (self.outputs - 1)

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        x = input_shapes[0]
        if len(x) < 2:
            raise ShapeError(f"{label(self)}: batch normalization takes [N, C, ...], got rank {len(x)}")
        channels = self.weights["scale"].shape[0] if self.folded else None
        if channels is not None and x[1].is_constant() and x[1].get_constant_value() != channels:
            raise ShapeError(
                f"{label(self)}: input has {x[1].get_constant_value()} channels, the statistics {channels}"
            )
        return [list(x)] + [[x[1]]] * (self.outputs - 1)

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x, out = inputs[0], outputs[0]
        if self.folded:
            scale, shift = self.weight("scale", xp), self.weight("shift", xp)
        elif not self.training:
            folded = fold_batch_norm(inputs[1], inputs[2], inputs[3], inputs[4], self.epsilon, xp)
            scale, shift = folded["scale"], folded["shift"]
        else:
            axes = (0, *range(2, x.ndim))
            mean = x.mean(axis=axes, dtype=np.float64)
            var = x.var(axis=axes, dtype=np.float64)
            folded = fold_batch_norm(inputs[1], inputs[2], mean, var, self.epsilon, xp)
            scale, shift = folded["scale"], folded["shift"]
            for index, (running, batch) in enumerate(((inputs[3], mean), (inputs[4], var)), start=1):
                if index < len(outputs):
                    outputs[index][...] = running * self.momentum + batch * (1.0 - self.momentum)
        if out.dtype == np.float32:
            xp.multiply(x, _channel_view(scale, x.ndim, xp), out=out)
            xp.add(out, _channel_view(shift, x.ndim, xp), out=out)
        else:
            out[...] = x * _channel_view(scale, x.ndim, xp) + _channel_view(shift, x.ndim, xp)


_MODES = ("instance", "group", "layer")


@register_operator
class NormalizationOperator(TorchOperator):
    """Instance, group or layer normalization with scale and optional bias.

    params: ``mode`` (instance, group, layer), ``epsilon``, ``axis`` (layer), ``num_groups``
    and ``per_group_affine`` (group: scale and bias of ``num_groups`` values, ONNX opset
    18, rather than one per channel), ``has_bias``, ``stash_outputs`` (layer: 1 or 2 more
    FLOAT outputs, the mean and the inverse standard deviation, reduced axes kept as 1).
    weights ``scale`` and ``bias`` (optional); what is not a weight is an input (x, scale, bias).
    """

    kind = "normalization"
    mode: str = param(choices=_MODES)
    epsilon: float = param(float, default=1e-5)
    axis: int = param(int, default=-1)
    groups: int = param(int, key="num_groups", default=1)
    per_group: bool = param(bool, key="per_group_affine", default=False)
    has_bias: bool = param(bool, default=True)
    stash: int = param(int, key="stash_outputs", default=0)
    residual: bool = param(bool, default=False)
    keep_sum: bool = param(bool, default=False)

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        if self.stash and self.mode != "layer":
            raise NetworkError("normalization: only layer normalization gives mean and inverse deviation outputs")
        if self.residual and (self.mode != "layer" or self.stash):
            raise NetworkError("normalization: a residual is read by layer normalization without statistics outputs")
        if self.keep_sum and not self.residual:
            raise NetworkError("normalization: keep_sum gives the sum of x and a residual, and there is none")
        self._scale_at = 1 + self.residual
        self._inputs = self._scale_at + ("scale" not in self.weights) + (self.has_bias and "bias" not in self.weights)
        self._shape: tuple[int, ...] | None = None
        self._rows = (0, 0)
        self._kernel_affine: tuple[Any, Any] | None = None  # FLOAT gamma and beta the CUDA kernel reads
        self._host_vectors: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    @property
    def num_outputs(self) -> int:
        return 1 + self.stash + self.keep_sum

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_float_inputs(self, input_types, self._inputs)
        if self.residual and input_types[1] != input_types[0]:
            raise NetworkError(
                f"{label(self)}: the residual is {input_types[1].name}, the input {input_types[0].name}; they must agree"
            )
        return [input_types[0]] + [DataType.FLOAT] * self.stash + [input_types[0]] * self.keep_sum

    def _first_axis(self, rank: int) -> int:
        if self.mode != "layer":
            return 1
        axis = self.axis + rank if self.axis < 0 else self.axis
        if not 0 <= axis < rank:
            raise ShapeError(f"{label(self)}: axis {self.axis} is outside the input's {rank} dimensions")
        return axis

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        x = input_shapes[0]
        if self.mode != "layer" and len(x) < 3:
            raise ShapeError(f"{label(self)}: {self.mode} normalization takes [N, C, spatial...], got rank {len(x)}")
        channels = x[1] if self.mode != "layer" else None
        if self.mode == "group" and channels is not None and channels.is_constant():
            if channels.get_constant_value() % self.groups:
                raise ShapeError(
                    f"{label(self)}: {channels.get_constant_value()} channels do not split into {self.groups} groups"
                )
        axis = self._first_axis(len(x))
        if self.residual:
            r = input_shapes[1]
            if len(r) != len(x) or any(
                a.is_constant() and b.is_constant() and a.get_constant_value() != b.get_constant_value()
                for a, b in zip(x, r)
            ):
                raise ShapeError(f"{label(self)}: the residual's dims {list(r)} are not the input's {list(x)}")
        stats = list(x[:axis]) + [constant(1)] * (len(x) - axis)
        return [list(x)] + [stats] * self.stash + [list(x)] * self.keep_sum

    def torch_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """Without statistics outputs or a residual, and for group normalization with one scale and bias per
        channel."""
        if self.stash or self.residual or (self.mode == "group" and self.per_group):
            return False
        return super().torch_supports(types, shapes, constant)

    def direct_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """Layer, instance and group normalization without statistics outputs, a residual or per-group affine values
        (``ops/onednn_elementwise.py``)."""
        return not (self.stash or self.residual or (self.mode == "group" and self.per_group))

    def direct_kernel(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> Kernel | None:
        """oneDNN's layer-normalization primitive called directly, over rows of the normalized elements
        (``ops/onednn_elementwise.py``)."""
        return layer_norm_onednn(self, inputs, outputs[0])

    def torch_kernel(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> Kernel | None:
        return torch_normalization(self, inputs, outputs[0])

    def prepare(self, input_shapes: Sequence[tuple[int, ...]], output_shapes: Sequence[tuple[int, ...]]) -> None:
        shape = tuple(input_shapes[0])
        if self.residual and tuple(input_shapes[1]) != shape:
            raise ShapeError(f"{label(self)}: the residual's shape {tuple(input_shapes[1])} is not the input's {shape}")
        self._shape = shape
        total = int(np.prod(shape, dtype=np.int64))
        if self.mode == "instance":
            rows = shape[0] * shape[1]
        elif self.mode == "group":
            rows = shape[0] * self.groups
        else:
            rows = int(np.prod(shape[: self._first_axis(len(shape))], dtype=np.int64))
        self._rows = (rows, total // rows if rows else 0)

    def _affine(self, name: str, index: int, inputs: Sequence[Any], shape: tuple[int, ...], xp: Any) -> Any:
        vector = self.weight(name, xp) if name in self.weights else inputs[index]
        vector = xp.asarray(vector, dtype=np.float32)
        if self.mode == "layer":
            return vector
        if self.mode == "group" and self.per_group:
            vector = xp.repeat(vector.reshape(-1), shape[1] // self.groups)
        return _channel_view(vector, len(shape), xp)

    def direct_launch(
        self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any
    ) -> tuple[Any, tuple[Any, ...]] | None:
        """On a GPU, layer normalization as the one-pass CUDA kernel where it takes these rows (contiguous,
        16-byte aligned arrays of one FLOAT or HALF type; FLOAT scale and bias of one value per column)."""
        self._kernel_affine = None
        if xp is np or self.mode != "layer" or self.stash:
            return None
        from .layer_norm_cuda import layer_norm_launch, supports

        rows, cols = self._rows
        x, out = inputs[0], outputs[0]
        arrays = [x, out, *inputs[1 : 1 + self.residual], *outputs[1:]]
        if rows == 0 or not supports(x.dtype, cols):
            return None
        if any(a.dtype != x.dtype or not a.flags.c_contiguous or a.data.ptr % 16 for a in arrays):
            return None
        affine = [self._kernel_vector("scale", self._scale_at, inputs, cols, xp)]
        affine.append(
            self._kernel_vector("bias", self._inputs - 1, inputs, cols, xp)
            if self.has_bias
            else self.scratch("no_bias", (cols,), np.float32, xp, zero=True)
        )
        if any(v is None for v in affine):
            return None
        self._kernel_affine = (affine[0], affine[1])  # the kernel reads their addresses: kept alive here
        return layer_norm_launch(
            x.data.ptr,
            affine[0].data.ptr,
            affine[1].data.ptr,
            out.data.ptr,
            rows,
            cols,
            self.epsilon,
            x.dtype,
            residual=inputs[1].data.ptr if self.residual else 0,
            total=outputs[1].data.ptr if self.keep_sum else 0,
        )

    def _kernel_vector(self, name: str, index: int, inputs: Sequence[Any], cols: int, xp: Any) -> Any:
        """Scale or bias as a contiguous FLOAT vector of ``cols`` values for the CUDA kernel (a weight converted
        once; an input only where it is one already), else None."""
        if name in self.weights:
            stored = self.weights[name]
            kept = self._host_vectors.get(name)
            if kept is None or kept[0] is not stored:  # converted once per stored array
                kept = self._host_vectors[name] = (stored, np.ascontiguousarray(stored, dtype=np.float32).reshape(-1))
            vector = self.on_device(("kernel", name), kept[1], xp)
        else:
            vector = inputs[index]
            if vector.dtype != np.float32 or not vector.flags.c_contiguous or vector.data.ptr % 16:
                return None
        return vector if vector.size == cols else None

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x, out = inputs[0], outputs[0]
        if self.residual:  # the sum, rounded to the input's type as a separate add stores it, then normalized
            total = outputs[-1] if self.keep_sum else out
            xp.add(x, inputs[1], out=total)
            x = total
        if self._shape != x.shape:
            self.prepare([x.shape, *[x.shape] * self.residual], [out.shape])
        rows, length = self._rows
        work = out
        if out.dtype != np.float32:
            work = self.scratch("work", out.shape, np.float32, xp)
        flat_x, flat = x.reshape(rows, length), work.reshape(rows, length)
        mean = flat_x.mean(axis=1, dtype=np.float32)
        xp.subtract(flat_x, mean[:, None], out=flat)
        if xp is np:
            inverse = np.einsum("ij,ij->i", flat, flat)  # the sums of squares, without a temporary
        else:  # CuPy's einsum makes this a batched cuBLAS product, which a CUDA graph capture refuses
            inverse = xp.square(flat).sum(axis=1)
        inverse /= max(length, 1)
        inverse += np.float32(self.epsilon)
        xp.sqrt(inverse, out=inverse)
        xp.reciprocal(inverse, out=inverse)
        xp.multiply(flat, inverse[:, None], out=flat)
        xp.multiply(work, self._affine("scale", self._scale_at, inputs, x.shape, xp), out=work)
        if self.has_bias:
            xp.add(work, self._affine("bias", self._inputs - 1, inputs, x.shape, xp), out=work)
        if work is not out:
            xp.copyto(out, work, casting="unsafe")
        if self.stash >= 1:
            outputs[1].reshape(-1)[...] = mean
        if self.stash >= 2:
            outputs[2].reshape(-1)[...] = inverse
